#!/usr/bin/env bash
# Configures and builds ringtrain into ${BUILD_DIR:-build}. CUDA is compiled in
# when nvcc is found (CMake says which). Extra arguments go to cmake.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
build_dir=${BUILD_DIR:-$RINGTRAIN_ROOT/build}
cmake -S "$RINGTRAIN_ROOT" -B "$build_dir" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} \
  -DRINGTRAIN_WERROR=ON "$@"
cmake --build "$build_dir" -j"$(nproc)"
