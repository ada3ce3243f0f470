#!/usr/bin/python3
"""Training-step throughput of ringtrain against PyTorch, side by side.

One rank, one thread each: ringtrain with OpenBLAS (OPENBLAS_NUM_THREADS=1),
PyTorch 1.13 CPU (Debian's python3-torch; launch/install-deps.sh --peer) with
torch.set_num_threads(1). Same model, batch, synthetic data and optimizer (SGD
with momentum 0.9): a step is forward + cross-entropy, backward and the update.
The two alternate, --repeats times, and the best run of each counts, so a
neighbour's load on a shared machine hits both alike.

  /usr/bin/python3 launch/bench/peer_step.py [--ringtrain build/ringtrain]
      [--models mlp:784-512-512-10,cnn] [--batch 64] [--steps 200] [--repeats 3]

Prints one row per model and the ratio ringtrain / PyTorch against the goals
(MLP >= 1.0x, CNN >= 0.8x). Exit status 0 whether or not the goals are met
(it is a measurement); 2 when something could not run.
"""
import argparse
import json
import os
import re
import sys
import time

from ringtrain_bench import run_ringtrain_bench

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CNN = ("input(1, 28, 28); conv2d(out=32, kernel=3, stride=1, padding=1); relu; "
       "max_pool2d(kernel=2, stride=2); conv2d(out=64, kernel=3, stride=1, padding=1); relu; "
       "max_pool2d(kernel=2, stride=2); flatten; linear(out=128); relu; linear(out=10)")


def layer_list(spec):
    """The layers of a preset or of a canonical ringtrain layer list."""
    if spec.startswith("mlp:"):
        sizes = [int(s) for s in spec[4:].split("-")]
        items = ["input(%d)" % sizes[0], "flatten"]
        for i, n in enumerate(sizes[1:]):
            items.append("linear(out=%d)" % n)
            if i + 2 < len(sizes):
                items.append("relu")
        spec = "; ".join(items)
    elif spec == "cnn":
        spec = CNN
    layers = []
    for item in re.split(r"[;\n]", spec):
        item = item.split("#")[0].strip()
        if not item:
            continue
        m = re.fullmatch(r"(\w+)\s*(?:\((.*)\))?", item)
        if not m:
            raise ValueError("cannot translate model item %r" % item)
        args = {}
        positional = []
        for a in (m.group(2) or "").split(","):
            a = a.strip()
            if not a:
                continue
            if "=" in a:
                k, v = a.split("=", 1)
                args[k.strip()] = float(v)
            else:
                positional.append(float(a))
        layers.append((m.group(1), positional, args))
    return layers


GRAPH_PRESETS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet20", "resnet32",
                 "resnet56", "vgg16", "vgg16_bn")


def cifar_resnet(depth, in_channels, classes, torch):
    """ringtrain's resnet20/32/56: He et al.'s CIFAR layout with projection
    shortcuts, with ringtrain's (torchvision-style) module names."""
    import torchvision
    nn = torch.nn
    block = torchvision.models.resnet.BasicBlock
    n = (depth - 2) // 6

    class CifarResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.relu = nn.ReLU()
            channels = 16
            for stage, width in enumerate((16, 32, 64)):
                blocks = []
                for b in range(n):
                    stride = 2 if stage > 0 and b == 0 else 1
                    down = None
                    if stride != 1 or channels != width:
                        down = nn.Sequential(nn.Conv2d(channels, width, 1, stride=stride, bias=False),
                                             nn.BatchNorm2d(width))
                    blocks.append(block(channels, width, stride, down))
                    channels = width
                setattr(self, "layer%d" % (stage + 1), nn.Sequential(*blocks))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(64, classes)

        def forward(self, x):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer3(self.layer2(self.layer1(x)))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return CifarResNet()


def graph_preset_model(spec, input_shape, classes, torch):
    """torchvision's model for a ringtrain graph preset (the input's channels and
    the data's class count, as ringtrain takes them)."""
    import torchvision
    if spec in ("resnet20", "resnet32", "resnet56"):
        return cifar_resnet(int(spec[6:]), input_shape[0], classes, torch)
    m = getattr(torchvision.models, spec)(num_classes=classes)
    if spec.startswith("resnet") and input_shape[0] != 3:
        m.conv1 = torch.nn.Conv2d(input_shape[0], 64, 7, stride=2, padding=3, bias=False)
    if spec.startswith("vgg"):
        # ringtrain's VGG reads 512 x (H/32) x (W/32) features (no adaptive pool).
        m.avgpool = torch.nn.Identity()
        feats = 512 * (input_shape[1] // 32) * (input_shape[2] // 32)
        m.classifier[0] = torch.nn.Linear(feats, 4096)
    return m


def torch_model(spec, input_shape, torch, classes=10):
    if spec in GRAPH_PRESETS:
        return graph_preset_model(spec, input_shape, classes, torch)
    nn = torch.nn
    shape = list(input_shape)
    mods = []
    for name, pos, args in layer_list(spec):
        def get(key, index, default=None):
            if key in args:
                return int(args[key]) if key != "p" else args[key]
            if index < len(pos):
                return int(pos[index]) if key != "p" else pos[index]
            return default
        if name == "input":
            continue
        if name in ("linear", "fc"):
            out = get("out", 0)
            mods.append(nn.Linear(shape[0], out))
            shape = [out]
        elif name in ("conv2d", "conv"):
            out, k = get("out", 0), get("kernel", 1)
            s, p = get("stride", 2, 1), get("padding", 3, 0)
            mods.append(nn.Conv2d(shape[0], out, k, stride=s, padding=p))
            shape = [out, (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1]
        elif name in ("max_pool2d", "maxpool", "maxpool2d"):
            k = get("kernel", 0)
            s = get("stride", 1, k)
            mods.append(nn.MaxPool2d(k, stride=s))
            shape = [shape[0], (shape[1] - k) // s + 1, (shape[2] - k) // s + 1]
        elif name == "relu":
            mods.append(nn.ReLU())
        elif name == "gelu":
            mods.append(nn.GELU())
        elif name == "flatten":
            mods.append(nn.Flatten())
            n = 1
            for d in shape:
                n *= d
            shape = [n]
        elif name == "dropout":
            mods.append(nn.Dropout(get("p", 0)))
        else:
            raise ValueError("no PyTorch twin for layer %r" % name)
    return nn.Sequential(*mods)


def run_torch(spec, batch, steps, warmup, input_shape, classes):
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch_model(spec, input_shape, torch, classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(batch, *input_shape)
    y = torch.randint(0, classes, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for step in range(warmup + steps):
        if step == warmup:
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    params = sum(p.numel() for p in model.parameters())
    return batch * steps / seconds, params


def run_ringtrain(exe, spec, batch, steps, warmup, input_shape, classes):
    cmd = [exe, "bench", "step", "--model", spec, "--batch", str(batch), "--steps", str(steps),
           "--warmup", str(warmup), "--input", ",".join(map(str, input_shape)),
           "--classes", str(classes), "--optimizer", "sgd", "--device", "cpu", "--json"]
    stdout = run_ringtrain_bench(cmd)
    line = [l for l in stdout.splitlines() if l.startswith("{")][-1]
    r = json.loads(line)
    return r["samples_per_s"], r["params"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"),
                    help="ringtrain executable (default: build/ringtrain)")
    ap.add_argument("--models", default="mlp:784-512-512-10,cnn",
                    help="comma-separated presets (mlp:..., cnn, resnet20, resnet18, ...); layer "
                         "lists via @file")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each side; the best counts")
    ap.add_argument("--input", default="1,28,28", help="per-sample input shape")
    ap.add_argument("--classes", type=int, default=10)
    a = ap.parse_args()
    if not os.access(a.ringtrain, os.X_OK):
        print("peer_step: no ringtrain executable at %s (build it, or pass --ringtrain)" % a.ringtrain,
              file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
    except ImportError:
        print("peer_step: PyTorch is missing: run launch/install-deps.sh --peer (python3-torch), "
              "then /usr/bin/python3 %s" % sys.argv[0], file=sys.stderr)
        return 2
    import torch
    input_shape = [int(d) for d in a.input.split(",")]
    goals = {"mlp": 1.0, "cnn": 0.8}
    print("# peer_step: batch %d, %d timed steps, best of %d alternating runs, 1 thread each "
          "(OPENBLAS_NUM_THREADS=%s, torch %s with %d thread)"
          % (a.batch, a.steps, a.repeats, os.environ["OPENBLAS_NUM_THREADS"], torch.__version__, 1))
    print("# %-22s %10s %14s %14s %8s %6s" % ("model", "params", "ringtrain/s", "pytorch/s", "ratio", "goal"))
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for spec in models:
        best_rt = best_pt = 0.0
        params_rt = params_pt = 0
        for _ in range(a.repeats):
            pt, params_pt = run_torch(spec, a.batch, a.steps, a.warmup, input_shape, a.classes)
            rt, params_rt = run_ringtrain(a.ringtrain, spec, a.batch, a.steps, a.warmup, input_shape, a.classes)
            best_pt, best_rt = max(best_pt, pt), max(best_rt, rt)
        if params_rt != params_pt:
            print("peer_step: %s has %d parameters in ringtrain but %d in PyTorch" % (spec, params_rt, params_pt),
                  file=sys.stderr)
            return 2
        ratio = best_rt / best_pt
        goal = goals.get(spec.split(":")[0], None)
        verdict = "" if goal is None else ("%.1fx %s" % (goal, "met" if ratio >= goal else "MISSED"))
        print("  %-22s %10d %14.0f %14.0f %7.2fx  %s" % (spec, params_rt, best_rt, best_pt, ratio, verdict))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
