#!/usr/bin/env bash
# Every subcommand that writes a file goes through the same output guard as
# convert: eval --json, bench collectives --json, bench predict --csv, weights
# export and import, predict -o and convert images refuse an existing output
# without --force (leaving it as it was) and an output that is one of their
# inputs even with --force; with --force they replace it, through a temporary
# name (nothing is left beside it). data inspect's --out and --dump
# directories must be new or empty without --force.
source "$(dirname "$0")/lib.sh"
need_python_modules PIL
cd "$WORK" || exit 1
CKPT=$WORK/ck
"$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 3 --device cpu --ckpt-dir "$CKPT" > train.log 2>&1 ||
  { cat train.log; fail "cannot train the checkpoint"; }

# kept NAME FILE COPY: FILE is byte for byte its copy from before.
kept() { cmp -s "$2" "$3" || fail "$1: the existing $2 changed"; }

echo '{"earlier": "result"}' > e.json && cp e.json e.orig
expect 2 eval_json_exists "--json e.json already exists: pass --force" \
  "$R" eval --ckpt "$CKPT" --data "$DATA" --json e.json
one_line eval_json_exists
kept eval_json_exists e.json e.orig
expect 2 eval_json_is_data "--json .*data.h5 is also the input --data" \
  "$R" eval --ckpt "$CKPT" --data "$DATA" --json "$DATA" --force
expect 0 eval_json_force "accuracy" "$R" eval --ckpt "$CKPT" --data "$DATA" --json e.json --force
"$PYTHON" -c 'import json,sys; assert "accuracy" in json.load(open("e.json"))' || fail "eval --json --force did not write the result"
expect 2 eval_json_exists_np2 "\[rank 0/[^]]*\] error: .*--json e.json already exists.*\[the same on ranks 0,1 \(all\)\]" \
  "${MPIRUN[@]}" -np 2 "$R" eval --ckpt "$CKPT" --data "$DATA" --json e.json

cp e.json b.json && cp b.json b.orig
expect 2 bench_json_exists "--json b.json already exists: pass --force" "$R" bench allreduce -b 8 -e 64 --json b.json
kept bench_json_exists b.json b.orig
expect 0 bench_json_force "busbw" "$R" bench allreduce -b 8 -e 64 --json b.json --force
"$PYTHON" -c 'import json; assert len(json.load(open("b.json"))) > 0' || fail "bench --json --force did not write the rows"

echo "nodes,ranks" > p.csv && cp p.csv p.orig
expect 2 bench_csv_exists "--csv p.csv already exists: pass --force" \
  "$R" bench predict --trace e.json --comm-model b.json --csv p.csv
kept bench_csv_exists p.csv p.orig
expect 2 bench_csv_is_trace "--csv e.json is also the input --trace e.json" \
  "$R" bench predict --trace e.json --comm-model b.json --csv e.json --force

expect 0 export_ok "wrote w.safetensors" "$R" weights export --ckpt "$CKPT/ckpt-3.h5" -o w.safetensors
cp w.safetensors w.orig
expect 2 export_exists "-o w.safetensors already exists: pass --force" \
  "$R" weights export --ckpt "$CKPT/ckpt-3.h5" -o w.safetensors
kept export_exists w.safetensors w.orig
expect 2 export_onto_ckpt "is also the input --ckpt" "$R" weights export --ckpt "$CKPT/ckpt-3.h5" -o "$CKPT/ckpt-3.h5" --force
expect 0 import_ok "ckpt-0.h5" "$R" weights import w.safetensors --model "$MLP" --input 1,4,4 --classes 3 -o imported
expect 2 import_exists "ckpt-0.h5 already exists: pass --force" \
  "$R" weights import w.safetensors --model "$MLP" --input 1,4,4 --classes 3 -o imported

# convert images: the tree's own files and folder are inputs.
"$PYTHON" - <<'PY' || fail "cannot write the PNG tree"
import os
from PIL import Image
for c in ("cat", "dog"):
    os.makedirs(f"pngs/{c}", exist_ok=True)
    for i in range(3):
        Image.new("L", (8, 8), 40 * i + (0 if c == "cat" else 7)).save(f"pngs/{c}/{i}.png")
PY
cp pngs/cat/0.png cat0.orig
expect 0 images_ok "/train: 4 images of 1x8x8 uint8, 2 classes" "$R" convert images pngs --test-fraction 0.34 --no-progress -o i.h5
cp i.h5 i.orig
expect 2 images_exists "--output i.h5 already exists: pass --force" "$R" convert images pngs --no-progress -o i.h5
kept images_exists i.h5 i.orig
expect 2 images_onto_image "pngs/cat/0.png is also the input image" \
  "$R" convert images pngs --test-fraction 0.34 --no-progress -o pngs/cat/0.png --force
kept images_onto_image pngs/cat/0.png cat0.orig
expect 2 images_onto_folder "is also the input --train" "$R" convert images pngs --no-progress -o pngs --force
expect 0 images_force "/train: 4 images of 1x8x8 uint8, 2 classes" "$R" convert images pngs --test-fraction 0.34 --no-progress -o i.h5 --force

# data inspect fills directories: an earlier run's files would mix with this
# run's, so a directory that holds files is refused without --force.
expect 0 inspect_dump "wrote each sample's" "$R" data inspect --data "$DATA" --batch 8 --dump dump
n=$(find dump -name '*.npy' | wc -l)
expect 2 inspect_dump_again "--dump dump already holds $n file\(s\).*pass --force" \
  "$R" data inspect --data "$DATA" --batch 8 --dump dump --epoch 1
expect 2 inspect_dump_np2 "already holds .*\[the same on ranks 0,1 \(all\)\]" \
  "${MPIRUN[@]}" -np 2 "$R" data inspect --data "$DATA" --batch 8 --dump dump
expect 0 inspect_dump_force "wrote each sample's" "$R" data inspect --data "$DATA" --batch 8 --dump dump --force
expect 0 inspect_out_np2 "wrote .*rank-<r>.txt for 2 rank" "${MPIRUN[@]}" -np 2 "$R" data inspect --data "$DATA" \
  --batch 8 --out lists
expect 2 inspect_out_again "--out lists already holds 2 file" "$R" data inspect --data "$DATA" --batch 8 --out lists

! compgen -G "*.tmp*" > /dev/null || fail "a temporary file was left behind: $(ls ./*.tmp*)"
echo "PASS: no subcommand replaced an input or an existing output without --force"
