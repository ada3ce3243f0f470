#!/usr/bin/env bash
# The real-corpus demo as a test (label long): gpt-nano learns English from
# Debian's `fortunes` package (about 2.5 MB of quotations, literature, poems
# and jokes in plain English text, under /usr/share/games/fortunes), with byte
# tokens on 2 ranks, until the test loss is clearly below the unigram entropy
# of the corpus; then `generate` writes recognisable English words.
#   language_model_long.sh [STEPS]
source "$(dirname "$0")/lib.sh"
need_python_modules h5py numpy
CORPUS=/usr/share/games/fortunes
[ -d "$CORPUS" ] || { echo "SKIPPED: $CORPUS is missing (apt-get install fortunes)"; exit 77; }
STEPS=${1:-1200}
# The text files (not the .dat indexes, not the .u8 links, not the ASCII art).
mapfile -t files < <(find "$CORPUS" -maxdepth 1 -type f ! -name '*.*' ! -name 'art' ! -name 'ascii-art' | sort)
[ ${#files[@]} -gt 10 ] || fail "fewer than 10 fortune files in $CORPUS"
DATA=$WORK/fortunes.h5
"$RINGTRAIN_EXE" convert text "${files[@]}" -o "$DATA" --test-fraction 0.02 | tee "$WORK/convert.log"
unigram=$("$PYTHON" -c 'import h5py,numpy as np,sys
t=h5py.File(sys.argv[1])["train/tokens"][:]
p=np.bincount(t, minlength=256)/len(t); p=p[p>0]
print("%.4f" % float(-(p*np.log(p)).sum()))' "$DATA")
# shellcheck disable=SC2034 # (read by lib.sh's train)
TRAIN_LOG_FLAGS=(--log-every 50 --check-every 100)
train 2 "$WORK/run" --model gpt-nano --batch 8 --optimizer adamw --lr 2e-3 --weight-decay 0.01 \
  --schedule cosine --warmup 20 --max-steps "$STEPS" --eval-every 0 --seed 1
grep -E "tokens/s|eval at step" "$WORK/run/log.txt" | tail -3
loss=$("$PYTHON" -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([r for r in rows if r.get("kind")=="eval"][-1]["loss"])' "$WORK/run/metrics.jsonl")
echo "test loss $loss nats per byte; unigram entropy of the training bytes $unigram"
"$PYTHON" -c "import sys; sys.exit(0 if $loss < $unigram - 0.5 else 1)" \
  || fail "test loss $loss is not clearly below the unigram entropy $unigram"
text=$("$RINGTRAIN_EXE" generate --ckpt "$WORK/run/ckpt" --prompt "The " --tokens 400 --temperature 0.7 --seed 2)
echo "generated: $text"
words=$(printf '%s' "$text" | tr '[:upper:]' '[:lower:]' | tr -c 'a-z' '\n' | sort -u \
  | grep -cxE 'the|and|of|to|a|in|is|you|that|it|he|was|for|on|are|with|as|his|they|be|at|one|have|this|from|or|had|by|not|but|what|all|were|we|when|your|can|said|there|an|she|which|do|their|if|will|my|me|so|no|man|love|time|life|who|like|would|good|never|people|know')
echo "distinct common English words in the sample: $words"
[ "$words" -ge 8 ] || fail "the generated text has only $words common English words"
echo "PASS: gpt-nano on fortunes: test loss $loss < unigram entropy $unigram - 0.5, and generate writes English words"
