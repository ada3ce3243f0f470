#!/usr/bin/env bash
# Installs what is missing, builds (CUDA included where nvcc exists) and runs
# the whole ctest suite. GPU tests report "skipped" where no device is present.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
"$here/install-deps.sh"
"$here/build.sh" "$@"
source "$here/env.sh"
cd "${BUILD_DIR:-$RINGTRAIN_ROOT/build}"
ctest --output-on-failure --timeout 600 -j"$(nproc)"
