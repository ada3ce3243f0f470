#!/usr/bin/env bash
# tensorboard_test.sh FIXTURE WORKDIR
# Writes event files with FIXTURE, then loads them with the tensorboard package
# from PyPI in the tests' Python, installing it first if it is missing. Exits 77
# (skipped, naming the module) only when that Python has no pip or pip cannot
# reach the package index at all.
set -u
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
fixture=$1; workdir=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=$PYTHON

if ! "$python" -c "import tensorboard" 2>/dev/null; then
  # Debian has no tensorboard package: pip puts it in the user's site of the
  # tests' Python (Debian's pip refuses that without --break-system-packages,
  # which touches only ~/.local).
  echo "$python has no module 'tensorboard': installing it from PyPI ($python -m pip install --user tensorboard)"
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "SKIPPED: $python has no module 'tensorboard', and no pip to install it (python3-pip)"; exit 77
  fi
  if ! "$python" -m pip install --quiet --user --break-system-packages tensorboard; then
    # Tell an unreachable index (skip) from a broken install (fail).
    if ! "$python" -m pip download --quiet --no-deps --no-cache-dir -d "$workdir/pip-probe" tensorboard \
         >/dev/null 2>&1; then
      echo "SKIPPED: $python has no module 'tensorboard', and pip cannot reach PyPI to install it"; exit 77
    fi
    echo "FAIL: PyPI is reachable but '$python -m pip install tensorboard' failed"; exit 1
  fi
fi

rm -rf "$workdir/logs"
mkdir -p "$workdir"
"$fixture" "$workdir/logs" || { echo "FAIL: the fixture could not write event files"; exit 1; }
"$python" "$here/tensorboard_check.py" "$workdir/logs" || { echo "FAIL: tensorboard check"; exit 1; }
