#!/usr/bin/env bash
# gpt-nano end to end on a small English text (the GPL-3 text every Debian
# system ships, byte tokens):
#   train  data-parallel equivalence, 1 rank x 4 windows = 2 x 2 = 4 x 1, and
#          the loss reported per token with tokens/s
#   eval   the whole test split evaluated exactly: the same loss, perplexity and
#          token count at 1 and 3 ranks, every test token counted once
#   resume a run stopped at step 3 and resumed (with AdamW) equals the
#          uninterrupted run bit for bit, also with dropout (gpt-nano:dropout=0.1)
#   generate  text from the checkpoint: the prompt continued, the same seed
#          giving the same text; a prompt longer than the context is cut to
#          its end (said on stderr); no prompt starts from a newline
#   language_model.sh train|eval|resume|generate
source "$(dirname "$0")/lib.sh"
need_python_modules h5py
TEXT=/usr/share/common-licenses/GPL-3
[ -r "$TEXT" ] || { echo "SKIPPED: $TEXT is missing"; exit 77; }
DATA=$WORK/gpl.h5
"$RINGTRAIN_EXE" convert text "$TEXT" -o "$DATA" --test-fraction 0.05 > "$WORK/convert.log" 2>&1 \
  || { cat "$WORK/convert.log"; fail "convert text"; }
common=(--model gpt-nano --max-steps 3 --epochs 100 --lr 0.05 --momentum 0.9 --seed 5 --eval-every 0)

case "$1" in
  train)
    train 1 "$WORK/base" --batch 4 "${common[@]}"
    grep -q "tokens/s" "$WORK/base/log.txt" || { cat "$WORK/base/log.txt"; fail "no tokens/s"; }
    train 2 "$WORK/np2" --batch 2 "${common[@]}" --bucket-mb 0.5
    train 4 "$WORK/np4" --batch 1 "${common[@]}" --bucket-mb 0.5
    same "$WORK/base" "$WORK/np2" --rtol 1e-4 --atol 1e-6
    same "$WORK/base" "$WORK/np4" --rtol 1e-4 --atol 1e-6
    # The first step's loss per token starts near ln(256) = 5.55 (untrained, byte tokens).
    first=$("$PYTHON" -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([r for r in rows if r.get("kind")=="train"][0]["loss"])' "$WORK/base/metrics.jsonl")
    "$PYTHON" -c "import sys; sys.exit(0 if 4.5 < $first < 6.5 else 1)" || fail "first loss $first is not per token"
    echo "PASS: gpt-nano equivalent at 1x4, 2x2, 4x1 windows (first loss $first per token)"
    ;;
  eval)
    train 1 "$WORK/base" --batch 4 "${common[@]}"
    ck=$(ls "$WORK"/base/ckpt/ckpt-*.h5 | sort -V | tail -1)
    tokens=$("$PYTHON" -c 'import h5py,sys; print(len(h5py.File(sys.argv[1])["test/tokens"]) - 1)' "$DATA")
    for np in 1 3; do
      "${MPIRUN[@]}" -np $np "$RINGTRAIN_EXE" eval --device cpu --data "$DATA" --ckpt "$ck" --batch 2 \
        > "$WORK/eval$np.log" 2>&1 || { cat "$WORK/eval$np.log"; fail "eval -np $np"; }
      grep -q "tokens=$tokens " "$WORK/eval$np.log" || { cat "$WORK/eval$np.log"; fail "eval -np $np did not count $tokens tokens"; }
      grep -o "loss=.*" "$WORK/eval$np.log" > "$WORK/figures$np"
    done
    cmp -s "$WORK/figures1" "$WORK/figures3" || { cat "$WORK/figures1" "$WORK/figures3"; fail "eval differs between 1 and 3 ranks"; }
    grep -q "perplexity=" "$WORK/figures1" || fail "no perplexity"
    echo "PASS: exact evaluation over $tokens tokens at 1 and 3 ranks: $(cat "$WORK/figures1")"
    ;;
  resume)
    adamw=(--model gpt-nano --epochs 100 --optimizer adamw --lr 1e-3 --seed 5 --eval-every 0 --ckpt-every 3)
    train 2 "$WORK/whole" --batch 2 --max-steps 6 "${adamw[@]}"
    train 2 "$WORK/part" --batch 2 --max-steps 3 "${adamw[@]}"
    train 2 "$WORK/part" --batch 2 --max-steps 6 "${adamw[@]}" --resume latest
    grep -q "resumed from .*ckpt-3.h5 at step 3" "$WORK/part/log.txt" || { cat "$WORK/part/log.txt"; fail "did not resume at step 3"; }
    same "$WORK/whole" "$WORK/part" --rtol 0 --atol 0
    # With GPT-2's dropout (embeddings, attention weights, residual branches):
    # the masks are keyed by (seed, rank, step, node), so the resumed steps
    # draw the very masks of the uninterrupted run.
    drop=(--model gpt-nano:dropout=0.1 "${adamw[@]:2}")
    train 2 "$WORK/dwhole" --batch 2 --max-steps 6 "${drop[@]}"
    train 2 "$WORK/dpart" --batch 2 --max-steps 3 "${drop[@]}"
    train 2 "$WORK/dpart" --batch 2 --max-steps 6 "${drop[@]}" --resume latest
    grep -q "resumed from .*ckpt-3.h5 at step 3" "$WORK/dpart/log.txt" || { cat "$WORK/dpart/log.txt"; fail "did not resume at step 3 (dropout)"; }
    same "$WORK/dwhole" "$WORK/dpart" --rtol 0 --atol 0
    # ... and the dropout is really on: not the run without it.
    if "$COMPARE" "$(ls "$WORK"/whole/ckpt/ckpt-*.h5 | sort -V | tail -1)" \
        "$(ls "$WORK"/dwhole/ckpt/ckpt-*.h5 | sort -V | tail -1)" --rtol 0 --atol 0 > /dev/null 2>&1; then
      fail "gpt-nano:dropout=0.1 trained exactly as gpt-nano"
    fi
    echo "PASS: gpt-nano resumed at step 3 equals the uninterrupted run bit for bit, with dropout 0.1 too"
    ;;
  zero)
    # The transformer recipe: AdamW with no decay on norms, biases and
    # embeddings, ZeRO-1 and bf16: with --zero 1 the same parameters as without
    # on 2 ranks and on 1 (AdamW divides by sqrt(v), so elements with tiny
    # gradients amplify the rounding of another world size's reduction: the
    # world-size equivalence is the SGD case above); bf16 lands near fp32.
    # shellcheck disable=SC2054 # the commas are --no-decay's list, not array separators
    recipe=(--model gpt-nano --max-steps 4 --epochs 100 --optimizer adamw --lr 1e-3 --weight-decay 0.1
            --no-decay norm,bias,embedding --clip-norm 1 --seed 5 --eval-every 0)
    train 2 "$WORK/plain" --batch 2 "${recipe[@]}"
    train 2 "$WORK/zero" --batch 2 "${recipe[@]}" --zero 1
    train 1 "$WORK/plain1" --batch 4 "${recipe[@]}"
    train 1 "$WORK/zero1" --batch 4 "${recipe[@]}" --zero 1
    same "$WORK/plain" "$WORK/zero" --rtol 1e-5 --atol 1e-7
    same "$WORK/plain1" "$WORK/zero1" --exact
    grep -q "no weight decay on" "$WORK/zero/log.txt" || grep -qi "no-decay" "$WORK/zero/log.txt" \
      || { cat "$WORK/zero/log.txt"; fail "the start-up lines do not say what does not decay"; }
    train 2 "$WORK/bf16" --batch 2 "${recipe[@]}" --zero 1 --precision bf16
    "$PYTHON" - "$WORK/plain/metrics.jsonl" "$WORK/bf16/metrics.jsonl" <<'PY' || fail "bf16 gpt-nano is far from fp32"
import json, sys
def last(p):
    return [json.loads(l) for l in open(p) if l.strip() and json.loads(l).get("kind") == "train"][-1]["loss"]
a, b = last(sys.argv[1]), last(sys.argv[2])
assert abs(a - b) < 0.05 * a, (a, b)
print(f"fp32 loss {a:.4f}, bf16 {b:.4f}")
PY
    echo "PASS: gpt-nano with AdamW groups, ZeRO-1 and bf16"
    ;;
  generate)
    train 1 "$WORK/base" --batch 4 "${common[@]}"
    gen() { "$RINGTRAIN_EXE" generate --ckpt "$WORK/base/ckpt" --prompt "The GNU General" --tokens 40 "$@"; }
    a=$(gen --seed 3 --temperature 0.8 --top-k 20 2>/dev/null) || fail "generate"
    b=$(gen --seed 3 --temperature 0.8 --top-k 20 2>/dev/null) || fail "generate again"
    [ "$a" = "$b" ] || fail "the same seed gave different text: '$a' vs '$b'"
    case "$a" in "The GNU General"*) ;; *) fail "the output does not continue the prompt: $a" ;; esac
    [ "$(printf '%s' "$a" | wc -c)" -ge 55 ] || fail "fewer than 40 bytes generated: $a"
    greedy=$(gen --temperature 0 2>/dev/null) || fail "greedy generate"
    long=$(head -c 200 "$TEXT" | tr '\n' ' ')
    rc=0
    "$RINGTRAIN_EXE" generate --ckpt "$WORK/base/ckpt" --prompt "$long" --tokens 5 > "$WORK/long.txt" 2> "$WORK/long.log" || rc=$?
    if [ $rc -ne 0 ] || ! grep -q "longer than the model's context of 128: the model sees only its last 128" "$WORK/long.log"; then
      cat "$WORK/long.log"
      fail "a prompt longer than the context: exit $rc"
    fi
    [ "$(head -c 200 "$WORK/long.txt")" = "$long" ] || fail "the long prompt is not printed whole: $(cat "$WORK/long.txt")"
    [ "$(wc -c < "$WORK/long.txt")" -ge 206 ] || fail "no tokens after the long prompt: $(cat "$WORK/long.txt")"
    rc=0
    "$RINGTRAIN_EXE" generate --ckpt "$WORK/base/ckpt" --tokens 20 --seed 1 > "$WORK/empty.txt" 2> "$WORK/empty.log" || rc=$?
    { [ $rc -eq 0 ] && grep -q "no --prompt: starting from a newline" "$WORK/empty.log"; } \
      || { cat "$WORK/empty.log"; fail "generate without a prompt: exit $rc"; }
    [ "$(wc -c < "$WORK/empty.txt")" -ge 21 ] || fail "generate without a prompt wrote too little: $(cat "$WORK/empty.txt")"
    rc=0
    "$RINGTRAIN_EXE" generate --ckpt "$WORK/nothere" --prompt x > "$WORK/missing.log" 2>&1 || rc=$?
    [ $rc -eq 2 ] || { cat "$WORK/missing.log"; fail "a missing checkpoint: exit $rc"; }
    c=$(gen --seed 3 --temperature 0.8 --top-k 20 --device cpu 2>/dev/null) || fail "generate --device cpu"
    [ "$a" = "$c" ] || fail "--device cpu (the default) gave different text: '$a' vs '$c'"
    if [ ! -e /dev/nvidiactl ]; then
      rc=0
      gen --device cuda > "$WORK/nogpu.log" 2>&1 || rc=$?
      if [ $rc -ne 2 ] || ! grep -q -- "--device cuda: no CUDA device is visible" "$WORK/nogpu.log"; then
        cat "$WORK/nogpu.log"
        fail "generate --device cuda without a GPU: exit $rc"
      fi
      auto=$(gen --seed 3 --temperature 0.8 --top-k 20 --device auto 2>/dev/null) || fail "generate --device auto"
      [ "$a" = "$auto" ] || fail "--device auto without a GPU differs from the CPU: '$a' vs '$auto'"
    fi
    echo "PASS: generate continues the prompt reproducibly: '$a' (greedy: '$greedy')"
    ;;
  *) fail "mode train, eval, resume or generate" ;;
esac
