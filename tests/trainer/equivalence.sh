#!/usr/bin/env bash
# Data-parallel equivalence: from the same seed, 20 steps of SGD with momentum
# on 1 rank x 4B, 2 ranks x 2B and 4 ranks x B give the same parameters (1e-5
# relative), with every CPU backend and with overlap on and off.
#   equivalence.sh mlp|cnn
source "$(dirname "$0")/lib.sh"
case "$1" in mlp) model=$MLP ;; cnn) model=$CNN ;; *) fail "model mlp or cnn" ;; esac
common=(--model "$model" --max-steps 20 --epochs 100 --lr 0.05 --momentum 0.9 --seed 11)
# A bucket cap of a few hundred bytes makes several buckets, so overlap really
# launches all-reduces during backward.
train 1 "$WORK/base" --batch 16 "${common[@]}" --backend shm
accuracies=$(final_accuracy "$WORK/base")
for backend in shm ring mpi; do
  for overlap in on off; do
    flags=(--backend "$backend" --bucket-mb 0.0005)
    [ "$overlap" = off ] && flags+=(--no-overlap)
    train 2 "$WORK/$backend-$overlap-2" --batch 8 "${common[@]}" "${flags[@]}"
    train 4 "$WORK/$backend-$overlap-4" --batch 4 "${common[@]}" "${flags[@]}"
    same "$WORK/base" "$WORK/$backend-$overlap-2" --rtol 1e-5
    same "$WORK/base" "$WORK/$backend-$overlap-4" --rtol 1e-5
    grep -q "bucket(s)" "$WORK/$backend-$overlap-2/log.txt"
    accuracies+=" $(final_accuracy "$WORK/$backend-$overlap-2") $(final_accuracy "$WORK/$backend-$overlap-4")"
  done
done
# Evaluation over the 101 test samples is exact: the same accuracy at every world size.
[ "$(echo "$accuracies" | tr ' ' '\n' | sort -u | wc -l)" -eq 1 ] || fail "accuracy differs across runs: $accuracies"
grep -q "several\|bucket(s)" "$WORK/shm-on-4/log.txt"
echo "PASS: $1 equivalent across 1x16, 2x8, 4x4 for shm, ring, mpi with and without overlap (accuracy $accuracies)"
