#!/usr/bin/env bash
# netns_test.sh: runs one command on a launch/netns-cluster and judges it.
#   netns_test.sh --expect success|failure [--nodes K] [--ranks-per-node R]
#                 [--timeout S] [--regex RE] [--check-arg WORD]...
#                 [--term-when RE [--term-when-count N]] [--cluster-arg WORD]...
#                 -- COMMAND...
# success: the job exits 0, its output (stdout and stderr) matches RE (grep -E)
#          and the check command (the --check-arg words), fed that output on
#          stdin, exits 0.
# failure: the job exits non-zero on its own within S seconds (not killed by the
#          time limit), and its output matches RE.
# --term-when RE sends SIGTERM to the harness, as a scheduler or a user would,
# once N lines (default 1) of the job's output match RE: e.g. when every rank
# is running, or when training has reached a step. (Waiting on the output, not
# the clock, keeps the test right on a loaded machine.) --cluster-arg words go
# to netns-cluster.
# Either way the cluster's namespaces must be gone afterwards. Exit 77 (skipped)
# with the reason where this machine cannot host a cluster (not root, no netns).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$root/launch/netns-cluster
expect=""; nodes=2; rpn=2; timeout_s=120; regex=""; check=(); term_when=""; term_count=1
cluster_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --expect) expect=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --ranks-per-node) rpn=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --regex) regex=$2; shift 2 ;;
    --check-arg) check+=("$2"); shift 2 ;;
    --term-when) term_when=$2; shift 2 ;;
    --term-when-count) term_count=$2; shift 2 ;;
    --cluster-arg) cluster_args+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "netns_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case $expect in success|failure) ;; *) echo "netns_test.sh: --expect success|failure" >&2; exit 2 ;; esac
[ $# -gt 0 ] || { echo "netns_test.sh: no command" >&2; exit 2; }

# With the test's cluster flags, so a shaping the kernel cannot do (no netem)
# is a skip with that reason too.
reason=$("$cluster" "${cluster_args[@]}" --check 2>&1)
case $? in
  0) ;;
  77) echo "SKIPPED: $reason"; exit 77 ;;
  *) echo "FAIL: netns-cluster --check: $reason"; exit 1 ;;
esac

out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s%N)
timeout --kill-after=10 "$timeout_s" "$cluster" --nodes "$nodes" --ranks-per-node "$rpn" \
  --oversubscribe "${cluster_args[@]}" -- "$@" >"$out" 2>&1 &
job=$!
if [ -n "$term_when" ]; then
  while kill -0 "$job" 2>/dev/null && [ "$(grep -Ec -- "$term_when" "$out")" -lt "$term_count" ]; do
    sleep 0.2
  done
  # timeout(1) runs the harness as its child: signal the harness itself.
  harness=$(pgrep -P "$job" | head -n 1)
  if [ -n "$harness" ]; then
    echo "netns_test.sh: $term_count line(s) match /$term_when/: SIGTERM to the harness (pid $harness)" >>"$out"
    kill -TERM "$harness"
  fi
fi
wait "$job"
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
tail -n 60 "$out"
echo "--- exit code $rc after ${elapsed_ms}ms"

fail=0
# The harness must have removed its own namespaces, whatever happened.
id=$(sed -n 's/^netns-cluster: cluster \(rtnc-[0-9]*\):.*/\1/p' "$out" | head -n 1)
if [ -n "$id" ]; then
  left=$(ip netns list | awk '{print $1}' | grep -E "^$id-" | tr '\n' ' ')
  if [ -n "$left" ]; then
    echo "FAIL: namespaces left behind by $id: $left"
    fail=1
  fi
  if ls -d "/etc/netns/$id"-* >/dev/null 2>&1; then
    echo "FAIL: /etc/netns entries left behind by $id"
    fail=1
  fi
fi
"$cluster" --cleanup >/dev/null 2>&1 || true

# By the clock, not the exit code: mpirun itself exits 137 when a rank died of
# SIGKILL, which is what a fault test wants to see.
if [ "$elapsed_ms" -ge $((timeout_s * 1000)) ]; then
  echo "FAIL: the job hung and was killed after ${timeout_s}s"; exit 1
fi
if [ "$expect" = success ] && [ "$rc" -ne 0 ]; then
  echo "FAIL: the job failed (exit code $rc)"; exit 1
fi
if [ "$expect" = failure ] && [ "$rc" -eq 0 ]; then
  echo "FAIL: the job succeeded, a non-zero exit was expected"; exit 1
fi
if [ -n "$regex" ] && ! grep -Eq -- "$regex" "$out"; then
  echo "FAIL: the output does not match /$regex/"; exit 1
fi
if [ ${#check[@]} -gt 0 ] && ! "${check[@]}" <"$out"; then
  echo "FAIL: check '${check[*]}' rejected the output"; exit 1
fi
[ "$fail" -eq 0 ] || exit 1
echo "PASS"
