#!/usr/bin/env bash
# What users coming from PyTorch, Lightning and Hugging Face expect of a run:
#   --max-steps N alone trains N steps, over as many epochs as they take; with
#   --epochs too, whichever ends first (as max_steps in Lightning and HF's
#   Trainer);
#   every metrics.jsonl record carries its launch's run_id (a resume is a new
#   launch, with a new id);
#   weights export --ckpt takes the checkpoint directory, as eval does;
#   --init-from with a new head is refused naming --init-skip-mismatched, which
#   then loads the tensors that fit, keeps the new head's initialisation and
#   says which did what;
#   a file with a training split only trains, without evaluation, with a note
#   (a split named with --eval-split must exist);
#   without --logdir the flight records go inside --ckpt-dir, each run its own.
source "$(dirname "$0")/lib.sh"
# run_exit2 NAME COMMAND...: the run ends with exit 2 (bad input), not a hang;
# its log is $WORK/NAME/log.txt.
run_exit2() {
  local name=$1 rc=0
  shift
  mkdir -p "$WORK/$name"
  timeout -k 5 120 "$@" > "$WORK/$name/log.txt" 2>&1 || rc=$?
  [ $rc -eq 2 ] || { cat "$WORK/$name/log.txt"; fail "$name: exit code $rc, expected 2"; }
}
# 256 samples, 8 per rank on 2 ranks: 16 steps an epoch.

train 2 "$WORK/steps" --model "$MLP" --batch 8 --max-steps 40
grep -q "done after 40 steps (2.50 epochs)" "$WORK/steps/log.txt" \
  || { cat "$WORK/steps/log.txt"; fail "--max-steps 40 alone did not train 40 steps"; }
train 2 "$WORK/both" --model "$MLP" --batch 8 --max-steps 40 --epochs 1
grep -q "done after 16 steps (1.00 epochs)" "$WORK/both/log.txt" \
  || { cat "$WORK/both/log.txt"; fail "--epochs 1 --max-steps 40 did not stop at the epoch"; }
train 2 "$WORK/both" --model "$MLP" --batch 8 --max-steps 48 --epochs 3 --resume latest
grep -q "done after 48 steps (3.00 epochs)" "$WORK/both/log.txt" \
  || { cat "$WORK/both/log.txt"; fail "--epochs 3 --max-steps 48"; }

# run_id: one per launch, in every record; the resumed launch has its own.
"$PYTHON" - "$WORK/both/metrics.jsonl" <<'PY' || fail "run_id in metrics.jsonl"
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ids = [r.get("run_id") for r in rows]
assert all(i and re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{8}", i) for i in ids), ids
first = [r["run_id"] for r in rows if r.get("step", 0) <= 16]
later = [r["run_id"] for r in rows if r.get("step", 0) > 16]
assert len(set(first)) == 1 and len(set(later)) == 1 and set(first) != set(later), (first, later)
print("run ids:", first[0], later[0])
PY

# A new head: export the 4-class model's weights (from its directory), then
# fine-tune a 5-class model from them.
"$RINGTRAIN_EXE" weights export --ckpt "$WORK/steps/ckpt" -o "$WORK/w.safetensors" > "$WORK/export.log" 2>&1 \
  || { cat "$WORK/export.log"; fail "weights export --ckpt DIR"; }
grep -q "at step 40" "$WORK/export.log" || { cat "$WORK/export.log"; fail "export did not take the newest checkpoint"; }
"$RINGTRAIN_EXE" convert synthetic --n 64 --test-n 11 --shape 1,8,8 --classes 5 --seed 3 -o "$WORK/five.h5" >/dev/null 2>&1 \
  || fail "cannot make the 5-class data set"
run_exit2 strict "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$WORK/five.h5" --model mlp:64-32-5 --batch 8 \
  --max-steps 2 --device cpu --init-from "$WORK/w.safetensors"
grep -Eq "shapes differ .*fc2.weight is \[4, 32\] in the file, \[5, 32\] in the model.*--init-skip-mismatched" "$WORK/strict/log.txt" \
  || { cat "$WORK/strict/log.txt"; fail "the strict --init-from does not name the shapes and the flag"; }
mkdir -p "$WORK/tuned"
"${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$WORK/five.h5" --model mlp:64-32-5 --batch 8 --max-steps 1 \
  --lr 1e-30 --device cpu --init-from "$WORK/w.safetensors" --init-skip-mismatched --ckpt-dir "$WORK/tuned/ckpt" \
  > "$WORK/tuned/log.txt" 2>&1 || { cat "$WORK/tuned/log.txt"; fail "--init-skip-mismatched"; }
grep -Eq -- "--init-from .*w.safetensors: loaded 2 of the model's 4 tensors; kept the initialisation of 2 whose shape differs: fc2.weight is \[4, 32\] in the file, \[5, 32\] in the model, fc2.bias" \
  "$WORK/tuned/log.txt" || { cat "$WORK/tuned/log.txt"; fail "no report of what --init-from loaded"; }
# The body really came from the file (lr 1e-30: one step leaves it as loaded).
"$RINGTRAIN_EXE" weights export --ckpt "$WORK/tuned/ckpt" -o "$WORK/tuned.safetensors" >/dev/null 2>&1 || fail "export tuned"
"$PYTHON" - "$WORK/w.safetensors" "$WORK/tuned.safetensors" <<'PY' || fail "the loaded tensors differ from the file's"
import json, struct, sys
def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    def get(name):
        a, b = header[name]["data_offsets"]
        return struct.unpack(f"<{(b - a) // 4}f", raw[8 + n + a:8 + n + b])
    return header, get
h1, g1 = load(sys.argv[1])
h2, g2 = load(sys.argv[2])
for name in ("fc1.weight", "fc1.bias"):
    assert g1(name) == g2(name), name
assert h2["fc2.weight"]["shape"] == [5, 32], h2["fc2.weight"]
print("fc1 as loaded; fc2 new")
PY

# A training split only: trains, says evaluation is skipped.
cp "$DATA" "$WORK/trainonly.h5"
"$PYTHON" -c 'import h5py, sys; f = h5py.File(sys.argv[1], "a"); del f["test"]; f.close()' "$WORK/trainonly.h5" \
  || fail "cannot drop the test split"
mkdir -p "$WORK/trainonly"
"${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$WORK/trainonly.h5" --model "$MLP" --batch 8 --max-steps 4 --device cpu \
  > "$WORK/trainonly/log.txt" 2>&1 || { cat "$WORK/trainonly/log.txt"; fail "a train-only data set is refused"; }
grep -q "has no /test split: training only, evaluation skipped" "$WORK/trainonly/log.txt" \
  && grep -q "done after 4 steps" "$WORK/trainonly/log.txt" \
  || { cat "$WORK/trainonly/log.txt"; fail "no note on the skipped evaluation"; }
run_exit2 named_split "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$WORK/trainonly.h5" --model "$MLP" --batch 8 \
  --max-steps 4 --device cpu --eval-split test
grep -q "/test" "$WORK/named_split/log.txt" || { cat "$WORK/named_split/log.txt"; fail "--eval-split test: the missing split is not named"; }

# Flight records inside each run's --ckpt-dir, not shared beside them.
for run in a b; do
  "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 2 --device cpu \
    --ckpt-dir "$WORK/runs/$run" > "$WORK/run-$run.log" 2>&1 || { cat "$WORK/run-$run.log"; fail "run $run"; }
  [ -e "$WORK/runs/$run/flight/rank-1.json" ] || { ls -R "$WORK/runs"; fail "run $run: no flight record in its --ckpt-dir"; }
done
[ ! -e "$WORK/flight" ] || fail "a flight directory beside the runs"
echo "PASS: --max-steps, run ids, export from a directory, fine-tuning a new head, train-only data, per-run flight records"
