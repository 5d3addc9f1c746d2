#!/usr/bin/env python3
"""Checkpoints and the Python safetensors package, both ways.

usage: test_interop.py <spmd-plan> <io_checkpoint>

1. numpy arrays saved by safetensors.numpy.save_file are read by `spmd-plan load` under many
   layouts (1-d to 3-d meshes, uneven, nested, Partial): every rank's data must be its block of
   the array (torch.chunk's rule), or the identity on a Partial group's other members; --list
   names every tensor with its dtype and shape; bad files exit 2.
2. A checkpoint spmd wrote from sharded tensors (io_checkpoint's hidden [.write-sample] case) is
   read by safetensors.numpy.load_file: every value must be the one the writer computed.
Exits 77 (skipped, saying why) when safetensors or numpy is not installed.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print(f"SKIP: the Python safetensors package and numpy are needed ({e}); .ci/install-deps installs them")
    sys.exit(77)

TOOL, WRITER = sys.argv[1], sys.argv[2]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)


def chunk(size, n, r):
    full = -(-size // n)
    start = full * r
    return (0, size) if start >= size else (min(size, start + full) - start, start)


def block(arr, mesh, placements, coord):
    """The block of arr a rank at coord holds (shards applied left to right), or None for a
    Partial group's non-first member (which holds the identity)."""
    size, off = list(arr.shape), [0] * arr.ndim
    shards = []  # (tensor dim, position in its shard order, mesh dim); "S(d)[k]" or left to right
    for m, p in enumerate(placements):
        if p.startswith("S("):
            d = int(p[2:p.index(")")])
            k = int(p[p.index("[") + 1:p.index("]")]) if "[" in p else m
            shards.append((d, k, m))
        elif p.startswith("P") and coord[m] != 0 and ("sum" in p or "product" in p or p == "P"):
            return None
    for d, _, m in sorted(shards):
        s, o = chunk(size[d], mesh[m], coord[m])
        size[d], off[d] = s, off[d] + o
    return arr[tuple(slice(o, o + s) for o, s in zip(off, size))]


def load(path, *args):
    return subprocess.run([TOOL, "load", path, *args], capture_output=True, text=True)


def main():
    tmp = tempfile.mkdtemp(prefix="spmd_interop_")
    rng = np.random.default_rng(7)
    arrays = {
        "embed": rng.standard_normal((10, 6)).astype(np.float32),
        "cube": rng.standard_normal((3, 5, 4)),
        "ids": np.arange(7 * 3, dtype=np.int64).reshape(7, 3) - 5,
        "half": rng.standard_normal((9,)).astype(np.float16),
        "counts": np.arange(12, dtype=np.int32).reshape(4, 3),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    path = os.path.join(tmp, "numpy.safetensors")
    save_file(arrays, path, metadata={"from": "numpy"})

    r = load(path, "--list", "--json")
    check(r.returncode == 0, f"--list: exit {r.returncode} {r.stderr}")
    if r.returncode == 0:
        listed = {t["name"]: (t["dtype"], t["shape"]) for t in json.loads(r.stdout)["tensors"]}
        want = {"embed": ("F32", [10, 6]), "cube": ("F64", [3, 5, 4]), "ids": ("I64", [7, 3]),
                "half": ("F16", [9]), "counts": ("I32", [4, 3]), "empty": ("F32", [0, 4])}
        check(listed == want, f"--list: {listed}")

    layouts = {
        "embed": [("2x4", "S(0),R"), ("4x2", "S(1),S(0)"), ("3", "S(0)"), ("2x2x2", "S(0),S(1),S(0)"),
                  ("2x4", "S(0)[1],S(0)[0]"), ("2x2", "P,S(1)"), ("1", "R")],
        "cube": [("2x3", "S(2),S(1)"), ("8", "S(1)"), ("2x2", "P(max),S(0)")],
        "ids": [("4", "S(0)"), ("2x3", "R,S(0)")],
        "half": [("4", "S(0)"), ("2x2", "S(0),S(0)")],
        "counts": [("3", "S(1)"), ("2x2", "S(0),P(sum)")],
        "empty": [("2x2", "S(0),S(1)")],
    }
    cases = 0
    for name, ls in layouts.items():
        arr = arrays[name]
        for mesh_text, pl in ls:
            r = load(path, "--tensor", name, "--mesh", mesh_text, "--placements", pl, "--json")
            what = f"load {name} --mesh {mesh_text} --placements {pl}"
            check(r.returncode == 0, f"{what}: exit {r.returncode} {r.stderr}")
            if r.returncode != 0:
                continue
            j = json.loads(r.stdout)
            mesh = [int(x) for x in mesh_text.split("x")]
            for rank in j["ranks"]:
                b = block(arr, mesh, j["placements"], rank["coord"])
                data = np.array(rank["data"], dtype=np.float64)
                if b is None:  # the identity of the partial op
                    ident = 0.0
                    check(np.all(data == ident), f"{what}: rank {rank['rank']} should hold the identity")
                    continue
                check(list(b.shape) == rank["local_shape"], f"{what}: rank {rank['rank']} shape {rank['local_shape']} != {list(b.shape)}")
                check(np.array_equal(data, b.astype(np.float64).ravel()), f"{what}: rank {rank['rank']} data differs")
                cases += 1
    check(cases >= 80, f"only {cases} rank blocks checked")

    # Bad files exit 2 with a message.
    bad = os.path.join(tmp, "bad.safetensors")
    raw = open(path, "rb").read()
    for content, msg in [(raw[:len(raw) - 7], "truncated file"), (raw[:4], "8-byte header length"),
                         (raw[:8] + b"{nope" + raw[13:], "corrupt header")]:
        open(bad, "wb").write(content)
        r = load(bad, "--tensor", "embed", "--mesh", "2", "--placements", "S(0)")
        check(r.returncode == 2 and msg in r.stderr and r.stdout == "", f"bad file ({msg}): exit {r.returncode} {r.stderr!r}")
    r = load(path, "--tensor", "nope", "--mesh", "2", "--placements", "S(0)")
    check(r.returncode == 2 and "no tensor 'nope'" in r.stderr, f"missing tensor: {r.returncode} {r.stderr!r}")
    r = load(path, "--tensor", "embed", "--mesh", "2", "--placements", "S(2)")
    check(r.returncode == 2 and "S(2)" in r.stderr, f"bad placements: {r.returncode} {r.stderr!r}")
    r = load(path, "--tensor", "embed", "--mesh", "131072", "--placements", "R")
    check(r.returncode == 2 and "has 131072 ranks; spmd-plan load takes at most" in r.stderr and r.stdout == "",
          f"too many ranks: {r.returncode} {r.stderr!r}")

    # spmd's file, read by the package.
    sample = os.path.join(tmp, "spmd.safetensors")
    r = subprocess.run([WRITER, "[.write-sample]"], capture_output=True, text=True,
                       env={**os.environ, "SPMD_IO_SAMPLE": sample})
    check(r.returncode == 0, f"io_checkpoint [.write-sample]: exit {r.returncode} {r.stdout[-2000:]}")
    if r.returncode == 0:
        d = load_file(sample)
        w = (0.5 * np.arange(30, dtype=np.float32) - 3).reshape(6, 5)
        v = (-1.0 / (1.0 + np.arange(35, dtype=np.float64))).reshape(5, 7)
        t = ((1 << 40) + np.arange(42, dtype=np.int64)).reshape(3, 2, 7)
        h = (0.25 * np.arange(4)).astype(np.float16)
        check(set(d) == {"w", "v", "t", "h"}, f"spmd's tensors: {sorted(d)}")
        check(d["w"].dtype == np.float32 and np.array_equal(d["w"], w), "spmd's w (S(0),S(0)) differs")
        check(d["v"].dtype == np.float64 and np.array_equal(d["v"], v), "spmd's v (P(sum),S(1), reduced) differs")
        check(d["t"].dtype == np.int64 and np.array_equal(d["t"], t), "spmd's t (S(2),S(0), uneven) differs")
        check(d["h"].dtype == np.float16 and np.array_equal(d["h"], h), "spmd's h (replicated f16) differs")
        with safe_open(sample, "np") as f:
            check(f.metadata() == {"writer": "spmd"}, f"metadata {f.metadata()}")

    for f in FAILS:
        print("FAIL:", f)
    print(f"{cases} rank blocks checked; {len(FAILS)} failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
