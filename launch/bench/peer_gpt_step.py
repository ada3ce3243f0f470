#!/usr/bin/python3
"""gpt-nano training-step throughput, ringtrain against plain PyTorch, side by side.

One rank, one thread each: ringtrain with OpenBLAS (OPENBLAS_NUM_THREADS=1)
and Debian's PyTorch CPU with torch.set_num_threads(1). The same model
(gpt-nano: 4 layers, 128 wide, 4 heads, context 128, byte vocabulary 256,
head tied to the token embedding), batch of windows, synthetic tokens and
optimizer (SGD with momentum 0.9): a step is forward + per-token
cross-entropy, backward and the update. The two alternate, --repeats times,
and the best run of each counts, so a neighbour's load on a shared machine
hits both alike.

  /usr/bin/python3 launch/bench/peer_gpt_step.py [--ringtrain build/ringtrain]
      [--batch 8] [--steps 20] [--repeats 3]

Prints tokens/s of each and the ratio ringtrain / PyTorch against the goal
(>= 1.0x). Exit status 0 whether or not the goal is met (it is a
measurement); 2 when something could not run.
"""
import argparse
import json
import math
import os
import sys
import time

from ringtrain_bench import run_ringtrain_bench

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYERS, WIDTH, HEADS, CONTEXT, VOCAB = 4, 128, 4, 128, 256


def gpt_nano(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.c_attn, self.attn_proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
            self.c_fc, self.mlp_proj = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(WIDTH, dim=2)
            q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
            # Plain attention as ringtrain's CPU layer computes it (the whole
            # score matrix, masked); PyTorch 1.13 has no fused CPU kernel.
            s = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            o = (s.masked_fill(~mask, float("-inf")).softmax(-1) @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.attn_proj(o)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(CONTEXT, WIDTH)
            self.h = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(WIDTH)

        def forward(self, ids):
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
            for block in self.h:
                x = block(x)
            return self.ln_f(x) @ self.wte.weight.t()

    return Gpt()


def run_torch(batch, steps, warmup):
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = gpt_nano(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randint(0, VOCAB, (batch, CONTEXT))
    y = torch.randint(0, VOCAB, (batch, CONTEXT))
    for step in range(warmup + steps):
        if step == warmup:
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    return batch * CONTEXT * steps / seconds, sum(p.numel() for p in model.parameters())


def run_ringtrain(exe, batch, steps, warmup):
    cmd = [exe, "bench", "step", "--model", "gpt-nano", "--batch", str(batch), "--steps",
           str(steps), "--warmup", str(warmup), "--classes", str(VOCAB), "--optimizer", "sgd",
           "--device", "cpu", "--json"]
    stdout = run_ringtrain_bench(cmd)
    r = json.loads([l for l in stdout.splitlines() if l.startswith("{")][-1])
    return r["samples_per_s"] * CONTEXT, r["params"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--batch", type=int, default=8, help="windows of 128 tokens per step")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if not os.access(a.ringtrain, os.X_OK):
        print("peer_gpt_step: no ringtrain executable at %s" % a.ringtrain, file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
    except ImportError:
        print("peer_gpt_step: PyTorch is missing (launch/install-deps.sh)", file=sys.stderr)
        return 2
    best_rt = best_pt = 0.0
    for _ in range(a.repeats):
        rt, params_rt = run_ringtrain(a.ringtrain, a.batch, a.steps, a.warmup)
        pt, params_pt = run_torch(a.batch, a.steps, a.warmup)
        best_rt, best_pt = max(best_rt, rt), max(best_pt, pt)
    if params_rt != params_pt:
        print("peer_gpt_step: %d parameters in ringtrain, %d in PyTorch" % (params_rt, params_pt),
              file=sys.stderr)
        return 2
    ratio = best_rt / best_pt
    print("# peer_gpt_step: gpt-nano (%d parameters), batch %d x %d tokens, %d timed steps, best of %d, 1 thread each"
          % (params_rt, a.batch, CONTEXT, a.steps, a.repeats))
    print("  ringtrain %.0f tokens/s, PyTorch %.0f tokens/s: %.2fx (goal >= 1.0x: %s)"
          % (best_rt, best_pt, ratio, "met" if ratio >= 1.0 else "not met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
