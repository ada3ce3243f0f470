#!/usr/bin/env bash
# tensorboard_test.sh FIXTURE WORKDIR
# Writes event files with FIXTURE, then loads them with the tensorboard package
# from PyPI, installing it first if it is missing. Exits 77 (skipped) only when
# pip cannot reach the package index at all.
set -u
fixture=$1; workdir=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}

if ! command -v "$python" >/dev/null; then
  echo "FAIL: $python not found (the tensorboard check needs Python 3 with pip)"; exit 1
fi
if ! "$python" -c "import tensorboard" 2>/dev/null; then
  echo "installing tensorboard from PyPI (python3 -m pip install tensorboard)"
  if ! "$python" -m pip install --quiet tensorboard; then
    # Tell an unreachable index (skip) from a broken install (fail).
    if ! "$python" -m pip download --quiet --no-deps --no-cache-dir -d "$workdir/pip-probe" tensorboard \
         >/dev/null 2>&1; then
      echo "SKIPPED: pip cannot reach PyPI to install tensorboard"; exit 77
    fi
    echo "FAIL: PyPI is reachable but 'pip install tensorboard' failed"; exit 1
  fi
fi

rm -rf "$workdir/logs"
mkdir -p "$workdir"
"$fixture" "$workdir/logs" || { echo "FAIL: the fixture could not write event files"; exit 1; }
"$python" "$here/tensorboard_check.py" "$workdir/logs" || { echo "FAIL: tensorboard check"; exit 1; }
