#!/usr/bin/python3
"""What a training step keeps for its backward, per sample: ringtrain's plan
against the tensors PyTorch saves, on the real-size models of the GPU table.

Peak memory on a GPU is the weights and optimizer state, what the forward
keeps for the backward, and the libraries' workspaces. This measures the
second on any machine: for ringtrain, the model plan's activation bytes per
sample (`ringtrain model show --json`: the arena of outputs, gradients and
scratch, packed by liveness, at the plan's batch); for PyTorch, the bytes of
the distinct storages autograd saves in one forward (saved_tensors_hooks),
torchvision's model in channels_last under CPU autocast at the same
precision, at two batch sizes, per sample as their difference (what does not
grow with the batch, the weights' 16-bit copies, falls out). PyTorch's CPU
kernels may save a little other than its CUDA ones (cuDNN's BatchNorm keeps
its statistics alike); the GPU rows of docs/gpu.md give the measured peaks.

  /usr/bin/python3 launch/bench/peer_saved_activations.py [--ringtrain build/ringtrain]
      [--models resnet50,inception3,vgg16] [--precision bf16] [--json FILE]

Prints one line per model (MiB per sample, ringtrain / PyTorch) and exits 0;
2 when something could not run.
"""
import argparse
import json
import subprocess
import sys

MODELS = {  # ringtrain preset -> (torchvision builder, its arguments, input side)
    "resnet50": ("resnet50", {}, 224),
    "inception3": ("inception_v3", {"aux_logits": False, "init_weights": False}, 299),
    "vgg16": ("vgg16", {}, 224),
}


def torch_saved_per_sample(name, precision):
    import torch
    import torchvision

    builder, kwargs, side = MODELS[name]
    torch.manual_seed(0)
    model = getattr(torchvision.models, builder)(**kwargs).to(memory_format=torch.channels_last)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def saved(batch):
        x = torch.randn(batch, 3, side, side).to(memory_format=torch.channels_last)
        storages = {}

        def pack(t):
            s = t.storage()  # the bytes behind the view: a saved view of one storage counts once
            storages[s.data_ptr()] = max(storages.get(s.data_ptr(), 0),
                                         s.size() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            if dtype is None:
                model(x)
            else:
                with torch.autocast("cpu", dtype=dtype):
                    model(x)
        return sum(storages.values())

    return (saved(4) - saved(2)) / 2


def ringtrain_planned_per_sample(ringtrain, name, precision):
    side = MODELS[name][2]
    out = subprocess.run(
        [ringtrain, "model", "show", "--model", name, "--input", f"3,{side},{side}",
         "--classes", "1000", "--precision", precision, "--batch", "8", "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)["activation_bytes_per_sample"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ringtrain", default="build/ringtrain")
    ap.add_argument("--models", default="resnet50,inception3,vgg16")
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--json", help="also write the rows to this file")
    a = ap.parse_args()
    rows = []
    try:
        for name in a.models.split(","):
            if name not in MODELS:
                raise ValueError(f"--models: unknown model '{name}' (known: {', '.join(MODELS)})")
            rt = ringtrain_planned_per_sample(a.ringtrain, name, a.precision)
            pt = torch_saved_per_sample(name, a.precision)
            rows.append({"model": name, "precision": a.precision,
                         "ringtrain_planned_mib_per_sample": rt / 2**20,
                         "pytorch_saved_mib_per_sample": pt / 2**20, "ratio": rt / pt})
            print(f"{name} {a.precision}: ringtrain plan {rt / 2**20:.1f} MiB/sample, "
                  f"PyTorch saves {pt / 2**20:.1f} MiB/sample: {rt / pt:.2f}x", flush=True)
    except (OSError, ValueError, subprocess.CalledProcessError, ImportError) as e:
        print(f"peer_saved_activations: {e}", file=sys.stderr)
        return 2
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
