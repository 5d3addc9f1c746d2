#!/usr/bin/env python3
"""PyTorch's LocalTensor on a GPU for bench/redistribute_cuda's cases: every rank's shard in one
process (LocalTensorMode over a fake process group of 8 ranks), tensors on cuda.

    python3 bench/localtensor_cuda.py [--quick] > torch.txt
    build/bench/redistribute_cuda --torch torch.txt

Prints one line per case, "<mesh> <case> <size bytes> <us per redistribute>", the median of 5
rounds (CUDA synchronised around each round). Needs PyTorch with CUDA (the device machine).
"""
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed._local_tensor import LocalTensorMode
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.testing._internal.distributed.fake_pg import FakeStore

COLS = 64
WORLD = 8


def median_us(f):
    f()
    f()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        iters = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(iters):
                f()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            if dt < 0.02 and iters < 4096:
                iters *= 2
                continue
            rounds.append(1e6 * dt / iters)
            break
    rounds.sort()
    return rounds[len(rounds) // 2]


def main():
    quick = "--quick" in sys.argv
    dist.init_process_group("fake", rank=0, world_size=WORLD, store=FakeStore())
    cases = [("S(0)->R", Shard(0), Replicate()), ("S(0)->S(1)", Shard(0), Shard(1)),
             ("P->R", Partial(), Replicate()), ("P->S(0)", Partial(), Shard(0))]
    max_bytes = (64 << 20) if quick else (1 << 30)
    with LocalTensorMode(WORLD):
        meshes = {"8": init_device_mesh("cuda", (WORLD,)), "2x4": init_device_mesh("cuda", (2, 4))}
        size = 4096
        while size <= max_bytes:
            rows = size // 4 // COLS
            g = torch.arange(rows * COLS, dtype=torch.float32, device="cuda").reshape(rows, COLS)
            for mesh_name, mesh in meshes.items():
                for name, src, dst in cases:
                    srcs = [src] * mesh.ndim
                    dsts = [dst] * mesh.ndim
                    try:
                        if isinstance(src, Partial):
                            # distribute_tensor refuses Partial ("for internal use only"): every
                            # rank holds g as its addend, as spmd's benchmark builds it.
                            x = DTensor.from_local(g.clone(), mesh, srcs, run_check=False)
                        else:
                            x = distribute_tensor(g, mesh, [Replicate()] * mesh.ndim).redistribute(mesh, srcs)
                        us = median_us(lambda: x.redistribute(mesh, dsts))
                    except Exception as e:  # one case's failure must not stop the others
                        print(f"# {mesh_name} {name} {size}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                        continue
                    print(f"{mesh_name} {name} {size} {us:.2f}", flush=True)
            size *= 4


if __name__ == "__main__":
    main()
