#!/usr/bin/python3
"""The peer for `ringtrain train` throughput: PyTorch DistributedDataParallel
with gloo, on the same workload (an MLP on 28x28 inputs, SGD with momentum,
batch per rank, one thread per rank). Prints one JSON object per world size:
{"peer": "torch-ddp-gloo", "world": W, "samples_per_s": ..., ...}.

Run with Debian's python3-torch:  /usr/bin/python3 launch/bench/peer_ddp.py
"""
import argparse
import json
import os
import socket
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_mlp(torch, widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def worker(rank, world, port, args, queue):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    widths = [int(w) for w in args.model.split("-")]
    model = build_mlp(torch, widths)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    # Rank-dependent data of the real shape; throughput does not depend on values.
    g = torch.Generator().manual_seed(args.seed + rank)
    n_batches = 16
    xs = [torch.rand(args.batch, widths[0], generator=g) for _ in range(n_batches)]
    ys = [torch.randint(0, widths[-1], (args.batch,), generator=g) for _ in range(n_batches)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(xs[i % n_batches]), ys[i % n_batches])
        loss.backward()
        opt.step()
        return loss

    for i in range(args.warmup):
        step(i)
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(i)
    dist.barrier()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        queue.put({"peer": "torch-ddp-gloo", "torch": torch.__version__, "world": world,
                   "model": "mlp:" + args.model, "batch_per_rank": args.batch, "steps": args.steps,
                   "seconds": elapsed,
                   "samples_per_s": args.steps * args.batch * world / elapsed})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="784-512-512-10", help="MLP widths, as in ringtrain's mlp: preset")
    p.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    p.add_argument("--steps", type=int, default=300, help="timed steps")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    p.add_argument("--worlds", default="1,2", help="world sizes to run, comma separated")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket cap (its default is 25)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        sys.exit("peer_ddp.py: PyTorch is missing: run launch/install-deps.sh --peer "
                 "(Debian's python3-torch) and use /usr/bin/python3")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")
    for world in [int(w) for w in args.worlds.split(",")]:
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=worker, args=(r, world, port, args, queue)) for r in range(world)]
        for pr in procs:
            pr.start()
        result = queue.get(timeout=600)
        for pr in procs:
            pr.join(timeout=60)
            if pr.exitcode != 0:
                sys.exit(f"peer_ddp.py: a rank exited with {pr.exitcode}")
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
