#!/usr/bin/env bash
# What a run leaves for people: metrics.jsonl (train, eval, checkpoint and
# summary records), TensorBoard events, a merged Chrome trace with every
# rank's forward, backward, per-bucket all-reduce (issued to observed, and when
# it ran) and optimizer spans, and the
# rank-0 summary line.
source "$(dirname "$0")/lib.sh"
train 2 "$WORK/run" --model "$MLP" --batch 8 --max-steps 12 --epochs 100 --eval-every 6 \
  --bucket-mb 0.0005 --trace "$WORK/run/trace.json"
log=$WORK/run/log.txt
grep -Eq "global batch 16 = 8 per rank x 2 rank\(s\) x 1 accumulation" "$log" || fail "no global batch line"
grep -Eq "step 12/12 .*loss [0-9.]+ .*samples/s .*compute .*comm .*data" "$log" || fail "no progress line"
grep -Eq "ringtrain: done after 12 steps .*test accuracy [0-9.]+ .*samples/s global" "$log" || fail "no summary line"
ls "$WORK"/run/events.out.tfevents.* > /dev/null || fail "no TensorBoard events file"
"$PYTHON" - "$WORK/run" <<'PY'
import json, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(d + "/metrics.jsonl")]
kinds = [r["kind"] for r in rows]
train = [r for r in rows if r["kind"] == "train"]
assert [r["step"] for r in train] == [5, 10, 12], train
for r in train:
    for k in ("loss", "lr", "samples_per_s", "step_s", "compute_s", "exposed_comm_s", "comm_s", "data_wait_s"):
        assert k in r and r[k] >= 0, (k, r)
    # The step runs the same code on CPU and GPU: a logged step asks the host
    # to wait for the device once (the loss read), the steps between none.
    assert r["host_syncs"] == 1, ("host syncs in a logged step", r)
    assert r["host_syncs_between_logs"] == 0, ("host syncs in steady steps", r)
# Each line speaks for its window (the steps since the previous line), not
# only for the logged step: samples over the window's step time, its median.
assert [r["window_steps"] for r in train] == [5, 5, 2], train
for r in train:
    assert r["window_step_s"] > 0 and r["window_step_s_median"] > 0, r
    assert abs(r["samples_per_s"] - 16 / r["window_step_s"]) <= 1e-6 * r["samples_per_s"], r
    assert 0 <= r["window_exposed_comm_s"] <= r["window_step_s"], r
summary = rows[-1]
# The run's median step leaves out the first window (warm-up): steps 6 to 12.
assert summary["median_steps"] == 7 and summary["step_s_median"] > 0, summary
evals = [r for r in rows if r["kind"] == "eval"]
assert [r["step"] for r in evals] == [6, 12] and all(r["n"] == 101 for r in evals), evals
assert "checkpoint" in kinds and kinds[-1] == "summary", kinds
trace = json.load(open(d + "/trace.json"))
events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
for rank in (0, 1):
    names = {e["name"] for e in events if e["pid"] == rank}
    for want in ("forward", "backward", "optimizer", "allreduce bucket 0", "allreduce bucket 1"):
        assert want in names, (rank, want, sorted(names))
# Overlap: with several buckets, the first bucket's all-reduce starts before backward ends.
starts = [e for e in events if e["pid"] == 0 and e["name"] == "allreduce bucket 0"]
backs = [e for e in events if e["pid"] == 0 and e["name"] == "backward"]
assert any(b["ts"] <= s["ts"] <= b["ts"] + b["dur"] for s in starts for b in backs), "no bucket launched during backward"
# When each all-reduce really ran (the CPU backends' communication thread):
# within its issue-to-observed span, in bucket order, once per step and rank.
for rank in (0, 1):
    for b in (0, 1):
        issued = sorted((e for e in events if e["pid"] == rank and e["name"] == f"allreduce bucket {b}"), key=lambda e: e["ts"])
        ran = sorted((e for e in events if e["pid"] == rank and e["name"] == f"allreduce bucket {b} ran"), key=lambda e: e["ts"])
        assert len(ran) == len(issued) == 12, (rank, b, len(ran), len(issued))
        for i, r in zip(issued, ran):
            assert i["ts"] - 1 <= r["ts"] and r["ts"] + r["dur"] <= i["ts"] + i["dur"] + 1, (rank, b, i, r)
    first = sorted((e for e in events if e["pid"] == rank and e["name"] == "allreduce bucket 0 ran"), key=lambda e: e["ts"])
    second = sorted((e for e in events if e["pid"] == rank and e["name"] == "allreduce bucket 1 ran"), key=lambda e: e["ts"])
    assert all(a["ts"] + a["dur"] <= b["ts"] + 1 for a, b in zip(first, second)), "buckets ran out of order"
print("metrics, TensorBoard and trace look right:", len(events), "spans")
PY
# Epoch bookkeeping: 256 samples / global batch 16 = 16 steps per epoch. The
# step that ends an epoch is reported in that epoch, never as "epoch 3/2".
TRAIN_LOG_FLAGS=(--log-every 16 --check-every 0)
train 2 "$WORK/epochs" --model "$MLP" --batch 8 --epochs 2 --eval-every 0
grep -Eq "epoch 2/2 +step 32/32 " "$WORK/epochs/log.txt" || { cat "$WORK/epochs/log.txt"; fail "last step not shown as epoch 2/2"; }
! grep -q "epoch 3/2" "$WORK/epochs/log.txt" || fail "a step reported past the last epoch"
"$PYTHON" - "$WORK/epochs/metrics.jsonl" <<'PY'
import json, sys
train = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
got = [(r["step"], r["epoch"]) for r in train]
assert got == [(16, 0), (32, 1)], got
PY
echo "PASS: observability"
