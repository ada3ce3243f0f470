#!/usr/bin/env bash
# Every output of a run (--ckpt-dir, --logdir, --trace, --flight-dir) is
# created or found, and proven writable, before step 1: a path that cannot be
# written ends the job at start-up with exit 2 (bad input, never retried),
# naming the flag and the path, and nothing is trained.
source "$(dirname "$0")/lib.sh"
# --timeout 300 outlasts the 60 s each run is given: a run that hangs ends in
# timeout's 124, not in the 2 the checks want, with no clock read.
base=(--data "$DATA" --model "$MLP" --batch 8 --max-steps 4 --device cpu --timeout 300)
echo "not a directory" > "$WORK/file"
expect_exit2() {  # NAME REGEX COMMAND...
  local name=$1 regex=$2 rc=0
  shift 2
  timeout -k 5 60 "$@" > "$WORK/$name.log" 2>&1 || rc=$?
  [ $rc -eq 2 ] || { cat "$WORK/$name.log"; fail "$name: exit code $rc, expected 2"; }
  grep -Eq -- "$regex" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: no /$regex/"; }
  # Nothing was trained: the start-up table and the summary never appear.
  ! grep -qE "optimizer steps|done after" "$WORK/$name.log" \
    || { cat "$WORK/$name.log"; fail "$name: the run trained before failing"; }
  echo "ok: $name: $(grep -m1 -E -- "$regex" "$WORK/$name.log")"
}
np2=("${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}")
expect_exit2 ckpt_under_file "--ckpt-dir $WORK/file/ckpt: cannot create the directory: Not a directory" \
  "${np2[@]}" --ckpt-dir "$WORK/file/ckpt"
expect_exit2 ckpt_is_file "--ckpt-dir $WORK/file: exists and is not a directory" \
  "${np2[@]}" --ckpt-dir "$WORK/file"
expect_exit2 logdir_under_file "--logdir $WORK/file/logs: cannot create the directory" \
  "${np2[@]}" --logdir "$WORK/file/logs"
expect_exit2 trace_under_file "--trace $WORK/file/trace.json: the directory $WORK/file: exists and is not a directory" \
  "${np2[@]}" --trace "$WORK/file/trace.json"
expect_exit2 flight_under_file "--flight-dir $WORK/file/flight: cannot create the directory" \
  "${np2[@]}" --flight-dir "$WORK/file/flight"
# Permission denied, as a user who is not root (root may write anywhere).
if [ "$(id -u)" -eq 0 ]; then as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$WORK"); else as_user=(); fi
chmod 755 "$WORK"
chmod 644 "$DATA"
mkdir -p "$WORK/readonly/logs"
chmod 555 "$WORK/readonly" "$WORK/readonly/logs"
one=("${as_user[@]}" "$RINGTRAIN_EXE" train "${base[@]}")
expect_exit2 ckpt_denied "--ckpt-dir $WORK/readonly/ckpt: cannot create the directory: Permission denied" \
  "${one[@]}" --ckpt-dir "$WORK/readonly/ckpt"
expect_exit2 logdir_denied "--logdir $WORK/readonly/logs: cannot write in this directory: Permission denied" \
  "${one[@]}" --logdir "$WORK/readonly/logs"
[ ! -e "$WORK/readonly/ckpt" ] || fail "a directory was made where none could be"
# A writable set of outputs that does not exist yet is made at start-up and the run trains.
train 2 "$WORK/fresh" --batch 8 --max-steps 2 --model "$MLP" --trace "$WORK/fresh/deep/trace.json" \
  --flight-dir "$WORK/fresh/flight"
[ -s "$WORK/fresh/deep/trace.json" ] || fail "no trace written"
ls "$WORK/fresh/flight"/rank-0* > /dev/null || fail "no flight record written"
echo "PASS: every unwritable output is refused at start-up, naming its flag and path"
