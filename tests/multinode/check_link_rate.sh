#!/usr/bin/env bash
# check_link_rate.sh BACKEND RATE_GBIT < bench allreduce output: passes when the
# backend's rows (2 ranks, one per node: busbw = bytes each rank sent per
# second) show a throughput under the shaped rate and above half of it, i.e.
# the tc shaping limits the link and the link is still used. A sanity bound on
# the shaping, not a benchmark.
set -uo pipefail
backend=$1 rate_gbit=$2
rows=$(grep -E "^ +$backend +[0-9]+ " || true)
[ -n "$rows" ] || { echo "check_link_rate: no '$backend' rows in the bench output"; exit 1; }
printf '%s\n' "$rows" | awk -v r="$rate_gbit" '
  { busbw_gbit = $9 * 8; n++
    if (busbw_gbit >= r || busbw_gbit <= r / 2) { bad++; printf "check_link_rate: %s B at %.3f Gbit/s, outside (%.3g, %.3g)\n", $2, busbw_gbit, r / 2, r }
    else printf "check_link_rate: %s B at %.3f Gbit/s, within (%.3g, %.3g)\n", $2, busbw_gbit, r / 2, r }
  END { exit bad > 0 || n == 0 }'
