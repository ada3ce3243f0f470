#!/usr/bin/env bash
# Graph models with BatchNorm in whole training runs:
#   train    resnet20 on 2 ranks: the loss falls and evaluation (running
#            statistics) agrees with it
#   eval     a BN model's checkpoint evaluates to the same accuracy and loss on
#            1 and 3 ranks (running statistics are per model, not per rank)
#   resume   stopped at step 4 and resumed to 8 on 2 ranks: bit for bit the
#            uninterrupted run, running statistics included
#   syncbn   --sync-bn: 1 rank x 16, 2 x 8 and 4 x 4 give the same parameters and
#            running statistics, and so do 1 and 3 ranks with --global-batch 10
#            (3/3/4); without it 2 x 8 differs from 1 x 16
source "$(dirname "$0")/lib.sh"
# A residual block with BatchNorm and a projection, small enough for 1x8x8.
RES="a = conv2d(out=4, kernel=3, padding=1, bias=0); b = batch_norm; c = relu; \
d = conv2d(out=4, kernel=3, padding=1, bias=0); e = batch_norm(zero_init=0); \
p = conv2d(c, out=4, kernel=1, bias=0); s = add(e, p); relu; global_avg_pool; linear(out=4)"
loss_at() {  # the logged training loss at the first and the last logged step
  "$PYTHON" -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip() and json.loads(l).get("kind")=="train"]
print(rows[0]["loss"], rows[-1]["loss"])' "$1/metrics.jsonl"
}

case ${1:-} in
  train)
    out=$WORK/r20
    TRAIN_LOG_FLAGS=(--log-every 20 --check-every 20)
    train 2 "$out" --model resnet20 --batch 16 --epochs 100 --max-steps 80 --lr 0.05 --momentum 0.9
    read -r first last < <(loss_at "$out")
    "$PYTHON" -c "import sys; sys.exit(0 if $last < 0.8 * $first else 1)" \
      || fail "resnet20: the loss went from $first to $last"
    acc=$(final_accuracy "$out")
    "$PYTHON" -c "import sys; sys.exit(0 if $acc > 0.4 else 1)" || fail "resnet20: test accuracy $acc"
    echo "PASS: resnet20 on 2 ranks, loss $first -> $last, test accuracy $acc" ;;
  eval)
    out=$WORK/bn
    train 2 "$out" --model "$RES" --batch 16 --max-steps 12 --lr 0.05 --momentum 0.9
    ck=$(newest "$out/ckpt")
    for np in 1 3; do
      "${MPIRUN[@]}" -np $np "$RINGTRAIN_EXE" eval --device cpu --data "$DATA" --ckpt "$ck" \
        > "$WORK/eval$np.txt" 2>&1 || { cat "$WORK/eval$np.txt"; fail "eval on $np ranks failed"; }
    done
    a=$(grep -m1 -Eo 'n=[0-9]+ loss=[0-9.]+ accuracy=[0-9.]+' "$WORK/eval1.txt")
    b=$(grep -m1 -Eo 'n=[0-9]+ loss=[0-9.]+ accuracy=[0-9.]+' "$WORK/eval3.txt")
    [ -n "$a" ] && [ "$a" = "$b" ] || { cat "$WORK"/eval*.txt; fail "1 rank: '$a', 3 ranks: '$b'"; }
    echo "PASS: the BN model evaluates the same on 1 and 3 ranks: $a" ;;
  resume)
    train 2 "$WORK/full" --model "$RES" --batch 8 --max-steps 8 --ckpt-every 4 --lr 0.05 --momentum 0.9
    train 2 "$WORK/part" --model "$RES" --batch 8 --max-steps 4 --ckpt-every 4 --lr 0.05 --momentum 0.9
    train 2 "$WORK/part" --model "$RES" --batch 8 --max-steps 8 --ckpt-every 4 --lr 0.05 --momentum 0.9 \
      --resume latest
    same "$WORK/full" "$WORK/part" --exact
    echo "PASS: resumed BN run equals the uninterrupted one, running statistics included" ;;
  syncbn)
    common=(--model "$RES" --max-steps 10 --epochs 100 --lr 0.05 --momentum 0.9 --seed 11
            --bucket-mb 0.0005)
    train 1 "$WORK/s1" --batch 16 "${common[@]}" --sync-bn
    train 2 "$WORK/s2" --batch 8 "${common[@]}" --sync-bn --backend shm
    train 4 "$WORK/s4" --batch 4 "${common[@]}" --sync-bn --backend ring
    same "$WORK/s1" "$WORK/s2" --rtol 1e-4 --atol 1e-6
    same "$WORK/s1" "$WORK/s4" --rtol 1e-4 --atol 1e-6
    train 1 "$WORK/g1" --global-batch 10 "${common[@]}" --sync-bn
    train 3 "$WORK/g3" --global-batch 10 "${common[@]}" --sync-bn
    same "$WORK/g1" "$WORK/g3" --rtol 1e-4 --atol 1e-6
    # the same comparison without --sync-bn must fail: the test can tell
    train 2 "$WORK/l2" --batch 8 "${common[@]}"
    if "$COMPARE" "$(newest "$WORK/s1/ckpt")" "$(newest "$WORK/l2/ckpt")" --rtol 1e-4 --atol 1e-6 \
        > /dev/null 2>&1; then
      fail "without --sync-bn, 2 x 8 matched 1 x 16: the comparison cannot tell"
    fi
    echo "PASS: --sync-bn: 1 x 16 = 2 x 8 = 4 x 4, and 1 = 3 ranks with --global-batch 10" ;;
  *) echo "usage: graph_models.sh train|eval|resume|syncbn" >&2; exit 2 ;;
esac
