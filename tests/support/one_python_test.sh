#!/usr/bin/env bash
# one_python_test.sh SOURCE_DIR: the tests run one Python, whatever `python3`
# is first on PATH (a pyenv one without PIL or h5py made app_outputs_keep_files
# fail on a fresh machine):
#   1. no test script, CMake test or launch script calls `python3` or
#      /usr/bin/python3 itself: they run $PYTHON (tests/support/python.sh) or
#      ${RINGTRAIN_PYTHON} (CMake, launch/env.sh), chosen in launch/env.sh;
#   2. with a decoy `python3` first on PATH, a test helper that runs Python
#      (expect_output.sh) still passes, and launch/env.sh picks Debian's;
#   3. a missing module fails at once, naming the module and its package.
set -uo pipefail
root=${1:?usage: one_python_test.sh SOURCE_DIR}
cd "$root" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

# 1. Every place that starts Python, outside comments (env.sh chooses it; this
# test names it in its messages; the wrapper's usage text is a user's program).
mapfile -t files < <(git ls-files 'tests/*.sh' 'tests/*CMakeLists.txt' 'tests/*.cmake' 'launch/*.sh' \
                       'launch/bench/*.sh' 'CMakeLists.txt' 2>/dev/null || true)
[ ${#files[@]} -gt 0 ] || mapfile -t files < <(find tests launch CMakeLists.txt \( -name '*.sh' -o -name CMakeLists.txt -o -name '*.cmake' \) -type f)
bad=$(for f in "${files[@]}"; do
  case $f in launch/env.sh|launch/install-deps.sh|tests/support/one_python_test.sh) continue ;; esac
  grep -nE '(^|[^-[:alnum:]_./$"{])(/usr/bin/)?python3([[:space:];)]|$)' "$f" | grep -vE '^[0-9]+:[[:space:]]*#' \
    | sed "s|^|$f:|"
done)
[ -z "$bad" ] || fail "these lines start python3 themselves, not \$PYTHON / \${RINGTRAIN_PYTHON}:
$bad"
echo "ok: ${#files[@]} scripts start Python only through \$PYTHON or \${RINGTRAIN_PYTHON}"

# 2. A decoy python3 first on PATH, as pyenv's shim is.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
printf '#!/bin/sh\necho "decoy python3: No module named PIL" >&2\nexit 1\n' > "$work/bin/python3"
chmod +x "$work/bin/python3"
chosen=$(env -u RINGTRAIN_PYTHON PATH="$work/bin:$PATH" bash -c 'source launch/env.sh && echo "$RINGTRAIN_PYTHON"')
[ "$chosen" != "$work/bin/python3" ] || fail "launch/env.sh chose the python3 first on PATH ($chosen)"
echo "ok: with a decoy python3 first on PATH, launch/env.sh chooses $chosen"
env -u RINGTRAIN_PYTHON PATH="$work/bin:$PATH" tests/support/expect_output.sh 'hello' echo hello >"$work/out" 2>&1 \
  || { cat "$work/out"; fail "expect_output.sh ran the decoy python3"; }
echo "ok: expect_output.sh runs $chosen, not the decoy"

# 3. A module the tests' Python lacks.
out=$(bash -c 'source tests/support/python.sh && need_python_modules json no_such_module_60' 2>&1) \
  && fail "need_python_modules passed for a missing module"
grep -q "has no module 'no_such_module_60' (launch/install-deps.sh installs python3-no_such_module_60" <<<"$out" \
  || fail "the message does not name the module and its package: $out"
echo "ok: a missing module fails naming it: $out"
echo "PASS"
