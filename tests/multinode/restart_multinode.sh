#!/usr/bin/env bash
# shellcheck disable=SC2034  # MPIRUN is read by train() in tests/trainer/lib.sh
# A job that survives a lost node (launch/ringtrain-mpirun --max-restarts) on a
# 3 node x 1 rank namespace cluster. Mid-run, every process of node2 is killed
# and its link taken down: mpirun ends the job, the wrapper finds node2 does not
# answer, drops it and relaunches on node0 and node1 with --resume latest.
#   restart_multinode.sh [kill|silent]
# kill (the default): the processes killed first, so that their connections
# close and mpirun sees the node go (the wrapper's --abort-grace 10 ends a
# mpirun that misses it, as one did in CI: the log says which ended the job).
# silent: the link taken down and node2's processes frozen (SIGSTOP: nothing
# exits, no connection closes, no child of mpirun's dies), as a node that loses
# power: mpirun waits on TCP for its daemon there (minutes) until the wrapper's
# --abort-grace ends it 10 s after the ranks' verdict. The cluster's teardown
# kills the frozen processes. With
# --global-batch the 2-rank steps are the 3-rank steps, so the checkpoint it
# resumed from and the final parameters match an uninterrupted 3-node run (float
# tolerance), and so does the test accuracy (within 0.5 points).
# Exit 77 where this machine cannot host a cluster.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$root/launch/netns-cluster
reason=$("$cluster" --check 2>&1) || { rc=$?; [ $rc -eq 77 ] && { echo "SKIPPED: $reason"; exit 77; }; echo "FAIL: $reason"; exit 1; }
# shellcheck source=tests/trainer/lib.sh
source "$root/tests/trainer/lib.sh"
mode=${1:-kill}
case $mode in kill|silent) ;; *) echo "usage: restart_multinode.sh [kill|silent]"; exit 2 ;; esac
steps=${STEPS:-400}
common=(--model "$CNN" --global-batch 24 --max-steps "$steps" --epochs 1000 --lr 0.05 --momentum 0.9 --seed 11
        --ckpt-every 20 --eval-every 0 --backend ring)

# The uninterrupted 3-node run.
MPIRUN=("$cluster" --nodes 3 --ranks-per-node 1)
train 3 "$WORK/ref" "${common[@]}"

# The same run, losing node2 once a few checkpoints exist.
out=$WORK/lost
mkdir -p "$out"
"$cluster" --nodes 3 --ranks-per-node 1 --max-restarts 2 --min-nodes 2 --abort-grace 10 --timeout 300 -- \
  "$RINGTRAIN_EXE" train --data "$DATA" --ckpt-dir "$out/ckpt" --keep 100 --logdir "$out" --timeout 20 \
  --device cpu --log-every 20 "${common[@]}" >"$out/log.txt" 2>&1 &
job=$!
for _ in $(seq 1 1200); do [ -e "$out/ckpt/ckpt-60.h5" ] && break; kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
[ -e "$out/ckpt/ckpt-60.h5" ] || { cat "$out/log.txt"; fail "no checkpoint of step 60 before the node loss"; }
id=$(sed -n 's/^netns-cluster: cluster \(rtnc-[0-9]*\):.*/\1/p' "$out/log.txt" | head -n 1)
[ -n "$id" ] || fail "no cluster id in the log"
# node2 marked down first, so that the wrapper's probe never finds it
# answering (a probe between the kill and the link going down relaunched on
# node2, and that job hung when the link went: 1 run in 8 under load); then its
# processes (their connections close, so mpirun sees the node go), then the
# link.
state=$(ls -d "${TMPDIR:-/tmp}/$id".* 2>/dev/null | head -n 1)
[ -d "$state" ] || fail "no state dir of cluster $id"
mkdir -p "$state/down" && touch "$state/down/node2"
pids=$(ip netns pids "$id-n2")
[ -n "$pids" ] || fail "no process on node2"
if [ "$mode" = silent ]; then
  ip -n "$id-n2" link set rt0 down
  # shellcheck disable=SC2086  # one pid per word
  kill -STOP $pids
  echo "silent: took node2's link down and froze its processes ($(echo "$pids" | wc -w))"
else
  # shellcheck disable=SC2086  # one pid per word
  kill -9 $pids
  for _ in $(seq 1 50); do [ -z "$(ip netns pids "$id-n2")" ] && break; sleep 0.1; done
  ip -n "$id-n2" link set rt0 down
  echo "kill: killed every process of node2 ($(echo "$pids" | wc -w)) and took its link down"
fi
rc=0
timeout 300 tail --pid="$job" -f /dev/null || { cat "$out/log.txt"; ps -ef | grep -E "[r]ingtrain|[p]rte|[m]pirun" | head -20; fail "the job did not end within 300 s"; }
wait "$job" || rc=$?
cat "$out/log.txt"
[ "$rc" -eq 0 ] || fail "the job failed (exit code $rc)"
grep -q "dropping host node2 (1 slot(s)): .*no route to host" "$out/log.txt" || fail "node2 was not dropped"
# Silent, mpirun would have waited on node2's daemon: the wrapper ended it.
if [ "$mode" = silent ]; then
  grep -q "mpirun ended by --abort-grace" "$out/log.txt" || fail "the wrapper did not end mpirun after the ranks' verdict"
elif grep -q "mpirun ended by --abort-grace" "$out/log.txt"; then
  echo "note: mpirun missed node2's closed connections; the wrapper ended it (--abort-grace)"
fi
line=$(grep -m1 -E "restart 1/2 on 2 host\(s\), 2 rank\(s\): resuming at step [0-9]+ .*time lost [0-9.]+ s" "$out/log.txt") ||
  fail "no restart line with the step and the time lost"
step=$(echo "$line" | sed -n 's/.*resuming at step \([0-9]*\) .*/\1/p')
# Right after the restart, both ranks hold exactly the checkpoint's parameters.
hash=$("$COMPARE" --hash "$out/ckpt/ckpt-$step.h5") || fail "cannot hash ckpt-$step"
grep -q "resumed from .*ckpt-$step.h5 at step $step .*parameters hash $hash on every rank" "$out/log.txt" ||
  fail "the relaunch did not resume at step $step with the checkpoint's parameters (hash $hash)"
grep -q "ringtrain train: 2 rank(s) on 2 node(s)" "$out/log.txt" || fail "the relaunch did not run on 2 nodes"
grep -q "split over 2 rank(s): 12 per rank" "$out/log.txt" || fail "the relaunch did not keep the global batch"
# The state it resumed from is the uninterrupted run's at that step, and so is the end.
"$COMPARE" "$WORK/ref/ckpt/ckpt-$step.h5" "$out/ckpt/ckpt-$step.h5" --rtol 1e-4 --atol 1e-6 || fail "checkpoint $step differs from the uninterrupted run"
same "$WORK/ref" "$out" --rtol 1e-3 --atol 1e-5
ref_acc=$(final_accuracy "$WORK/ref")
acc=$(final_accuracy "$out")
"$PYTHON" -c "import sys; sys.exit(abs($acc - $ref_acc) > 0.005)" || fail "accuracy $acc vs $ref_acc of the uninterrupted run"
! ip netns list | grep -q "^$id-" || fail "namespaces of $id left behind"
echo "PASS ($mode): lost node2 at step >= 60, resumed at step $step on 2 nodes, finished: accuracy $acc vs $ref_acc uninterrupted"
