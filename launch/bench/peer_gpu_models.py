#!/usr/bin/python3
"""PyTorch's training-step speed on the real-size models of the GPU speed table.

The peer side of the table in the README's "What has run on a GPU": torchvision's
resnet50, inception_v3 and vgg16 and a GPT-2 124M written here (torchvision has
none), trained with synthetic data already on the device, as PyTorch users run
them on one GPU:
- images: channels_last, SGD with momentum 0.9, cross-entropy, torch.autocast
  for bf16/fp16 (fp16 with a GradScaler), TF32 on for "tf32";
- gpt2: 12 layers, 12 heads, 768 wide, context 1024, vocabulary 50257 (padded
  to 50304 as llm.c does), tied head, scaled_dot_product_attention (flash),
  fused AdamW, bf16 autocast;
- cuDNN heuristics (torch.backends.cudnn.benchmark = False, PyTorch's default).
Each case: warm-up steps untimed, then --repeats windows of --steps steps, each
window between two torch.cuda.synchronize(); the row gives the median window.

  /usr/bin/python3 launch/bench/peer_gpu_models.py
      [--cases resnet50@256:bf16,resnet50@256:tf32,inception3@128:bf16,vgg16@128:bf16,gpt2@16:bf16]
      [--steps 10] [--warmup 5] [--repeats 3] [--json FILE] [--kernel-table FILE]
  --kernel-table FILE  after the timed windows, one more window of --steps steps under
      torch.profiler: each GPU kernel's time summed over its launches, heaviest first,
      in launch/ncu_kernel_table.py's format (one case; on the CPU, the operators'
      self times). Far cheaper than ncu, which serialises and instruments every launch.
  --device cpu --cases resnet50@2:fp32 --steps 1 --warmup 0 --repeats 1   (a check
      on a machine without a GPU: builds each model and takes a step)

Prints one line per case (samples/s, and tokens/s with the model FLOPs
utilisation for gpt2) and exits 0; 2 when something could not run.
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time

# The table format is launch/ncu_kernel_table.py's, so both sides read alike.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ncu_kernel_table import totals_table  # noqa: E402

MODELS = ("resnet50", "inception3", "vgg16", "gpt2")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
DEFAULT_CASES = "resnet50@256:bf16,resnet50@256:tf32,inception3@128:bf16,vgg16@128:bf16,gpt2@16:bf16"
# Dense bf16 peak of the GPUs this is run on, for the FLOPs utilisation.
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


def parse_cases(text):
    """'resnet50@256:bf16,gpt2@16:bf16' -> [('resnet50', 256, 'bf16'), ('gpt2', 16, 'bf16')]."""
    cases = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        model, _, rest = item.partition("@")
        batch, _, precision = rest.partition(":")
        precision = precision or "bf16"
        if model not in MODELS or not batch.isdigit() or int(batch) <= 0 or precision not in PRECISIONS:
            raise ValueError("--cases item %r: expected MODEL@BATCH[:PRECISION], MODEL one of %s, "
                             "PRECISION one of %s" % (item, ", ".join(MODELS), ", ".join(PRECISIONS)))
        cases.append((model, int(batch), precision))
    if not cases:
        raise ValueError("--cases is empty")
    return cases


def gpt2_model(torch, ctx, vocab=50304, layers=12, heads=12, width=768):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc, self.fc_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            if hasattr(F, "scaled_dot_product_attention"):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # PyTorch before 2.0 (the CPU check only)
                a = (q @ k.transpose(-2, -1)) / math.sqrt(c // heads)
                a = a.masked_fill(torch.ones(t, t, device=x.device).triu(1).bool(), float("-inf"))
                y = a.softmax(-1) @ v
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(width)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.blocks:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.t()  # tied head

    return GPT()


def build(torch, model, batch, dev):
    """(module, inputs, targets, loss function, optimizer factory, FLOPs per step or None)."""
    if model == "gpt2":
        ctx = 1024
        m = gpt2_model(torch, ctx)
        x = torch.randint(0, 50257, (batch, ctx), device=dev)
        y = torch.randint(0, 50257, (batch, ctx), device=dev)
        params = sum(p.numel() for p in m.parameters())
        # 6 N per token for the matrices, plus causal attention's 6 L T C
        # (half of 12 L T C: the masked half is not computed by flash attention)
        flops = batch * ctx * (6 * params + 6 * 12 * ctx * 768)

        def loss(out, target):
            return torch.nn.functional.cross_entropy(out.view(-1, out.shape[-1]).float(), target.view(-1))
        # weight_decay 0: ringtrain's AdamW default (its decay would be one
        # more multiply per parameter, not the comparison's point)
        return m, x, y, loss, lambda ps: torch.optim.AdamW(
            ps, lr=6e-4, weight_decay=0.0, **({"fused": True} if dev.type == "cuda" else {})), flops
    import torchvision
    if model == "resnet50":
        m, size = torchvision.models.resnet50(), 224
    elif model == "vgg16":
        m, size = torchvision.models.vgg16(), 224
    else:
        m, size = torchvision.models.inception_v3(aux_logits=False, init_weights=False), 299
    x = torch.rand(batch, 3, size, size, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=dev)
    m = m.to(memory_format=torch.channels_last)
    return m, x, y, torch.nn.CrossEntropyLoss(), lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9), None


def kernel_totals(torch, prof, dev):
    """{kernel name: (launches, total ms)} of a finished torch.profiler run: the
    GPU kernels on a GPU, the operators' self times on the CPU."""
    totals = {}
    for e in prof.key_averages():
        if dev.type == "cuda":
            if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
                continue
            us = getattr(e, "self_device_time_total", None)
            if us is None:
                us = getattr(e, "self_cuda_time_total", 0)
        else:
            us = e.self_cpu_time_total
        if us > 0:
            totals[e.key] = (e.count, us / 1e3)
    return totals


def run_case(torch, model, batch, precision, dev, steps, warmup, repeats, kernel_table=None):
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision in ("tf32", "bf16", "fp16")
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    if dev.type == "cuda":  # this case's peak alone (ringtrain's device_memory_peak_bytes)
        torch.cuda.reset_peak_memory_stats(dev)
    m, x, y, loss_fn, make_opt, flops = build(torch, model, batch, dev)
    m = m.to(dev).train()
    opt = make_opt(m.parameters())
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    if hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler(dev.type, enabled=precision == "fp16")
    else:  # PyTorch before 2.3
        scaler = torch.cuda.amp.GradScaler(enabled=precision == "fp16" and dev.type == "cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=low) if low else contextlib.nullcontext():
            out = m(x)
            loss = loss_fn(out, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    for _ in range(warmup):
        step()
    sync()
    windows = []
    # The timed steps are what a profiler started with --profile-from-start off
    # records (ringtrain's bench step marks the same), for a kernel-by-kernel table.
    if dev.type == "cuda":
        torch.cuda.profiler.start()
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            last = step()
        sync()
        windows.append(time.perf_counter() - start)
    if dev.type == "cuda":
        torch.cuda.profiler.stop()
    if kernel_table:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if dev.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(steps):
                step()
            sync()
        with open(kernel_table, "w") as f:
            f.write("# %s batch %d %s, %d step(s) under torch.profiler\n" % (model, batch, precision, steps))
            f.write(totals_table(kernel_totals(torch, prof, dev), 25) + "\n")
    if not math.isfinite(float(last)):
        raise RuntimeError("%s: non-finite loss %s" % (model, float(last)))
    seconds = statistics.median(windows) / steps
    row = {"model": model, "batch": batch, "precision": precision, "step_ms": seconds * 1e3,
           "samples_per_s": batch / seconds, "spread": (max(windows) - min(windows)) / statistics.median(windows),
           "params": sum(p.numel() for p in m.parameters())}
    if dev.type == "cuda":
        row["max_memory_allocated"] = torch.cuda.max_memory_allocated(dev)
    if flops:
        row["tokens_per_s"] = batch * 1024 / seconds
        row["tflops"] = flops / seconds / 1e12
    return row


def self_test():
    assert parse_cases("resnet50@256:bf16, gpt2@16") == [("resnet50", 256, "bf16"), ("gpt2", 16, "bf16")]
    for bad in ("resnet18@4:bf16", "resnet50@0:bf16", "vgg16@8:int8", "vgg16", ""):
        try:
            parse_cases(bad)
        except ValueError:
            continue
        raise AssertionError("parse_cases accepted %r" % bad)
    print("peer_gpu_models: self-test passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=DEFAULT_CASES, help="MODEL@BATCH[:PRECISION],... (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per window")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--repeats", type=int, default=3, help="timed windows (the median is reported)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--kernel-table", help="write the kernel-by-kernel table of one more window (one case)")
    ap.add_argument("--self-test", action="store_true", help="check the argument parsing and exit")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    try:
        cases = parse_cases(args.cases)
    except ValueError as e:
        print("peer_gpu_models: %s" % e, file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print("peer_gpu_models: PyTorch is needed (%s)" % e, file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("peer_gpu_models: no CUDA device (use --device cpu for a check without one)", file=sys.stderr)
        return 2
    dev = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    print("# PyTorch %s, cuDNN %s, %s; eager (no torch.compile)" % (torch.__version__, torch.backends.cudnn.version(), name),
          flush=True)
    if args.kernel_table and len(cases) != 1:
        print("peer_gpu_models: --kernel-table takes one case, not %d" % len(cases), file=sys.stderr)
        return 2
    rows = []
    for model, batch, precision in cases:
        try:
            r = run_case(torch, model, batch, precision, dev, args.steps, args.warmup, args.repeats,
                         args.kernel_table)
        except Exception as e:  # one case failing must not hide the others
            print("%-10s batch %4d %-4s FAILED: %s" % (model, batch, precision, e), flush=True)
            rows.append({"model": model, "batch": batch, "precision": precision, "error": str(e)})
            continue
        extra = ""
        if "tokens_per_s" in r:
            mfu = " (%.0f%% of %s's %g bf16)" % (100 * r["tflops"] / peak, name, peak) if peak else ""
            extra = "  %.0f tokens/s, %.1f TFLOP/s%s" % (r["tokens_per_s"], r["tflops"], mfu)
        if "max_memory_allocated" in r:
            extra += "  peak %.0f MiB" % (r["max_memory_allocated"] / 2**20)
        print("%-10s batch %4d %-4s %9.1f samples/s  %7.2f ms/step  spread %4.1f%%  %.1fM params%s"
              % (model, batch, precision, r["samples_per_s"], r["step_ms"], 100 * r["spread"],
                 r["params"] / 1e6, extra), flush=True)
        rows.append(r)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 2 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
