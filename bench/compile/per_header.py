#!/usr/bin/env python3
"""Compile time of each public header alone: what including it costs a translation unit.

usage: per_header.py [--runs N] [compiler]    (default g++, 3 runs; run from the repository)

For each header users include (README, docs/), a translation unit that includes only it is
compiled with -std=c++20 -O2 -c; the table gives the fastest of N runs (this machine's load
moves single compiles by 20 % or more; the fastest is the least disturbed). The first rows
are the floors: an empty unit, and one that includes only the standard headers the
simulation's headers include. MPI, CUDA and NCCL headers get their include paths
(mpicxx --showme:compile, /usr/local/cuda/include) and are skipped when those are missing.
"""
import os
import re
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "include"

HEADERS = [
    "spmd/spmd.hpp",
    "spmd/plan.hpp",
    "spmd/backends/sim/sim.hpp",
    "spmd/runtime/autograd.hpp",
    "spmd/runtime/optim.hpp",
    "spmd/runtime/module.hpp",
    "spmd/runtime/observe.hpp",
    "spmd/io/safetensors.hpp",
    "spmd/io/checkpoint.hpp",
    "spmd/io/training_state.hpp",
    "spmd/io/visualize.hpp",
    "spmd/io/data_loader.hpp",
    "spmd/nn/modules.hpp",
    "spmd/nn/parallelize.hpp",
    "spmd/nn/gpt.hpp",
    "spmd/autoshard/search.hpp",
    "spmd/backends/mpi/mpi.hpp",
    "spmd/backends/cuda/cuda.hpp",
    "spmd/backends/nccl/nccl.hpp",
]

def standard_headers(compiler, tmp):
    """The standard headers a unit that includes spmd/backends/sim/sim.hpp reads (its -H
    trace: every <name> of the C++ library, directly or through another), for the floor."""
    src = tmp / "sim.cpp"
    src.write_text('#include "spmd/backends/sim/sim.hpp"\n')
    proc = subprocess.run([compiler, "-std=c++20", "-O2", "-I", str(INCLUDE), "-H", "-fsyntax-only", str(src)],
                          capture_output=True, text=True)
    names = re.findall(r"^\.+ \S*/c\+\+/[^/]+/([a-z_]+)$", proc.stderr, re.M)
    return sorted(set(names))


def extra_flags(header):
    if "/mpi/" in header:
        try:
            return subprocess.run(["mpicxx", "--showme:compile"], capture_output=True, text=True,
                                  check=True).stdout.split()
        except (OSError, subprocess.CalledProcessError):
            return None
    if "/cuda/" in header or "/nccl/" in header:
        return ["-I/usr/local/cuda/include"] if pathlib.Path("/usr/local/cuda/include").is_dir() else None
    return []


def fastest(compiler, source, flags, runs):
    best = None
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run([compiler, "-std=c++20", "-O2", "-I", str(INCLUDE), *flags, "-c",
                               str(source), "-o", os.devnull], capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"compile failed: {source}\n{proc.stderr[:2000]}")
        best = elapsed if best is None else min(best, elapsed)
    return best


def main():
    args = sys.argv[1:]
    runs = 3
    if args[:1] == ["--runs"]:
        runs = int(args[1])
        args = args[2:]
    compiler = args[0] if args else "g++"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        rows = []
        (tmp / "empty.cpp").write_text("\n")
        rows.append(("(empty unit)", fastest(compiler, tmp / "empty.cpp", [], runs)))
        std_names = standard_headers(compiler, tmp)
        (tmp / "std.cpp").write_text("".join(f"#include <{h}>\n" for h in std_names))
        rows.append(("(the standard headers sim.hpp uses)", fastest(compiler, tmp / "std.cpp", [], runs)))
        for h in HEADERS:
            flags = extra_flags(h)
            if flags is None:
                print(f"# {h}: skipped (no include path for it here)")
                continue
            src = tmp / "unit.cpp"
            src.write_text(f'#include "{h}"\n')
            rows.append((h, fastest(compiler, src, flags, runs)))
    print(f"# {compiler} -std=c++20 -O2 -c, a unit that includes only the header; fastest of {runs}")
    print(f"# the standard headers sim.hpp reads: {' '.join(std_names)}")
    print(f"{'header':<40} {'seconds':>8}")
    for name, s in rows:
        print(f"{name:<40} {s:8.2f}")


if __name__ == "__main__":
    main()
