#!/usr/bin/env python3
"""spmd-plan rand: every rank's block of a random tensor and the generator's offset.

usage: test_rand.py <spmd-plan>

The model here is independent of spmd's headers: Philox4x32-10 written from the paper, the
stream of words (block n = philox(counter (n, 0, 0), key = seed)), and uniform f32 element i =
(word(offset + i) & 0xFFFFFF) * 2^-24. Every rank's data must be its block (torch.chunk's rule)
of that tensor; for every layout (and normal values, f64) the ranks must assemble to the
one-device tensor, bit for bit; bad input exits 2 with a message.
"""
import json
import random
import struct
import subprocess
import sys

TOOL = sys.argv[1]
FAILS = []
M32 = 0xFFFFFFFF


def check(cond, what):
    if not cond:
        FAILS.append(what)


def tool(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True)


def philox(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32
    return c0, c1, c2, c3


def word(seed, j):
    n = j // 4
    return philox((n & M32, n >> 32, 0, 0), (seed & M32, seed >> 32))[j % 4]


def uniform_f32(seed, offset, count):
    return [struct.unpack("f", struct.pack("f", (word(seed, offset + i) & 0xFFFFFF) / 16777216.0))[0]
            for i in range(count)]


def chunk(size, n, r):
    full = -(-size // n)
    start = full * r
    return (0, size) if start >= size else (min(size, start + full) - start, start)


def box(mesh, shape, placements, coord):
    """Local shape and offset: shards applied left to right over the mesh dims."""
    size, off = list(shape), [0] * len(shape)
    for m, p in enumerate(placements):
        if p.startswith("S("):
            d = int(p[2:p.index(")")])
            s, o = chunk(size[d], mesh[m], coord[m])
            size[d], off[d] = s, off[d] + o
    return size, off


def box_indices(shape, size, off):
    """Global row-major indices of a box's elements, in the box's row-major order."""
    out = []

    def walk(d, base):
        if d == len(shape):
            out.append(base)
            return
        stride = 1
        for e in shape[d + 1:]:
            stride *= e
        for i in range(off[d], off[d] + size[d]):
            walk(d + 1, base + i * stride)
    walk(0, 0)
    return out


def block_of(glob, shape, size, off):
    return [glob[k] for k in box_indices(shape, size, off)]


def run_json(*args):
    r = tool("rand", *args, "--json")
    check(r.returncode == 0, f"rand {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout) if r.returncode == 0 else None


def assemble(j, shape):
    n = 1
    for e in shape:
        n *= e
    glob = [None] * n
    mesh = j["mesh"]
    for rank in j["ranks"]:
        size, off = box(mesh, shape, j["placements"], rank["coord"])
        for k, v in zip(box_indices(shape, size, off), rank["data"]):
            if glob[k] is not None and glob[k] != v:
                return None  # replicas disagree
            glob[k] = v
    return glob


def main():
    # The example, exact values from the model.
    j = run_json("--mesh", "2x4", "--shape", "10,5", "--placements", "S(0),R", "--seed", "42")
    if j:
        check(list(j.keys()) == ["mesh", "shape", "placements", "dtype", "dist", "seed", "start_offset",
                                 "ranks", "offset"], f"fields: {list(j.keys())}")
        check(j["offset"] == 52, f"offset after 50 f32 elements: {j['offset']}")
        ref = uniform_f32(42, 0, 50)
        for rank in j["ranks"]:
            check(list(rank.keys()) == ["rank", "coord", "local_shape", "data"], f"rank fields {rank.keys()}")
            size, off = box([2, 4], [10, 5], ["S(0)", "R"], rank["coord"])
            check(rank["local_shape"] == size, f"rank {rank['rank']} shape {rank['local_shape']} != {size}")
            check(rank["data"] == block_of(ref, [10, 5], size, off), f"rank {rank['rank']}: data differs from the model")
    # --offset: the stream from that word on; the offset after adds the call's words.
    j = run_json("--mesh", "3", "--shape", "7", "--placements", "S(0)", "--seed", "5", "--offset", "8")
    if j:
        check(assemble(j, [7]) == uniform_f32(5, 8, 7), "--offset 8: not the stream from word 8")
        check(j["offset"] == 16 and j["start_offset"] == 8, f"--offset 8: offset after {j['offset']}")
    # Every layout assembles to the one-device tensor (replicas agreeing), any dist and dtype.
    rng = random.Random(13)
    meshes = [[2], [3], [4], [8], [2, 2], [2, 3], [1, 4], [2, 2, 2]]
    cases = 0
    for _ in range(48):
        mesh = rng.choice(meshes)
        shape = [rng.choice([0, 1, 3, 5, 7, 8]) for _ in range(rng.choice([1, 2, 3]))]
        pl = [rng.choice(["R"] + [f"S({d})" for d in range(len(shape))]) for _ in mesh]
        dist, dtype = rng.choice(["uniform", "normal"]), rng.choice(["f32", "f64", "bf16", "f16"])
        seed = rng.randrange(1 << 40)
        args = ["--shape", ",".join(map(str, shape)), "--seed", str(seed), "--dist", dist, "--dtype", dtype]
        one = run_json("--mesh", "1", "--placements", "R", *args)
        many = run_json("--mesh", "x".join(map(str, mesh)), "--placements", ",".join(pl), *args)
        if not one or not many:
            continue
        cases += 1
        what = f"mesh {mesh} shape {shape} {pl} {dist} {dtype}"
        check(assemble(many, shape) == one["ranks"][0]["data"], f"{what}: does not assemble to the one-device tensor")
        check(many["offset"] == one["offset"], f"{what}: offsets {many['offset']} vs {one['offset']}")
        if dist == "uniform" and dtype == "f32":
            check(one["ranks"][0]["data"] == uniform_f32(seed, 0, len(one["ranks"][0]["data"])), f"{what}: model")
    check(cases >= 40, f"only {cases} layout cases ran")
    # Text form.
    r = tool("rand", "--mesh", "2", "--shape", "3", "--placements", "S(0)", "--seed", "1")
    check(r.returncode == 0 and "offset after: 4" in r.stdout and "rank 1 [1] shape [1]" in r.stdout,
          f"text form: {r.stdout!r}")
    # Bad input: exit 2, a message naming the value, nothing on stdout.
    for args, msg in [
        (["--offset", "6"], "bad offset 6"),
        (["--dist", "gamma"], "bad dist 'gamma'"),
        (["--dtype", "i32"], "bad dtype 'i32'"),
        (["--placements", "S(2)"], "S(2)"),
        (["--shape", "100000,1000"], "too large"),
        (["--shape", "4000000000000,4000000000000"], "too large"),  # the product overflows int64
        (["--mesh", "131072", "--shape", "0"], "mesh '131072' has 131072 ranks; spmd-plan rand takes at most"),
        (["--seed", "-1"], "bad seed '-1'"),
        (["--seed", "18446744073709551616"], "bad seed"),
    ]:
        base = {"--mesh": "2", "--shape": "4", "--placements": "S(0)", "--seed": "1"}
        full = []
        for k, v in base.items():
            if k not in args:
                full += [k, v]
        r = tool("rand", *full, *args)
        check(r.returncode == 2 and msg in r.stderr and r.stdout == "",
              f"rand {' '.join(full + args)}: exit {r.returncode}, stderr {r.stderr!r}")
    for f in FAILS:
        print("FAIL:", f)
    print(f"{len(FAILS)} failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
