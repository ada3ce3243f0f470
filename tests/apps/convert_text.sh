#!/usr/bin/env bash
# `ringtrain convert text`: byte and sentencepiece tokens round-trip, the
# tokenizer travels with the data set, and bad inputs are exit 2 with a clear
# line: an empty file, a missing file or tokenizer model, an existing output
# without --force. A non-UTF-8 file is fine with the bytes tokenizer.
source "$(dirname "$0")/lib.sh"
need_python_modules h5py
py() { "$PYTHON" -c "$@"; }

# bytes: the tokens are the file's bytes, train then test, in order.
printf 'Hello, tokens.\nA second line, with more words in it.\n' > "$WORK/a.txt"
printf '\xff\xfe latin-1 caf\xe9 \x00 and a NUL\n' > "$WORK/binary.txt"
expect 0 bytes "tokenizer bytes .vocabulary 256" "$R" convert text "$WORK/a.txt" "$WORK/binary.txt" \
  -o "$WORK/bytes.h5" --test-fraction 0.25
# /train: the head of each file in order; /test: the last quarter of each.
py 'import h5py,sys
f=h5py.File(sys.argv[1]); train=bytes(f["train/tokens"][:].astype("uint8")); test=bytes(f["test/tokens"][:].astype("uint8"))
a,b=open(sys.argv[2],"rb").read(),open(sys.argv[3],"rb").read()
cut=lambda s: len(s)-len(s)//4
assert train==a[:cut(a)]+b[:cut(b)], "train tokens differ from the files"
assert test==a[cut(a):]+b[cut(b):], "test tokens differ from the files"
assert f.attrs["vocab_size"]==256 and f.attrs["tokenizer"]=="bytes"
print("ok: bytes round trip,", len(a)+len(b), "bytes")' "$WORK/bytes.h5" "$WORK/a.txt" "$WORK/binary.txt" \
  || fail "bytes round trip"

# Bad inputs.
: > "$WORK/empty.txt"
expect 2 empty "empty.txt. holds 0 token.s.: nothing to learn" "$R" convert text "$WORK/empty.txt" -o "$WORK/e.h5"
one_line empty
[ ! -e "$WORK/e.h5" ] || fail "an output was left for an empty input"
expect 2 missing "text file .*nothere.txt does not exist" "$R" convert text "$WORK/nothere.txt" -o "$WORK/m.h5"
expect 2 exists "bytes.h5.*--force" "$R" convert text "$WORK/a.txt" -o "$WORK/bytes.h5"
expect 0 force "wrote" "$R" convert text "$WORK/a.txt" -o "$WORK/bytes.h5" --force
expect 2 no_model "tokenizer model .*nomodel.model does not exist" \
  "$R" convert text "$WORK/a.txt" -o "$WORK/s.h5" --tokenizer sentencepiece:"$WORK/nomodel.model"
expect 2 not_a_model "not a sentencepiece model" \
  "$R" convert text "$WORK/a.txt" -o "$WORK/s.h5" --tokenizer sentencepiece:"$WORK/a.txt"
expect 2 needs_vocab "needs a model" "$R" convert text "$WORK/a.txt" -o "$WORK/s.h5" --tokenizer sentencepiece
expect 2 bad_tokenizer "--tokenizer words: expected bytes" "$R" convert text "$WORK/a.txt" -o "$WORK/s.h5" --tokenizer words

# sentencepiece, trained on the corpus: its model is stored, and decoding the
# tokens with it gives the text back.
if "$R" convert text --help | grep -q "this build has no sentencepiece"; then
  echo "SKIPPED: sentencepiece part (built without libsentencepiece)"
  exit 0
fi
# A vocabulary holds the 256 byte pieces besides the corpus's characters: too
# small a one is a clear error.
corpus=/usr/share/common-licenses/GPL-3
expect 2 sp_small "--train-tokenizer 64: sentencepiece training failed.*256 byte pieces" \
  "$R" convert text "$corpus" -o "$WORK/sp.h5" --tokenizer sentencepiece --train-tokenizer 64
expect 0 sp_train "tokenizer sentencepiece .vocabulary 400" "$R" convert text "$corpus" -o "$WORK/sp.h5" \
  --tokenizer sentencepiece --train-tokenizer 400
py 'import h5py,sys
f=h5py.File(sys.argv[1])
assert f.attrs["tokenizer"]=="sentencepiece" and f.attrs["vocab_size"]==400
model=bytes(f["tokenizer_model"][:])
open(sys.argv[2],"wb").write(model)
n=len(f["train/tokens"])+len(f["test/tokens"])
assert 0 < n < len(open(sys.argv[3],"rb").read()) * 3 // 4, n
print("ok: sentencepiece model stored,", len(model), "bytes,", n, "tokens")' "$WORK/sp.h5" "$WORK/sp.model" "$corpus" \
  || fail "sentencepiece dataset"
# The stored model, given back as sentencepiece:MODEL, encodes the same tokens.
expect 0 sp_model "tokenizer sentencepiece .vocabulary 400" "$R" convert text "$corpus" -o "$WORK/sp2.h5" \
  --tokenizer sentencepiece:"$WORK/sp.model"
py 'import h5py,sys
a,b=h5py.File(sys.argv[1]),h5py.File(sys.argv[2])
assert (a["train/tokens"][:]==b["train/tokens"][:]).all()' "$WORK/sp.h5" "$WORK/sp2.h5" || fail "model reuse"
# (Decoding round trips are in tests/data/token_data_test.cpp.)
echo "PASS: convert text (bytes and sentencepiece)"
