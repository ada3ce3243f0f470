#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job on its default:
# 2 ranks on this machine.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
"$here/install-deps.sh"
"$here/build.sh"
source "$here/env.sh"
exe=${BUILD_DIR:-$RINGTRAIN_ROOT/build}/ringtrain
set -x
mpirun -np 2 --oversubscribe "$exe" info
