#!/usr/bin/env bash
# The model language as a user meets it through `ringtrain model show`: the
# example specs under launch/models/ are accepted and build the presets' graphs;
# bad blocks, arguments, inputs, cycles and shapes exit 2 with one line naming
# the block or node and its line:column.
source "$(dirname "$0")/../apps/lib.sh"
MODELS=$(cd "$(dirname "$0")/../../launch/models" && pwd)
SHOW=("$R" model show --input 1,12,12 --classes 10)

# The example resnet20 in the language: the preset's nodes, shapes and parameters.
expect 0 resnet20_text "parameters: 272186" "${SHOW[@]}" --model "@$MODELS/resnet20.txt"
"${SHOW[@]}" --model "@$MODELS/resnet20.txt" --json > "$WORK/text.json"
"${SHOW[@]}" --model resnet20 --json > "$WORK/preset.json"
"$PYTHON" - "$WORK/text.json" "$WORK/preset.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["layers"] == b["layers"], "the text's nodes differ from the preset's"
assert a["params"] == b["params"] == 272186 and a["buffers"] == b["buffers"], (a["params"], b["params"])
assert a["activation_bytes_per_sample"] == b["activation_bytes_per_sample"]
assert len(a["layers"]) == 72 and a["layers"][3]["name"] == "layer1.0.conv1", a["layers"][3]
print("ok: resnet20 text == preset:", len(a["layers"]), "nodes,", a["params"], "parameters")
PY

# --text writes the graph out (blocks expanded, a preset for --classes): the
# preset's text and the blocks' text are the same lines, with the same hash.
"${SHOW[@]}" --model resnet20 --text > "$WORK/preset.txt"
"${SHOW[@]}" --model "@$MODELS/resnet20.txt" --text > "$WORK/text.txt"
cmp "$WORK/preset.txt" "$WORK/text.txt" || fail "--text of the preset and of the blocks differ"
[ "$(wc -l < "$WORK/text.txt")" -eq 72 ] || fail "--text: $(wc -l < "$WORK/text.txt") lines, expected 72"
grep -qx "layer2.0.downsample.0 = conv2d(layer1.2.relu, out=32, kernel=1, stride=2, padding=0, bias=0)" \
  "$WORK/text.txt" || fail "--text lacks layer2.0's projection"
hash_of() { "${SHOW[@]}" --model "$1" | sed -n 's/^spec hash //p'; }
[ "$(hash_of "@$WORK/preset.txt")" = "$(hash_of "@$MODELS/resnet20.txt")" ] || fail "hashes differ"
expect 2 text_and_json "--json excludes --text" "${SHOW[@]}" --model resnet20 --text --json

# A one-line spec with a block and a repeat.
expect 0 one_line_block "parameters: " "${SHOW[@]}" --model \
  "block b(w) { c = conv2d(out=w, kernel=3, padding=1); r = relu }; repeat i = 1..2 { s{i} = b(4) }; global_avg_pool; linear(out=10)"

# Errors: exit 2, one line, the block or node and its line:column.
B="block b(w) { c = conv2d(out=w, kernel=1); r = relu }"
expect 2 unknown_block "unknown layer 'bb' at 1:.*blocks: b" "${SHOW[@]}" --model "$B; y = bb(2); flatten; linear(out=10)"
one_line unknown_block
expect 2 wrong_argument "unknown argument 'width' to block 'b' at 1:" \
  "${SHOW[@]}" --model "$B; y = b(width=2); flatten; linear(out=10)"
one_line wrong_argument
expect 2 missing_argument "block 'b' called at 1:[0-9]+ needs 'w'" "${SHOW[@]}" --model "$B; y = b(); flatten; linear(out=10)"
expect 2 recursion "block 'a' calls itself at 1:[0-9]+, in block 'a' called at 1:[0-9]+ \\(through a -> a\\)" \
  "${SHOW[@]}" --model "block a() { relu; a() }; a(); flatten; linear(out=10)"
one_line recursion
expect 2 unknown_input "unknown input 'zz' of 'add' at 1:[0-9]+, in block 'c' called at 1:" \
  "${SHOW[@]}" --model "block c() { add(input, zz) }; c(); flatten; linear(out=10)"
expect 2 cycle "'a' at 1:16 reads 'b', which is defined later" \
  "${SHOW[@]}" --model "a = add(input, b); b = relu(a); flatten; linear(out=10)"
one_line cycle
expect 2 shape_mismatch "node 'y.s' .* at 1:[0-9]+, in block 'p' called at 1:[0-9]+: .*\\[4, 12, 12\\]" \
  "${SHOW[@]}" --model "block p(w) { c = conv2d(out=w, kernel=1); s = add(c, input) }; y = p(4); flatten; linear(out=10)"
one_line shape_mismatch
printf 'block b(w) {\n  c = conv2d(out=w, kernel=1)\n  s = concat(c, input)\n' > "$WORK/open.txt"
expect 2 missing_brace "missing '}' for the '\\{' at .*open.txt:1:12" "${SHOW[@]}" --model "@$WORK/open.txt"
echo "PASS"
