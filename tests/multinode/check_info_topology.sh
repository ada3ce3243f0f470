#!/usr/bin/env bash
# check_info_topology.sh NODES RANKS_PER_NODE < output of 'ringtrain info'
# Checks the rank table of a NODES x RANKS_PER_NODE job mapped by slot: rank r
# sits on node r / R with local rank r % R of R, all ranks of a node share one
# host name, and different nodes have different host names.
set -euo pipefail
nodes=$1; rpn=$2
awk -v nodes="$nodes" -v rpn="$rpn" '
  function fail(msg) { print "check_info_topology: " msg; bad = 1 }
  /^topology: / { topo = $0 }
  # rank  host  node  local_rank  device
  $1 ~ /^[0-9]+$/ && NF >= 5 && $4 ~ /^[0-9]+\/[0-9]+$/ {
    r = $1; host[r] = $2; node[r] = $3; split($4, lr, "/"); local[r] = lr[1]; lsize[r] = lr[2]; rows++
  }
  END {
    world = nodes * rpn
    want = "topology: " world " rank(s) on " nodes " node(s)"
    if (topo != want) fail("expected \"" want "\", got \"" topo "\"")
    if (rows != world) fail("expected " world " table rows, got " rows)
    for (r = 0; r < world; r++) {
      if (!(r in node)) { fail("rank " r " missing from the table"); continue }
      n = int(r / rpn)
      if (node[r] != n) fail("rank " r " on node " node[r] ", expected node " n)
      if (local[r] != r % rpn || lsize[r] != rpn)
        fail("rank " r " has local rank " local[r] "/" lsize[r] ", expected " (r % rpn) "/" rpn)
      if (n in node_host && node_host[n] != host[r])
        fail("node " n " has two host names: " node_host[n] " and " host[r])
      node_host[n] = host[r]
    }
    for (a = 0; a < nodes; a++) for (b = a + 1; b < nodes; b++)
      if (node_host[a] == node_host[b]) fail("nodes " a " and " b " share host name " node_host[a])
    if (bad) exit 1
    print "check_info_topology: " world " ranks on " nodes " nodes, local ranks 0.." (rpn - 1) " on each"
  }'
