#!/usr/bin/env bash
# Installs what is missing, builds (CUDA included where nvcc exists) and runs
# the whole ctest suite. GPU tests report "skipped" where no device is present.
# Tests labelled `long` (full-data accuracy runs) and `timing` (checks of
# what the machine does beside a test, e.g. that two ranks on one core run at
# half speed: a loaded machine fails them while the code is right) are left out
# unless RINGTRAIN_TEST_LONG=1 (long and timing) or RINGTRAIN_TEST_TIMING=1.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
"$here/install-deps.sh"
"$here/build.sh" "$@"
source "$here/env.sh"
cd "${BUILD_DIR:-$RINGTRAIN_ROOT/build}"
exclude=(-LE 'long|timing')
[ "${RINGTRAIN_TEST_TIMING:-0}" = 1 ] && exclude=(-LE long)
[ "${RINGTRAIN_TEST_LONG:-0}" = 1 ] && exclude=()
ctest --output-on-failure --timeout 900 -j"$(nproc)" "${exclude[@]}"
