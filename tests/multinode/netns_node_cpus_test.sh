#!/usr/bin/env bash
# netns_node_cpus_test.sh: launch/netns-cluster --node-cpus. With a CPU for
# every slot each node's ranks run on CPUs of their own (node k: the k-th
# block), as on real nodes; with too few CPUs, or --node-cpus shared, all
# nodes share all of them; a bad mode is an error. Exit 77 where this machine
# cannot host a cluster.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$root/launch/netns-cluster
fail() { echo "FAIL: $*" >&2; exit 1; }

reason=$("$cluster" --check 2>&1)
case $? in
  0) ;;
  77) echo "SKIPPED: $reason"; exit 77 ;;
  *) fail "netns-cluster --check: $reason" ;;
esac
all=$(grep Cpus_allowed_list /proc/self/status | awk '{ print $2 }')
ncpu=$(nproc)

# run OUT ARGS...: each rank prints "cpus <host> <its CPU list>".
run() {
  local out=$1
  shift
  timeout --kill-after=10 60 "$cluster" "$@" -- /bin/sh -c \
    'echo "cpus $(hostname) $(grep Cpus_allowed_list /proc/self/status | cut -f2)"' >"$out" 2>&1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$ncpu" -ge 2 ]; then
  run "$tmp/own" --nodes 2 --ranks-per-node 1 || { cat "$tmp/own"; fail "the 2x1 cluster failed"; }
  cat "$tmp/own"
  c0=$(awk '$1 == "cpus" && $2 == "node0" { print $3 }' "$tmp/own")
  c1=$(awk '$1 == "cpus" && $2 == "node1" { print $3 }' "$tmp/own")
  [[ $c0 =~ ^[0-9]+$ ]] && [[ $c1 =~ ^[0-9]+$ ]] && [ "$c0" != "$c1" ] ||
    fail "the ranks of node0 and node1 should each run on one CPU of their own, got '$c0' and '$c1'"
  grep -q "^netns-cluster: CPUs per node: node0=$c0, node1=$c1$" "$tmp/own" || fail "the announced CPUs are not where the ranks ran"
fi
# More slots than CPUs: shared, and said so.
run "$tmp/shared" --nodes 2 --ranks-per-node "$ncpu" || { cat "$tmp/shared"; fail "the oversubscribed cluster failed"; }
grep -q "^netns-cluster: all nodes share CPUs .*: $((2 * ncpu)) slot(s) on $ncpu CPU(s)$" "$tmp/shared" || { cat "$tmp/shared"; fail "no 'all nodes share' line"; }
[ "$(awk '$1 == "cpus" && $3 == "'"$all"'"' "$tmp/shared" | wc -l)" -eq $((2 * ncpu)) ] || { cat "$tmp/shared"; fail "a rank of a shared cluster does not see all CPUs ($all)"; }
# --node-cpus shared keeps them shared even with CPUs enough.
run "$tmp/asked" --nodes 1 --ranks-per-node 1 --node-cpus shared || { cat "$tmp/asked"; fail "--node-cpus shared failed"; }
grep -q "^cpus node0 $all$" "$tmp/asked" || { cat "$tmp/asked"; fail "--node-cpus shared pinned the rank"; }
! grep -q "CPUs per node" "$tmp/asked" || fail "--node-cpus shared announced CPUs per node"
"$cluster" --node-cpus some -- true >"$tmp/bad" 2>&1
[ $? -eq 2 ] && grep -q "node-cpus must be auto or shared, got 'some'" "$tmp/bad" || { cat "$tmp/bad"; fail "a bad --node-cpus was not refused with exit code 2"; }
echo "PASS: nodes get CPUs of their own when there are enough, share them otherwise or when asked"
