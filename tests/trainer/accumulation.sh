#!/usr/bin/env bash
# --accum 2 at batch B equals no accumulation at batch 2B (1 and 2 ranks).
source "$(dirname "$0")/lib.sh"
common=(--model "$MLP" --max-steps 15 --epochs 100 --lr 0.05 --momentum 0.9 --seed 5 --bucket-mb 0.0005)
train 1 "$WORK/b16" --batch 16 "${common[@]}"
train 1 "$WORK/b8a2" --batch 8 --accum 2 "${common[@]}"
same "$WORK/b16" "$WORK/b8a2" --rtol 1e-5
train 2 "$WORK/r2b8" --batch 8 "${common[@]}"
train 2 "$WORK/r2b4a2" --batch 4 --accum 2 "${common[@]}"
same "$WORK/r2b8" "$WORK/r2b4a2" --rtol 1e-5
same "$WORK/b16" "$WORK/r2b4a2" --rtol 1e-5
grep -q "global batch 16 = 4 per rank x 2 rank(s) x 2 accumulation" "$WORK/r2b4a2/log.txt" || fail "global batch not reported"
echo "PASS: accumulation matches the larger batch"
