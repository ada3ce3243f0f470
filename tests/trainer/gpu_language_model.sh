#!/usr/bin/env bash
# gpt-nano on a GPU against the CPU, on the GPL-3 text with byte tokens
# (--tf32 off, SGD with momentum as language_model.sh train):
#   - 3 steps train to the CPU's parameters within float tolerance, with and
#     without dropout (gpt-nano:dropout=0.1: the masks are the same function
#     of seed, rank, step and node on both devices);
#   - a second GPU run equals the first bit for bit (no float atomics), and a
#     run stopped at step 2 and resumed equals it too (dropout masks included);
#   - steady steps take no host sync;
#   - generate continues a prompt from the GPU's checkpoint, and greedy
#     decoding with the forward on the GPU (--device cuda) gives the CPU's
#     tokens.
# Skipped (77) without an NVIDIA device.
[ -e /dev/nvidiactl ] || { echo "SKIPPED: no NVIDIA device"; exit 77; }
source "$(dirname "$0")/lib.sh"
TEXT=/usr/share/common-licenses/GPL-3
[ -r "$TEXT" ] || { echo "SKIPPED: $TEXT is missing"; exit 77; }
DATA=$WORK/gpl.h5
"$RINGTRAIN_EXE" convert text "$TEXT" -o "$DATA" --test-fraction 0.05 > "$WORK/convert.log" 2>&1 \
  || { cat "$WORK/convert.log"; fail "convert text"; }
base=(--epochs 100 --lr 0.05 --momentum 0.9 --seed 5 --eval-every 0 --tf32 off --ckpt-every 2)
common=(--max-steps 3 "${base[@]}")
for model in gpt-nano gpt-nano:dropout=0.1; do
  TRAIN_DEVICE=cpu train 1 "$WORK/cpu-$model" --batch 4 --model "$model" "${common[@]}"
  TRAIN_DEVICE=cuda train 1 "$WORK/gpu-$model" --batch 4 --model "$model" "${common[@]}"
  same "$WORK/cpu-$model" "$WORK/gpu-$model" --rtol 1e-3 --atol 1e-5
done
m=gpt-nano:dropout=0.1
TRAIN_DEVICE=cuda train 1 "$WORK/again" --batch 4 --model "$m" "${common[@]}"
same "$WORK/gpu-$m" "$WORK/again" --exact
TRAIN_DEVICE=cuda train 1 "$WORK/part" --batch 4 --model "$m" --max-steps 2 "${base[@]}"
TRAIN_DEVICE=cuda train 1 "$WORK/part" --batch 4 --model "$m" "${common[@]}" --resume latest
same "$WORK/gpu-$m" "$WORK/part" --exact
"$PYTHON" - "$WORK/gpu-$m/metrics.jsonl" <<'PY' || fail "a steady GPU step of gpt-nano synchronised"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
assert train and all(r["host_syncs_between_logs"] == 0 for r in train), train
PY
out=$("$RINGTRAIN_EXE" generate --ckpt "$WORK/gpu-$m/ckpt" --prompt "The GNU" \
  --tokens 20 --seed 1 2>"$WORK/generate.log") || { cat "$WORK/generate.log"; fail "generate from the GPU checkpoint"; }
case "$out" in "The GNU"*) ;; *) fail "generate from the GPU checkpoint did not continue the prompt: $out" ;; esac
greedy() { "$RINGTRAIN_EXE" generate --ckpt "$WORK/gpu-$m/ckpt" --prompt "The GNU" --tokens 40 \
  --temperature 0 "$@"; }
on_cpu=$(greedy --device cpu 2>"$WORK/greedy-cpu.log") || { cat "$WORK/greedy-cpu.log"; fail "greedy generate on the CPU"; }
on_gpu=$(greedy --device cuda 2>"$WORK/greedy-gpu.log") || { cat "$WORK/greedy-gpu.log"; fail "greedy generate --device cuda"; }
grep -q " on cuda" "$WORK/greedy-gpu.log" || { cat "$WORK/greedy-gpu.log"; fail "generate --device cuda did not run on the GPU"; }
[ "$on_cpu" = "$on_gpu" ] || fail "greedy generate: the GPU gave '$on_gpu', the CPU '$on_cpu'"
echo "PASS: gpt-nano trains on the GPU as on the CPU (with dropout too), repeats and resumes bit for bit; greedy generate on the GPU gives the CPU's tokens"
