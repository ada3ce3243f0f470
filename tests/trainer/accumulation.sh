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
# The comparison by each tensor's relative L2 distance (the GPU tests' rule
# where cuDNN's algorithms differ by batch): these runs agree within it, a run
# at another learning rate does not, and an unknown flag is refused.
same "$WORK/b16" "$WORK/b8a2" --rel-l2 1e-6
train 1 "$WORK/lr" --batch 16 "${common[@]/0.05/0.04}"  # --lr 0.04
rc=0; "$COMPARE" "$(newest "$WORK/b16/ckpt")" "$(newest "$WORK/lr/ckpt")" --rel-l2 1e-2 > "$WORK/relL2.txt" || rc=$?
[ $rc = 1 ] || { cat "$WORK/relL2.txt"; fail "a run at another learning rate passed --rel-l2 1e-2 (exit $rc)"; }
grep -q "tensors over relative L2 distance" "$WORK/relL2.txt" || fail "no relative L2 verdict"
rc=0; "$COMPARE" "$(newest "$WORK/b16/ckpt")" "$(newest "$WORK/b16/ckpt")" --rel-12 1e-2 2> "$WORK/flag.txt" || rc=$?
[ $rc = 2 ] && grep -q "unknown or incomplete flag --rel-12" "$WORK/flag.txt" || fail "a misspelt flag was not refused (exit $rc)"
rc=0; "$COMPARE" "$(newest "$WORK/b16/ckpt")" "$(newest "$WORK/b16/ckpt")" --rel-l2 -1 2> "$WORK/bound.txt" || rc=$?
[ $rc = 2 ] && grep -q "expected a finite number >= 0" "$WORK/bound.txt" || fail "a negative bound was not refused (exit $rc)"
echo "PASS: accumulation matches the larger batch"
