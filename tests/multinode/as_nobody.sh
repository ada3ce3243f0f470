#!/usr/bin/env bash
# as_nobody.sh PROGRAM ARGS...: runs PROGRAM as user nobody when run as root
# (setpriv), else as the current user, so it never has root.
set -euo pipefail
if [ "$(id -u)" -eq 0 ]; then
  exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
fi
exec "$@"
