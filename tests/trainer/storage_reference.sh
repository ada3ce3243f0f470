#!/usr/bin/env bash
# Same numbers, new storage: short CPU runs of the models whose activations a
# change of storage touches (16-bit tensors end to end), each checkpoint's
# every tensor hashed and compared with the hashes recorded before the change
# (storage_reference.txt). A tensor that moves is named, with its run.
#   storage_reference.sh            check against the record
#   storage_reference.sh --record   write the record (only for a change that
#                                   is meant to move the numbers; say why in its commit)
# The bits depend on the CPU's kernels (OpenBLAS's and oneDNN's choice by
# instruction set), so the record names the CPU it was made on; on another the
# test is skipped (77), never passed.
source "$(dirname "$0")/lib.sh"
record_file=$(dirname "$0")/storage_reference.txt
mode=check
[ "${1:-}" = --record ] && mode=record

# What decides the kernels the CPU runs: the processor and its vector units,
# and the OpenBLAS core type where one is forced.
cpu_fingerprint() {
  local model flags
  model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|f16c|avx512f|avx512bw|avx512_bf16|avx512_fp16|amx_bf16|amx_tile)$' | sort | tr '\n' ',')
  echo "$model [$flags] openblas=${OPENBLAS_CORETYPE:-auto}"
}
fingerprint=$(cpu_fingerprint)
if [ $mode = check ]; then
  recorded=$(sed -n 's/^# cpu: //p' "$record_file")
  if [ "$recorded" != "$fingerprint" ]; then
    echo "SKIPPED: the record was made on '$recorded'; this CPU is '$fingerprint' (rerun with --record on the base commit of a change to check it here)"
    exit 77
  fi
fi

GRAY=$WORK/gray28.h5 IMAGES=$WORK/images32.h5 INCEPTION=$WORK/images75.h5 TEXT_DATA=$WORK/gpl.h5
"$RINGTRAIN_EXE" convert synthetic --force --n 32 --test-n 8 --shape 1,28,28 --classes 10 --seed 10 \
  -o "$GRAY" > /dev/null 2>&1 || fail "synthetic 1x28x28"
"$RINGTRAIN_EXE" convert synthetic --force --n 32 --test-n 8 --shape 3,32,32 --classes 4 --seed 11 \
  -o "$IMAGES" > /dev/null 2>&1 || fail "synthetic 3x32x32"
"$RINGTRAIN_EXE" convert synthetic --force --n 16 --test-n 4 --shape 3,75,75 --classes 4 --seed 12 \
  -o "$INCEPTION" > /dev/null 2>&1 || fail "synthetic 3x75x75"
"$RINGTRAIN_EXE" convert text /usr/share/common-licenses/GPL-3 -o "$TEXT_DATA" --test-fraction 0.05 \
  > /dev/null 2>&1 || fail "convert text"

# name data np train-flags...: 3 steps from one seed, then every tensor's hash.
TRAIN_LOG_FLAGS=(--log-every 1 --check-every 1)
out=$WORK/hashes.txt
: > "$out"
run_case() {
  local name=$1 data=$2 np=$3
  shift 3
  DATA=$data train "$np" "$WORK/$name" --max-steps 3 --epochs 100 --eval-every 0 --seed 5 \
    --lr 0.05 --momentum 0.9 "$@"
  "$COMPARE" --tensor-hashes "$(newest "$WORK/$name/ckpt")" | sed "s|^|$name |" >> "$out" \
    || fail "$name: could not hash its checkpoint"
  rm -rf "$WORK/$name/ckpt"
}
cnn=(--model cnn --batch 8)
run_case cnn-fp32 "$GRAY" 1 "${cnn[@]}"
run_case cnn-bf16 "$GRAY" 1 "${cnn[@]}" --precision bf16
run_case cnn-fp16-accum2 "$GRAY" 2 "${cnn[@]}" --precision fp16 --accum 2
for layout in nchw nhwc; do
  run_case "resnet18-bf16-$layout" "$IMAGES" 1 --model resnet18 --batch 4 --precision bf16 --layout $layout
  run_case "resnet20-bf16-$layout" "$IMAGES" 1 --model resnet20 --batch 4 --precision bf16 --layout $layout
done
run_case resnet20-fp16-accum2 "$IMAGES" 2 --model resnet20 --batch 2 --precision fp16 --accum 2
run_case resnet20-fp32 "$IMAGES" 1 --model resnet20 --batch 4
run_case inception3-bf16 "$INCEPTION" 1 --model inception3 --batch 2 --precision bf16
run_case vgg16_bn-bf16 "$IMAGES" 1 --model vgg16_bn --batch 2 --precision bf16
run_case gpt-nano-dropout-bf16 "$TEXT_DATA" 1 --model gpt-nano:dropout=0.1 --batch 2 --precision bf16
run_case gpt-nano-dropout-fp32 "$TEXT_DATA" 1 --model gpt-nano:dropout=0.1 --batch 2

if [ $mode = record ]; then
  { echo "# Tensor hashes of tests/trainer/storage_reference.sh's runs (compare_checkpoints --tensor-hashes)."
    echo "# cpu: $fingerprint"
    cat "$out"; } > "$record_file"
  echo "recorded $(wc -l < "$out") tensors of $(cut -d' ' -f1 "$out" | sort -u | wc -l) runs in $record_file"
  exit 0
fi
moved=$(diff <(grep -v '^#' "$record_file") "$out" | grep '^[<>]' || true)
if [ -n "$moved" ]; then
  echo "$moved" | head -40
  fail "$(echo "$moved" | grep -c '^>') tensor line(s) differ from the record (< recorded, > now)"
fi
echo "PASS: $(wc -l < "$out") tensors of $(cut -d' ' -f1 "$out" | sort -u | wc -l) runs bit for bit as recorded"
