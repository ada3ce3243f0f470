#!/usr/bin/env bash
# Training throughput, ringtrain beside PyTorch DDP (gloo), in one run:
# mlp:784-512-512-10, batch 64 per rank, SGD with momentum, one thread per
# rank, 1 and 2 ranks. Prints samples/s, 2-rank scaling efficiency, the
# ringtrain/peer ratio, and the share of ringtrain's all-reduce time that
# backward did not hide.
#   launch/bench/train_scaling.sh [STEPS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../env.sh"
exe=${BUILD_DIR:-$RINGTRAIN_ROOT/build}/ringtrain
steps=${1:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=mlp:784-512-512-10

data=$work/synthetic.h5
"$exe" convert synthetic --force --n 40000 --shape 1,28,28 --classes 10 --seed 3 -o "$data" >/dev/null 2>&1

rt_run() {  # ranks -> "samples_per_s exposed_share"
  local np=$1 log=$work/rt-$1.log
  mpirun -np "$np" --bind-to core "$exe" train --data "$data" --model "$model" --batch 64 \
    --max-steps "$steps" --epochs 100 --lr 0.05 --momentum 0.9 --log-every 50 \
    --logdir "$work/logs-$np" --check-every 0 --eval-every 0 > "$log" 2>&1 || { cat "$log"; exit 1; }
  "$RINGTRAIN_PYTHON" - "$work/logs-$np/metrics.jsonl" "$log" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"kind": "train"' in l or '"kind":"train"' in l]
rows = rows[1:] or rows  # the first window includes start-up
sps = sum(r["samples_per_s"] for r in rows) / len(rows)
exposed = sum(r["exposed_comm_s"] for r in rows) / max(1e-12, sum(r["comm_s"] for r in rows))
print(f"{sps:.0f} {exposed:.3f}")
PY
}

read -r rt1 _ < <(rt_run 1)
read -r rt2 exposed2 < <(rt_run 2)
peer=$("$RINGTRAIN_PYTHON" "$here/peer_ddp.py" --steps "$steps" --worlds 1,2)
peer_rate() {  # line number (0 or 1) -> samples/s of that peer run
  echo "$peer" | "$RINGTRAIN_PYTHON" -c 'import json,sys; r=[json.loads(l) for l in sys.stdin]; print(round(r[int(sys.argv[1])]["samples_per_s"]))' "$1"
}
pt1=$(peer_rate 0)
pt2=$(peer_rate 1)
"$RINGTRAIN_PYTHON" - "$rt1" "$rt2" "$pt1" "$pt2" "$exposed2" <<'PY'
import sys
rt1, rt2, pt1, pt2, ex = map(float, sys.argv[1:])
print(f"{'':24}{'1 rank':>12}{'2 ranks':>12}{'2-rank eff.':>14}")
print(f"{'ringtrain samples/s':24}{rt1:12.0f}{rt2:12.0f}{rt2 / (2 * rt1):14.1%}")
print(f"{'torch DDP gloo':24}{pt1:12.0f}{pt2:12.0f}{pt2 / (2 * pt1):14.1%}")
print(f"ringtrain / torch DDP: 1 rank {rt1 / pt1:.2f}x, 2 ranks {rt2 / pt2:.2f}x")
print(f"ringtrain 2 ranks: exposed communication {ex:.1%} of the all-reduce time")
PY
