"""ringtrain's mixed-target loss (--augment mixup / cutmix) against PyTorch.

mixed_loss_dump prints, for each (lam, label smoothing), the mean loss and the
gradient of ringtrain's softmax cross-entropy with the target
lam onehot(labels) + (1 - lam) onehot(second); here PyTorch computes
torch.nn.functional.cross_entropy(logits, that soft target,
label_smoothing=e) and its gradient in float64, and the accuracy is counted
against the label of the larger weight (labels when lam >= 0.5).

  $RINGTRAIN_PYTHON tests/model/mixed_loss_torch.py MIXED_LOSS_DUMP
Exit 0 on a match, 1 on a mismatch, 77 where PyTorch is missing.
"""
import json
import subprocess
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print("SKIPPED: %s (launch/install-deps.sh installs python3-torch)" % e)
    sys.exit(77)


def main():
    out = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True,
                                    text=True).stdout)
    rows, classes = out["rows"], out["classes"]
    logits = torch.tensor(out["logits"], dtype=torch.float64).reshape(rows, classes)
    a = torch.tensor(out["labels"])
    b = torch.tensor(out["second"])
    failures = 0
    for case in out["cases"]:
        lam, e = case["lam"], case["smoothing"]
        target = lam * F.one_hot(a, classes).double() + (1.0 - lam) * F.one_hot(b, classes).double()
        z = logits.clone().requires_grad_(True)
        loss = F.cross_entropy(z, target, label_smoothing=e)
        loss.backward()
        # PyTorch's own two-CE form (torchvision's references train with it).
        two_ce = lam * F.cross_entropy(logits, a, label_smoothing=e) + \
            (1.0 - lam) * F.cross_entropy(logits, b, label_smoothing=e)
        grad = torch.tensor(case["grad"], dtype=torch.float64).reshape(rows, classes)
        chosen = a if lam >= 0.5 else b
        correct = int((logits.argmax(dim=1) == chosen).sum())
        loss_err = abs(case["loss"] - loss.item()) / max(abs(loss.item()), 1e-12)
        grad_err = (grad - z.grad).abs().max().item()
        ok = loss_err < 1e-5 and abs(two_ce.item() - loss.item()) < 1e-9 and grad_err < 1e-6 \
            and case["correct"] == correct
        print("lam %.2f smoothing %.1f: loss %.7f (torch %.7f, rel err %.1e), gradient max abs "
              "err %.1e, correct %d (torch %d) %s"
              % (lam, e, case["loss"], loss.item(), loss_err, grad_err, case["correct"], correct,
                 "ok" if ok else "MISMATCH"))
        failures += not ok
    if failures:
        print("FAIL: %d of %d cases differ from PyTorch" % (failures, len(out["cases"])))
        return 1
    print("ok: %d cases match torch.nn.functional.cross_entropy on soft targets"
          % len(out["cases"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
