"""ringtrain's loss over rows of a padded vocabulary against PyTorch.

padded_loss_dump prints, for each storage dtype (fp32, bf16, fp16), label
smoothing, mix weight lam, fused or two-pass classifier and garbage in the
padding (1e4, which would win every row, or NaN, which would poison every
sum), the true columns of the stored logits, the loss sum, the correct count
and the whole padded gradient of grad_scale 1 / rows. Here PyTorch computes
the loss of the target (1 - e)(lam onehot(labels) + (1 - lam) onehot(second))
+ e / classes over the true columns in float64 (ignored rows: no loss, no
gradient), and this checks the loss, every gradient element (within one
rounding of the storage dtype), that every padded gradient element is exactly
+0, and that the garbage changed nothing (both paddings give the same bits).

  $RINGTRAIN_PYTHON tests/model/padded_loss_torch.py PADDED_LOSS_DUMP
Exit 0 on a match, 1 on a mismatch, 77 where PyTorch is missing.
"""
import json
import math
import subprocess
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print("SKIPPED: %s (launch/install-deps.sh installs python3-torch)" % e)
    sys.exit(77)

# One rounding of the stored gradient, relative (half an ulp), and fp32's.
ROUNDING = {"f32": 2.0 ** -23, "bf16": 2.0 ** -8, "f16": 2.0 ** -11}


def main():
    out = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True,
                                    text=True).stdout)
    rows, classes, stride = out["rows"], out["classes"], out["stride"]
    labels = torch.tensor(out["labels"])
    second = torch.tensor(out["second"])
    kept = labels != -100
    a = torch.where(kept, labels, torch.zeros_like(labels))
    failures = 0
    by_garbage = {}
    for case in out["cases"]:
        e, lam, dtype = case["smoothing"], case["lam"], case["dtype"]
        logits = torch.tensor(case["logits"], dtype=torch.float64).reshape(rows, classes)
        z = logits.clone().requires_grad_(True)
        target = lam * F.one_hot(a, classes).double() + \
            (1.0 - lam) * F.one_hot(second, classes).double()
        target = (1.0 - e) * target + e / classes
        per_row = -(target * F.log_softmax(z, dim=1)).sum(dim=1) * kept.double()
        loss_sum = per_row.sum()
        (loss_sum / rows).backward()
        chosen = a if lam >= 0.5 else second
        correct = int(((logits.argmax(dim=1) == chosen) & kept).sum())
        plain = -(F.log_softmax(logits, dim=1).gather(1, a[:, None])[:, 0] * kept.double()).sum()
        grad = torch.tensor(case["grad"], dtype=torch.float64).reshape(rows, stride)
        true_cols, padding = grad[:, :classes], grad[:, classes:]
        loss_err = abs(case["loss_sum"] - loss_sum.item()) / max(abs(loss_sum.item()), 1e-12)
        eval_err = abs(case["eval_loss_sum"] - plain.item()) / max(abs(plain.item()), 1e-12)
        tol = ROUNDING[dtype] * z.grad.abs() + 1e-7
        grad_bad = int(((true_cols - z.grad).abs() > tol).sum())
        padding_bad = sum(1 for v in padding.flatten().tolist()
                          if v != 0.0 or math.copysign(1.0, v) < 0)
        ok = loss_err < 1e-5 and eval_err < 1e-5 and grad_bad == 0 and padding_bad == 0 \
            and case["correct"] == correct and case["eval_counted"] == int(kept.sum()) \
            and case["eval_correct"] == int(((logits.argmax(dim=1) == a) & kept).sum())
        print("%-4s smoothing %.1f lam %.1f %-9s padding %-3s: loss rel err %.1e (eval %.1e), "
              "%d gradient elements off, %d padded ones not +0, correct %d (torch %d) %s"
              % (dtype, e, lam, "fused" if case["fused"] else "two-pass", case["garbage"],
                 loss_err, eval_err, grad_bad, padding_bad, case["correct"], correct,
                 "ok" if ok else "MISMATCH"))
        failures += not ok
        key = (dtype, e, lam, case["fused"])
        result = (case["loss_sum"], case["correct"], case["eval_loss_sum"], case["grad"])
        if key in by_garbage and by_garbage[key] != result:
            print("MISMATCH: the padding's garbage changed the result of %s" % (key,))
            failures += 1
        by_garbage[key] = result
    if failures:
        print("FAIL: %d of %d cases differ from PyTorch" % (failures, len(out["cases"])))
        return 1
    print("ok: %d cases over padded rows match PyTorch's float64 loss on the true classes"
          % len(out["cases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
