# shellcheck shell=bash
# Sourced by every test script that runs Python. PYTHON is the one Python the
# tests use, chosen once in launch/env.sh (RINGTRAIN_PYTHON; ctest passes it
# on): Debian's /usr/bin/python3, whose modules launch/install-deps.sh
# installs, never the `python3` first on PATH (a pyenv one lacks PIL and h5py).
#   need_python_modules PIL h5py   fails at once, naming the missing module,
#                                  the Python and the package that provides it
if [ -z "${RINGTRAIN_PYTHON:-}" ]; then
  # shellcheck source=launch/env.sh
  source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/launch/env.sh"
fi
PYTHON=$RINGTRAIN_PYTHON

need_python_modules() {  # MODULE...
  local m package
  for m in "$@"; do
    "$PYTHON" -c "import $m" 2>/dev/null && continue
    case $m in
      PIL) package=python3-pil ;;
      sklearn) package=python3-sklearn ;;
      *) package=python3-$m ;;
    esac
    echo "FAIL: $PYTHON has no module '$m' (launch/install-deps.sh installs $package;" \
      "RINGTRAIN_PYTHON chooses another Python)" >&2
    exit 1
  done
}
