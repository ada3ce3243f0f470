#!/usr/bin/env bash
# Installs what is missing, builds (CUDA included where nvcc exists) and runs
# the whole ctest suite. GPU tests report "skipped" where no device is present.
# Tests labelled `long` (full-data accuracy runs) are left out unless
# RINGTRAIN_TEST_LONG=1.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
"$here/install-deps.sh"
"$here/build.sh" "$@"
source "$here/env.sh"
cd "${BUILD_DIR:-$RINGTRAIN_ROOT/build}"
exclude=(-LE long)
[ "${RINGTRAIN_TEST_LONG:-0}" = 1 ] && exclude=()
ctest --output-on-failure --timeout 900 -j"$(nproc)" "${exclude[@]}"
