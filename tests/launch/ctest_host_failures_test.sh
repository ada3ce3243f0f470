#!/usr/bin/env bash
# launch/ctest_host_failures.py: a failure that the GPU host's environment
# explains (a missing Python module, gnuplot, CMake; a test not run because its
# fixture failed so) is the host's; any other failure, or one whose only sign is
# PMIx's stderr warnings, is not, and makes the script exit 1.
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
root=${1:?usage: ctest_host_failures_test.sh SOURCE_DIR}
tool=$root/launch/ctest_host_failures.py
work=$(mktemp -d "${TMPDIR:-/tmp}/ringtrain-hostfail.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$work/host.log" <<'LOG'
      Start 63: image_fixtures
  3/9 Test  #63: image_fixtures ...........................***Failed    0.04 sec
ModuleNotFoundError: No module named 'PIL'
      Start 64: image_convert_test
Failed test dependencies: image_fixtures
  4/9 Test  #64: image_convert_test .......................***Not Run   0.00 sec
      Start 73: image_convert_memory
Unable to find executable: /usr/bin/cmake
  5/9 Test  #73: image_convert_memory .....................***Not Run   0.00 sec
      Start 189: scaling_study_local
  6/9 Test #189: scaling_study_local ......................***Failed    0.01 sec
FAIL: gnuplot is not installed (launch/install-deps.sh installs gnuplot-nox)
      Start 10: comm_backend_choice_test
  7/9 Test  #10: comm_backend_choice_test .................   Passed    0.01 sec

56% tests passed, 4 tests failed out of 7
LOG
"$PYTHON" "$tool" "$work/host.log" > "$work/host.out" || { cat "$work/host.out"; fail "host-only failures: exit $?"; }
grep -q '^host image_fixtures: Python module PIL$' "$work/host.out" || fail "PIL not named"
grep -q '^host image_convert_test: its fixture image_fixtures' "$work/host.out" || fail "Not Run by fixture"
grep -q '^host image_convert_memory: /usr/bin/cmake$' "$work/host.out" || fail "cmake not named"
grep -q '^host scaling_study_local: gnuplot$' "$work/host.out" || fail "gnuplot not named"
grep -q '^4 failed: 4 for what the host lacks, 0 other$' "$work/host.out" || fail "summary: $(tail -1 "$work/host.out")"

cat "$work/host.log" - > "$work/mixed.log" <<'LOG'
      Start 2: app_exit_codes
  8/9 Test   #2: app_exit_codes ...........................***Failed    1.54 sec
[vm:00588] pmix_mca_base_component_repository_open: unable to open /x/pmix_mca_pcompress_zlib:
FAIL: train_bad_model: more than one line
      Start 83: eval_watch_sigTERM
  9/9 Test  #83: eval_watch_sigTERM .......................***Failed   30.68 sec
FAIL: process 15278 still running after 30 s

33% tests passed, 6 tests failed out of 9
LOG
rc=0; "$PYTHON" "$tool" "$work/mixed.log" > "$work/mixed.out" || rc=$?
[ $rc = 1 ] || { cat "$work/mixed.out"; fail "a real failure among the host's: exit $rc, expected 1"; }
grep -q '^other app_exit_codes (Failed): Open MPI' "$work/mixed.out" || fail "PMIx warnings alone excused a failure"
grep -q '^other eval_watch_sigTERM (Failed)$' "$work/mixed.out" || fail "eval_watch_sigTERM not 'other'"
grep -q '^6 failed: 4 for what the host lacks, 2 other: app_exit_codes eval_watch_sigTERM$' "$work/mixed.out" \
  || fail "summary: $(tail -1 "$work/mixed.out")"
# A crash's status holds a colon; a log without ctest's tally (ctest cut off)
# or with more failures than result lines is never the host's alone.
cat > "$work/crash.log" <<'LOG'
      Start 5: gpu_ops_test
  1/1 Test   #5: gpu_ops_test .............................***Exception: SegFault  0.52 sec

0% tests passed, 1 tests failed out of 1
LOG
rc=0; "$PYTHON" "$tool" "$work/crash.log" > "$work/crash.out" || rc=$?
[ $rc = 1 ] || { cat "$work/crash.out"; fail "a segfault: exit $rc, expected 1"; }
grep -q '^other gpu_ops_test (Exception: SegFault)$' "$work/crash.out" || fail "the segfault not read"
head -n 12 "$work/host.log" > "$work/cut.log"
rc=0; "$PYTHON" "$tool" "$work/cut.log" > "$work/cut.out" || rc=$?
[ $rc = 1 ] || { cat "$work/cut.out"; fail "a log cut off before ctest's tally: exit $rc, expected 1"; }
grep -q 'ctest did not finish' "$work/cut.out" || fail "the cut-off log not said"
echo "PASS: host failures sorted from the others"
