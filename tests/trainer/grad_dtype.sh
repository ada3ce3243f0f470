#!/usr/bin/env bash
# --grad-dtype bf16 and fp16 in whole runs on 2-4 ranks with shm, ring and
# mpi: metrics.jsonl's allreduce_bytes per step is half of fp32's, the run
# stays close to fp32 (the gradients of every step are within the 16-bit
# bound: the sync test checks that element by element), with --global-batch
# (a sum on the wire) and --batch (an average). One rank exchanges nothing.
source "$(dirname "$0")/lib.sh"
common=(--model "$MLP" --epochs 100 --max-steps 10 --seed 11 --momentum 0.9 --lr 0.05)
bytes() {
  "$PYTHON" -c 'import json,sys
rows=[r for r in map(json.loads, open(sys.argv[1])) if r.get("kind")=="train"]
vals={r["allreduce_bytes"] for r in rows}
assert len(vals)==1, vals
print(vals.pop())' "$1/metrics.jsonl"
}
for case in "2 shm --batch 8" "3 ring --global-batch 12" "4 mpi --batch 4"; do
  read -r np backend split value <<< "$case"
  train $np "$WORK/fp32-$np" "${common[@]}" --backend $backend $split $value
  f32=$(bytes "$WORK/fp32-$np")
  [ "$f32" = $((2212 * 4)) ] || fail "fp32 on $np ranks: $f32 bytes per step, expected $((2212 * 4))"
  for wire in bf16 fp16; do
    out=$WORK/$wire-$np
    train $np "$out" "${common[@]}" --backend $backend $split $value --grad-dtype $wire
    [ "$(bytes "$out")" = $((f32 / 2)) ] || fail "$wire on $np ranks: $(bytes "$out") bytes, expected $((f32 / 2))"
    grep -q "gradients reduced in $wire" "$out/log.txt" || fail "$out: no start-up line for --grad-dtype"
    same "$WORK/fp32-$np" "$out" --rtol 0.05 --atol 2e-3
  done
done
train 1 "$WORK/one" "${common[@]}" --batch 8 --grad-dtype bf16
[ "$(bytes "$WORK/one")" = 0 ] || fail "one rank: bytes on the wire"
echo "PASS: --grad-dtype bf16/fp16 halve allreduce_bytes on shm, ring and mpi and stay close to fp32"
