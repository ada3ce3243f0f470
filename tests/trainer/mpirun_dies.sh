#!/usr/bin/env bash
# mpirun dies without signalling the ranks: Open MPI's mpirun exits 1 at once
# on two Ctrl-Cs close together, and kill -9 gives it no chance at all. Each
# rank now asks the kernel for SIGTERM when its parent dies
# (PR_SET_PDEATHSIG), and stops through the SIGTERM path: a checkpoint, no
# rank left. Before, the ranks were left to Open MPI noticing the lost daemon
# (here: gone within seconds, killed without a checkpoint), or ran on where
# it did not notice. Linux only (prctl).
source "$(dirname "$0")/lib.sh"
[ "$(uname -s)" = Linux ] || { echo "skip: PR_SET_PDEATHSIG is Linux's"; exit 77; }

out=$WORK/killed
mkdir -p "$out"
# The train split alone: no evaluation, whose line each epoch would meet the
# closed pipe (SIGPIPE) and stop rank 0 without the fix.
"$PYTHON" - "$DATA" "$WORK/train_only.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:
    src.copy("train", dst)
    for k, v in src.attrs.items():
        dst.attrs[k] = v
PY
# --log-every far away: the ranks write nothing after the start, so only the
# parent's death can stop them. A process group of its own (set -m), so that
# the kill below reaches mpirun alone.
set -m
"${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$WORK/train_only.h5" --model "$MLP" --batch 8 \
  --epochs 100000 --log-every 1000000000 --logdir "$out" --timeout 60 --device cpu \
  --ckpt-dir "$out/ckpt" >"$out/log.txt" 2>&1 &
launcher=$!
set +m
ranks() { pgrep -f -- "--logdir $out " | grep -vx "$launcher" || true; }
for _ in $(seq 1 300); do
  [ "$(ranks | wc -l)" -ge 2 ] && grep -q "optimizer steps" "$out/log.txt" 2>/dev/null && break
  sleep 0.1
done
[ "$(ranks | wc -l)" -ge 2 ] || { cat "$out/log.txt"; fail "the two ranks did not start"; }
sleep 1  # into the step loop
kill -9 "$launcher"
wait "$launcher" 2>/dev/null || true
for _ in $(seq 1 100); do
  [ -z "$(ranks)" ] && break
  sleep 0.1
done
if [ -n "$(ranks)" ]; then
  ps -o pid,ppid,stat,args -p "$(ranks | paste -sd,)" || true
  kill -9 $(ranks) 2>/dev/null || true
  cat "$out/log.txt"
  fail "ranks still running 10 s after mpirun was killed"
fi
# The SIGTERM took the clean path: a checkpoint of where the ranks stopped.
ls "$out"/ckpt/ckpt-*.h5 >/dev/null 2>&1 || { cat "$out/log.txt"; fail "no checkpoint: the ranks did not stop through SIGTERM"; }
"$COMPARE" --hash "$(newest "$out/ckpt")" >/dev/null || fail "$(newest "$out/ckpt") does not read back"
echo "ok: kill -9 of mpirun: no rank left within 10 s, $(basename "$(newest "$out/ckpt")") written"
echo "PASS"
