#!/usr/bin/env bash
# Graph models with BatchNorm in whole training runs:
#   train    resnet20 on 2 ranks: the loss falls and evaluation (running
#            statistics) agrees with it
#   eval     a BN model's checkpoint evaluates to the same accuracy and loss on
#            1 and 3 ranks (running statistics are per model, not per rank)
#   resume   stopped at step 4 and resumed to 8 on 2 ranks: bit for bit the
#            uninterrupted run, running statistics included
source "$(dirname "$0")/lib.sh"
# A residual block with BatchNorm and a projection, small enough for 1x8x8.
RES="a = conv2d(out=4, kernel=3, padding=1, bias=0); b = batch_norm; c = relu; \
d = conv2d(out=4, kernel=3, padding=1, bias=0); e = batch_norm(zero_init=0); \
p = conv2d(c, out=4, kernel=1, bias=0); s = add(e, p); relu; global_avg_pool; linear(out=4)"
loss_at() {  # the logged training loss at the first and the last logged step
  python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip() and json.loads(l).get("kind")=="train"]
print(rows[0]["loss"], rows[-1]["loss"])' "$1/metrics.jsonl"
}

case ${1:-} in
  train)
    out=$WORK/r20
    TRAIN_LOG_FLAGS=(--log-every 20 --check-every 20)
    train 2 "$out" --model resnet20 --batch 16 --epochs 100 --max-steps 80 --lr 0.05 --momentum 0.9
    read -r first last < <(loss_at "$out")
    python3 -c "import sys; sys.exit(0 if $last < 0.8 * $first else 1)" \
      || fail "resnet20: the loss went from $first to $last"
    acc=$(final_accuracy "$out")
    python3 -c "import sys; sys.exit(0 if $acc > 0.4 else 1)" || fail "resnet20: test accuracy $acc"
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
  *) echo "usage: graph_models.sh train|eval|resume" >&2; exit 2 ;;
esac
