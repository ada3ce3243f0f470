# shellcheck shell=bash
# Shared by the app tests: a scratch directory, a small data set, a checkpoint,
# and expect CODE NAME REGEX COMMAND... which runs COMMAND (at most 120 s) and
# checks its exit code and output.
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
: "${RINGTRAIN_EXE:?}"
R=$RINGTRAIN_EXE
# shellcheck disable=SC2034 # (MPIRUN and MLP are for the scripts that source this)
MPIRUN=(mpirun --oversubscribe --bind-to none)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringtrain-app.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

expect() {  # CODE NAME REGEX COMMAND...
  local code=$1 name=$2 regex=$3 rc=0
  shift 3
  timeout -k 5 120 "$@" > "$WORK/$name.log" 2>&1 || rc=$?
  [ "$rc" -eq "$code" ] || { cat "$WORK/$name.log"; fail "$name: exit code $rc, expected $code"; }
  grep -Eq -- "$regex" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: no /$regex/ in the output"; }
  echo "ok: $name (exit $rc): $(grep -m1 -E -- "$regex" "$WORK/$name.log")"
}

# A one-process tool's error: exactly one line, and no MPI abort banner.
one_line() {  # NAME
  local log=$WORK/$1.log
  ! grep -q "MPI_ABORT" "$log" || { cat "$log"; fail "$1: Open MPI's abort banner"; }
  [ "$(grep -c . "$log")" -eq 1 ] || { cat "$log"; fail "$1: more than one line"; }
}

DATA=$WORK/data.h5
"$R" convert synthetic --n 128 --test-n 21 --shape 1,4,4 --classes 3 --seed 3 -o "$DATA" > /dev/null \
  || fail "cannot make the data set"
# shellcheck disable=SC2034
MLP="mlp:16-8-3"
