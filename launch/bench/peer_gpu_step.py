#!/usr/bin/python3
"""GPU training-step throughput of ringtrain against PyTorch, side by side.

PyTorch on one GPU (cuda:0) against `ringtrain bench step --device cuda`, one
rank. Same model (translated from the ringtrain spec by peer_step.py), same
batch, synthetic inputs and labels already on the device, SGD with momentum
0.9 and lr 0.01: a step is forward + cross-entropy, backward and the update.
Warm-up steps are not timed; the timed window starts and ends with
torch.cuda.synchronize(). With --ringtrain the two alternate for --repeats
rounds per case, so clocks and a neighbour's load hit both alike, and each
row reports the median over rounds of the ratio ringtrain / PyTorch.

  /usr/bin/python3 launch/bench/peer_gpu_step.py [--ringtrain build/ringtrain]
      [--cases cnn@64,cnn@512,mlp:784-512-512-10@64,mlp:784-512-512-10@1024]
      [--steps 200] [--warmup 20] [--repeats 3] [--tf32 default]

Numerics, stated and matched on both sides:
- TF32 (--tf32, default "default"): PyTorch's defaults, set explicitly here
  in case the environment changed them: cuDNN convolutions may use TF32
  (torch.backends.cudnn.allow_tf32 = True), matmuls do not
  (torch.backends.cuda.matmul.allow_tf32 = False since PyTorch 1.12).
  ringtrain gets the matching --tf32 default. "on" / "off" set both sides'
  convolutions and matmuls alike.
- cuDNN algorithms: both sides use cuDNN's heuristics (PyTorch's default,
  torch.backends.cudnn.benchmark = False; ringtrain keeps deterministic
  ones, so its runs repeat bit for bit). --cudnn-benchmark on lets PyTorch
  measure instead, which ringtrain does not do.
- Both sides time steps queued back to back with one synchronize at the end
  of the window: ringtrain's samples/s is bench step's steady pass (its phase
  table comes from a separate pass that waits after every phase).

Prints one row per case. Exit status 0 whatever the ratios (a measurement);
2 when something could not run (no CUDA, no PyTorch, ringtrain failed, the
two models differ in parameter count). --self-test checks the parts that
need neither a GPU nor PyTorch.
"""
import argparse
import json
import os
import statistics
import sys
import time

from ringtrain_bench import run_ringtrain_bench

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_CASES = "cnn@64,cnn@512,mlp:784-512-512-10@64,mlp:784-512-512-10@1024"
# PyTorch's flags per --tf32 value: (torch.backends.cudnn.allow_tf32,
# torch.backends.cuda.matmul.allow_tf32). "default" is PyTorch's own default.
TF32_FLAGS = {"default": (True, False), "on": (True, True), "off": (False, False)}


def parse_cases(text):
    """'cnn@64,mlp:784-512-512-10@1024' -> [('cnn', 64), ('mlp:784-512-512-10', 1024)].

    The batch follows the last '@' (a model may itself be '@file')."""
    cases = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        model, sep, batch = item.rpartition("@")
        if not sep or not model or not batch.isdigit() or int(batch) <= 0:
            raise ValueError("--cases item %r: expected MODEL@BATCH, e.g. cnn@64" % item)
        cases.append((model, int(batch)))
    if not cases:
        raise ValueError("--cases is empty")
    return cases


def ringtrain_command(exe, model, batch, steps, warmup, input_shape, classes, tf32):
    return [exe, "bench", "step", "--device", "cuda", "--model", model, "--batch", str(batch),
            "--steps", str(steps), "--warmup", str(warmup), "--input", ",".join(map(str, input_shape)),
            "--classes", str(classes), "--optimizer", "sgd", "--tf32", tf32, "--json"]


def parse_bench_json(stdout):
    """The JSON object `ringtrain bench step --json` prints on rank 0 (one line;
    log lines start with '[rank' and are skipped)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and "samples_per_s" in r and "params" in r:
            return r
    raise ValueError("no JSON result with samples_per_s in ringtrain's output:\n" + stdout)


def median_ratio(ringtrain_rates, torch_rates):
    """Median over rounds of ringtrain / PyTorch, each round's pair taken together."""
    if len(ringtrain_rates) != len(torch_rates) or not ringtrain_rates:
        raise ValueError("need one PyTorch rate per ringtrain rate")
    return statistics.median(r / p for r, p in zip(ringtrain_rates, torch_rates))


def run_ringtrain(exe, model, batch, steps, warmup, input_shape, classes, tf32):
    cmd = ringtrain_command(exe, model, batch, steps, warmup, input_shape, classes, tf32)
    stdout = run_ringtrain_bench(cmd)
    r = parse_bench_json(stdout)
    if r.get("tf32") not in (None, tf32):
        raise RuntimeError("ringtrain ran with --tf32 %s, expected %s" % (r.get("tf32"), tf32))
    return float(r["samples_per_s"]), int(r["params"])


def set_torch_numerics(torch, tf32, cudnn_benchmark):
    cudnn_tf32, matmul_tf32 = TF32_FLAGS[tf32]
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
    torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
    torch.backends.cudnn.benchmark = cudnn_benchmark
    return ("torch.backends.cudnn.allow_tf32=%s, torch.backends.cuda.matmul.allow_tf32=%s, "
            "torch.backends.cudnn.benchmark=%s"
            % (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32,
               torch.backends.cudnn.benchmark))


def run_torch(torch, torch_model, model_spec, batch, steps, warmup, input_shape, classes):
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = torch_model(model_spec, input_shape, torch).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(batch, *input_shape, device=dev)
    y = torch.randint(0, classes, (batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    start = None
    for step in range(warmup + steps):
        if step == warmup:
            torch.cuda.synchronize(dev)
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - start
    params = sum(p.numel() for p in model.parameters())
    return batch * steps / seconds, params


def self_test():
    assert parse_cases(DEFAULT_CASES) == [("cnn", 64), ("cnn", 512), ("mlp:784-512-512-10", 64),
                                          ("mlp:784-512-512-10", 1024)]
    assert parse_cases(" @net.txt@32 ,") == [("@net.txt", 32)]
    for bad in ("cnn", "cnn@", "cnn@0", "@64", "cnn@x", ""):
        try:
            parse_cases(bad)
        except ValueError:
            continue
        raise AssertionError("parse_cases accepted %r" % bad)
    cmd = ringtrain_command("rt", "cnn", 64, 200, 20, [1, 28, 28], 10, "default")
    assert cmd[:3] == ["rt", "bench", "step"] and cmd[cmd.index("--device") + 1] == "cuda"
    assert cmd[cmd.index("--tf32") + 1] == "default" and cmd[cmd.index("--input") + 1] == "1,28,28"
    assert "--json" in cmd and cmd[cmd.index("--batch") + 1] == "64"
    out = ("[rank 0/host] bench step: model cnn ...\n"
           '{"model":"cnn","params":421642,"samples_per_s":51234.5,"tf32":"default"}\n')
    r = parse_bench_json(out)
    assert r["params"] == 421642 and r["samples_per_s"] == 51234.5
    try:
        parse_bench_json("[rank 0/host] no result\n{not json\n")
    except ValueError:
        pass
    else:
        raise AssertionError("parse_bench_json accepted output without a result")
    assert median_ratio([2.0, 3.0, 1.0], [1.0, 1.0, 1.0]) == 2.0
    assert abs(median_ratio([1.0, 4.0], [2.0, 2.0]) - 1.25) < 1e-12
    assert TF32_FLAGS["default"] == (True, False)
    sys.path.insert(0, HERE)
    from peer_step import layer_list  # noqa: E402  (the spec translation, torch-free part)
    names = [name for name, _, _ in layer_list("cnn")]
    assert names.count("conv2d") == 2 and names.count("linear") == 2, names
    print("peer_gpu_step: self-test passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=None,
                    help="ringtrain executable (e.g. build/ringtrain); without it only PyTorch runs")
    ap.add_argument("--cases", default=DEFAULT_CASES,
                    help="comma-separated MODEL@BATCH (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=200, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first (cuDNN Find, caches)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating rounds per case (median ratio)")
    ap.add_argument("--input", default="1,28,28", help="per-sample input shape")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--tf32", choices=sorted(TF32_FLAGS), default="default",
                    help="TF32 on both sides; default = PyTorch's defaults (conv TF32, matmul fp32)")
    ap.add_argument("--cudnn-benchmark", choices=["on", "off"], default="off",
                    help="torch.backends.cudnn.benchmark for PyTorch (ringtrain uses cuDNN's heuristics)")
    ap.add_argument("--self-test", action="store_true", help="check the GPU-free parts and exit")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    try:
        cases = parse_cases(a.cases)
    except ValueError as e:
        print("peer_gpu_step: %s" % e, file=sys.stderr)
        return 2
    if a.steps <= 0 or a.warmup < 0 or a.repeats <= 0:
        print("peer_gpu_step: --steps and --repeats must be positive, --warmup >= 0", file=sys.stderr)
        return 2
    if a.ringtrain is not None and not os.access(a.ringtrain, os.X_OK):
        print("peer_gpu_step: no ringtrain executable at %s (build it, or fix --ringtrain)" % a.ringtrain,
              file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("peer_gpu_step: PyTorch is missing: install a CUDA build of PyTorch, then run "
              "python3 %s" % sys.argv[0], file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("peer_gpu_step: CUDA is not available to PyTorch (torch %s, built for CUDA %s): no GPU "
              "visible, no driver, or a CPU-only PyTorch" % (torch.__version__, torch.version.cuda),
              file=sys.stderr)
        return 2
    sys.path.insert(0, HERE)
    from peer_step import torch_model  # noqa: E402
    input_shape = [int(d) for d in a.input.split(",")]
    settings = set_torch_numerics(torch, a.tf32, a.cudnn_benchmark == "on")
    print("# peer_gpu_step: %s, torch %s (CUDA %s, cuDNN %s); %d timed steps after %d warm-up, %d round(s)"
          % (torch.cuda.get_device_name(0), torch.__version__, torch.version.cuda,
             torch.backends.cudnn.version(), a.steps, a.warmup, a.repeats))
    print("# PyTorch: %s; ringtrain: --tf32 %s" % (settings, a.tf32))
    if os.environ.get("NVIDIA_TF32_OVERRIDE") is not None:
        print("# note: NVIDIA_TF32_OVERRIDE=%s is set and overrides TF32 on both sides"
              % os.environ["NVIDIA_TF32_OVERRIDE"])
    if a.ringtrain is None:
        print("# %-24s %6s %10s %14s" % ("model", "batch", "params", "pytorch/s"))
    else:
        print("# %-24s %6s %10s %14s %14s %8s" % ("model", "batch", "params", "ringtrain/s", "pytorch/s",
                                                  "ratio"))
    for model_spec, batch in cases:
        rt_rates, pt_rates = [], []
        params_pt = params_rt = 0
        try:
            for _ in range(a.repeats):
                pt, params_pt = run_torch(torch, torch_model, model_spec, batch, a.steps, a.warmup,
                                          input_shape, a.classes)
                pt_rates.append(pt)
                if a.ringtrain is not None:
                    rt, params_rt = run_ringtrain(a.ringtrain, model_spec, batch, a.steps, a.warmup,
                                                  input_shape, a.classes, a.tf32)
                    rt_rates.append(rt)
        except (RuntimeError, ValueError) as e:
            print("peer_gpu_step: %s@%d: %s" % (model_spec, batch, e), file=sys.stderr)
            return 2
        if a.ringtrain is None:
            print("  %-24s %6d %10d %14.0f" % (model_spec, batch, params_pt, statistics.median(pt_rates)))
        else:
            if params_rt != params_pt:
                print("peer_gpu_step: %s has %d parameters in ringtrain but %d in PyTorch"
                      % (model_spec, params_rt, params_pt), file=sys.stderr)
                return 2
            print("  %-24s %6d %10d %14.0f %14.0f %7.2fx"
                  % (model_spec, batch, params_rt, statistics.median(rt_rates), statistics.median(pt_rates),
                     median_ratio(rt_rates, pt_rates)))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
