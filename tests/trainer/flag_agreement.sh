#!/usr/bin/env bash
# Two ranks started with one flag different (a wrapper script, a per-node
# config): for every flag that changes what a rank does collectively or when,
# the job ends at start-up with exit 2, naming the flag, both values as they
# were written and the ranks, long before --timeout. A flag of `train --help`
# that is in neither list below fails the test: it must join the agreement
# (config_agreement.cpp) or be listed as safe to differ.
source "$(dirname "$0")/lib.sh"

# FLAG VALUE_ON_RANK_0 VALUE_ON_RANK_1 ("-" leaves the flag out, "+" gives a
# flag that takes no value): every flag the start-up agreement compares.
compared=(
  "--split train test" "--eval-split test train" "--cache - +"
  "--batch 8 4" "--global-batch 16 8" "--epochs 2 3" "--max-steps 4 8" "--accum 1 2"
  "--seed 1 2" "--tf32 on off" "--optimizer sgd adamw" "--lr 0.05 0.1" "--momentum 0.9 0.5"
  "--nesterov - +" "--weight-decay 0 0.001" "--lr-scaling none linear" "--reference-batch 0 32"
  "--warmup 0 2" "--schedule constant cosine" "--step-size 1000 10" "--gamma 0.1 0.5"
  "--clip-norm 0 1" "--nonfinite stop skip:2" "--backend ring mpi" "--bucket-mb 1 0.5"
  "--no-overlap - +" "--eval-every 0 2" "--log-every 50 2" "--straggler-every 100 3"
  "--check-every 100 2" "--ckpt-every 0 2" "--ckpt-dir - $WORK/ckpt-b" "--trace - $WORK/trace.json"
  "--resume - latest" "--sync-bn - +" "--label-smoothing 0 0.1"
  "--precision fp32 bf16" "--layout auto nhwc" "--fuse on off" "--cuda-graph off on" "--loss-scale-init 65536 1024"
  "--loss-scale-window 2000 10"
  "--grad-dtype fp32 bf16" "--zero 0 1" "--no-decay - bias" "--on-divergence warn stop"
)
# Flags that may differ per rank (paths, a rank's own watchdog, host-side
# buffering) or that are compared in another form (--model by its spec hash,
# --plugin by the layers it registers, --data by the data set's shape and size).
not_compared=(--help --data --model --plugin --logdir --flight-dir --keep --timeout --prefetch
              --device --allow-gpu-sharing --init-from --init-skip-mismatched --loader-threads)

# Compared at start-up, but exercised where image sets are made (tests/data):
# the synthetic set here has no images to augment.
compared_elsewhere=(--augment --eval-transform)

# The inventory: every flag of `train --help` is in one list.
listed=" ${not_compared[*]} ${compared_elsewhere[*]} "
for entry in "${compared[@]}"; do listed+="${entry%% *} "; done
for flag in $("$RINGTRAIN_EXE" train --help | grep -oE -- '--[a-z0-9-]+' | sort -u); do
  case "$listed" in
    *" $flag "*) ;;
    *) fail "train flag $flag is neither compared at start-up nor listed as safe to differ" ;;
  esac
done

base=(--data "$DATA" --model "$MLP" --device cpu --timeout 300)
side() {  # FLAG VALUE: the flag as one rank gets it
  local flag=$1 value=$2
  case "$value" in
    -) ;;
    +) printf '%s\n' "$flag" ;;
    *) printf '%s\n%s\n' "$flag" "$value" ;;
  esac
}
for entry in "${compared[@]}"; do
  read -r flag a b <<< "$entry"
  extra=()
  # --ckpt-every and --resume latest need a checkpoint directory on both ranks.
  case "$flag" in --ckpt-every | --resume) extra=(--ckpt-dir "$WORK/ckpt-$flag") ;; esac
  mapfile -t on0 < <(side "$flag" "$a")
  mapfile -t on1 < <(side "$flag" "$b")
  log=$WORK/agree$flag.log
  rc=0
  # A hang ends in timeout's 124 (the run's --timeout 300 outlasts the 120 s
  # given here), so the exit code alone tells it apart, with no clock.
  timeout -k 5 120 "${MPIRUN[@]}" -np 1 "$RINGTRAIN_EXE" train "${base[@]}" "${extra[@]}" "${on0[@]}" : \
    -np 1 "$RINGTRAIN_EXE" train "${base[@]}" "${extra[@]}" "${on1[@]}" > "$log" 2>&1 || rc=$?
  [ $rc -eq 2 ] || { cat "$log"; fail "$flag: exit code $rc, expected 2"; }
  # The values as written; a flag left out or without a value prints its state.
  show() { case "$1" in -) echo "not given" ;; +) echo given ;; *) echo "$1" ;; esac; }
  case "$flag" in
    --ckpt-dir | --trace) want="'$flag' is not given on rank 0, but given ($b) on rank 1" ;;
    --resume) want="'$flag' is not given on rank 0, but latest on rank 1" ;;
    *) want="'$flag' is $(show "$a") on rank 0, but $(show "$b") on rank 1" ;;
  esac
  grep -qF -- "$want" "$log" || { cat "$log"; fail "$flag: no \"$want\" in the output"; }
  # Said once, by rank 0, not once per rank (every rank finds the same mismatch).
  [ "$(grep -c "ranks disagree on the run" "$log")" -eq 1 ] && grep -qE -- "\[rank 0/.*ranks disagree" "$log" \
    || { cat "$log"; fail "$flag: the mismatch is not said exactly once, by rank 0"; }
  echo "ok: $flag: $want"
done
echo "PASS: every compared flag fails at start-up (exit 2, not a hang), naming the flag, values and ranks"
