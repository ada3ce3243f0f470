#!/usr/bin/python3
"""bench step --layers --json: the "layers" array has one entry per node of the
graph (the names, kinds and shapes `model show --json` gives, in its order),
each with non-negative times, and the rows add up to the phased step within a
sane factor (with --bounds). The factor only catches a profile that misses or
double-counts most of the step, but it compares two wall-clock figures, which
a busy machine can push apart: only the test labelled `timing` asks for it.

usage: bench_step_layers_check.py [--gpu] [--bounds] BENCH_JSON MODEL_SHOW_JSON
--gpu: the profile of a CUDA run (CUDA events; a convolution's row names its
cuDNN algorithms, the 16-bit ones under --precision bf16|fp16, and a linear
layer's row its cuBLASLt epilogues there).
--bounds: the marked forward and backward time is within 0.3x-3x of the phased step.
A node folded into a fused one (--fuse) names it, and that one names it back;
so does a linear whose forward runs in its gelu's fused GEMM, and a linear
whose dx GEMM runs that gelu's backward (DGELU_BGRAD).
"""
import json
import sys


def main():
    args = sys.argv[1:]
    gpu = "--gpu" in args
    bounds = "--bounds" in args
    args = [a for a in args if a not in ("--gpu", "--bounds")]
    with open(args[0]) as f:
        [bench] = [json.loads(line) for line in f if line.strip()]
    with open(args[1]) as f:
        show = json.load(f)
    layers = bench["layers"]
    nodes = show["layers"]
    assert len(layers) == len(nodes), (len(layers), len(nodes))
    for i, (row, node) in enumerate(zip(layers, nodes)):
        assert row["index"] == i, row
        assert row["name"] == node["name"], (row, node)
        assert row["output"] == node["output"], (row, node)
        assert isinstance(row["kind"], str) and row["kind"], row
        for key in ("forward_ms", "backward_ms", "share"):
            assert row[key] >= 0, row
        if row["kind"] == "conv2d":
            # On the CPU, the convolution's path (oneDNN or im2col + GEMM); on
            # a GPU the three cuDNN algorithms, each with math and workspace.
            # A convolution folded into a fused conv + bias + ReLU: its fused
            # node's row names them.
            assert row["kernels"], row
            kernels = row["kernels"]
            if kernels.startswith("folded into "):
                into = kernels[len("folded into "):]
                [kernels] = [r["kernels"] for r in layers if r["name"] == into]
            if gpu:
                for op in ("fwd", "bwd-filter", "bwd-data"):
                    assert op in kernels and "ws=" in kernels, row
                if bench["precision"] in ("bf16", "fp16"):
                    assert bench["precision"] + " " in kernels, row
        if gpu and row["kind"] == "linear" and bench["precision"] in ("bf16", "fp16"):
            # A linear whose forward runs in its gelu's GELU epilogue names
            # that node instead (checked below).
            assert ("cublasLt bias epilogue" in row["kernels"]
                    or row["kernels"].startswith("forward fused into ")), row
    # --fuse (the default): a folded BatchNorm, add or conv names the node that runs
    # it, whose row names what it fused, and takes no time of its own.
    fused = {r["name"]: r for r in layers if r.get("kernels", "").startswith("fused ")}
    for r in layers:
        if r.get("kernels", "").startswith("folded into "):
            into = r["kernels"][len("folded into "):]
            assert into in fused and r["name"] in fused[into]["kernels"], (r, fused.get(into))
            assert r["forward_ms"] < 1e-3 and r["backward_ms"] < 1e-3, r
    # A linear whose forward is its gelu's fused GEMM (linear + gelu_tanh)
    # keeps its backward: it names that node, whose row names it back and,
    # on a GPU, the epilogue.
    for r in layers:
        if r.get("kernels", "").startswith("forward fused into "):
            into = r["kernels"][len("forward fused into "):]
            assert into in fused and r["name"] + "+" + into in fused[into]["kernels"], (r, fused.get(into))
            assert r["forward_ms"] < 1e-3, r
            if gpu:
                assert "GELU_AUX_BIAS" in fused[into]["kernels"], fused[into]
    # A linear (c_proj) whose dx GEMM runs the fused gelu's backward names
    # it, and that gelu's row names it back; where the epilogue ran, the
    # gelu's backward takes no time of its own.
    by_name = {r["name"]: r for r in layers}
    for r in layers:
        kernels = r.get("kernels", "")
        at = kernels.find("dx fused with ")
        if at < 0:
            continue
        gelu = kernels[at + len("dx fused with "):].split("'s backward: ")[0]
        assert gelu in fused, (r, gelu)
        assert "backward: fused into " + r["name"] + "'s dx" in fused[gelu]["kernels"], fused[gelu]
        if gpu:
            assert "DGELU_BGRAD" in kernels, r
        if "last backward: the epilogue ran" in kernels or "DGELU alone ran" in kernels:
            assert by_name[gelu]["backward_ms"] < 1e-3, by_name[gelu]
    if bench.get("fuse") == "off":
        assert not fused, fused
    profile = bench["layers_profile"]
    clock = "cuda events" if gpu else "steady clock"
    assert profile["steps"] >= 1 and profile["clock"] == clock, profile
    rows_ms = sum(r["forward_ms"] + r["backward_ms"] for r in layers)
    marked_ms = profile["forward_ms"] + profile["backward_ms"]
    assert rows_ms <= marked_ms * (1 + 1e-9) + 1e-12, (rows_ms, marked_ms)
    for key in ("prepare_ms", "loss_forward_ms", "loss_backward_ms", "step_ms"):
        assert profile[key] >= 0, profile
    phased = bench["phased_step_ms"]
    ratio = marked_ms / phased if phased > 0 else float("inf")
    if bounds:
        assert 0.3 <= ratio <= 3.0, (marked_ms, phased, ratio)
    assert any(r["forward_ms"] > 0 for r in layers), layers
    print(f"PASS: {len(layers)} layers, {len(fused)} fused, rows {rows_ms:.3f} ms, marked {marked_ms:.3f} ms, "
          f"phased step {phased:.3f} ms (x{ratio:.2f})")


if __name__ == "__main__":
    main()
