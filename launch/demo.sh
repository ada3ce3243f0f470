#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job on its default:
# the `cnn` preset on Fashion-MNIST (Debian's dataset-fashion-mnist, converted
# to HDF5; a synthetic set of the same shape where the package is absent),
# 2 ranks on this machine. Logs, TensorBoard events, the trace and checkpoints
# go under runs/.
#   launch/demo.sh                 # defaults
#   EPOCHS=3 RANKS=2 launch/demo.sh
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
"$here/install-deps.sh"
"$here/build.sh"
source "$here/env.sh"
exe=${BUILD_DIR:-$RINGTRAIN_ROOT/build}/ringtrain
runs=${RUNS_DIR:-$RINGTRAIN_ROOT/runs}
ranks=${RANKS:-2}
epochs=${EPOCHS:-2}
mkdir -p "$runs"

data=$runs/fashion-mnist.h5
if [ ! -s "$data" ]; then
  if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    "$exe" convert idx --force -o "$data"
  else
    echo "demo: Fashion-MNIST package absent: using a synthetic 1x28x28, 10-class set" >&2
    data=$runs/synthetic.h5
    [ -s "$data" ] || "$exe" convert synthetic --n 20000 --shape 1,28,28 --classes 10 --seed 1 -o "$data"
  fi
fi

run=$runs/cnn-$(date +%Y%m%d-%H%M%S)
# --allow-gpu-sharing: on a workstation with fewer GPUs than ranks, the ranks
# share a GPU (shm staged through pinned memory); with a GPU per rank, NCCL.
set -x
mpirun -np "$ranks" --oversubscribe --bind-to none "$exe" train --data "$data" --model cnn --allow-gpu-sharing \
  --batch 64 --epochs "$epochs" --lr 0.05 --momentum 0.9 --logdir "$run" --trace "$run/trace.json" \
  --ckpt-dir "$run/ckpt" --ckpt-every 500 --keep 2
