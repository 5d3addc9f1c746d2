#!/usr/bin/env python3
"""Compile-time cost of spmd's layouts: wall time and peak memory of the compiler.

usage: measure.py <include-dir> [compiler ...]   (default compilers: g++ and clang++)

Compiles bench/compile/headers_only.cpp and a generated TU with 100 distinct layouts
(gen_layouts.py) with -std=c++20 -O2 -c, 5 runs
each, and prints the median wall time and the peak RSS of the compiler process.
"""
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
RUNS = 5


def compile_once(cmd):
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"compile failed: {' '.join(cmd)}\n{err}")
    return elapsed, usage.ru_maxrss / 1024.0  # KiB -> MiB


def measure(compiler, include, source, out):
    cmd = [compiler, "-std=c++20", "-O2", "-I", str(include), "-c", str(source), "-o", str(out)]
    samples = [compile_once(cmd) for _ in range(RUNS)]
    return statistics.median(t for t, _ in samples), max(m for _, m in samples)


def main():
    include = pathlib.Path(sys.argv[1]).resolve()
    compilers = sys.argv[2:] or ["g++", "clang++"]
    with tempfile.TemporaryDirectory() as tmp:
        layouts = pathlib.Path(tmp) / "layouts_100.cpp"
        layouts.write_text(subprocess.check_output([sys.executable, str(HERE / "gen_layouts.py"), "100"], text=True))
        obj = pathlib.Path(tmp) / "out.o"
        print(f"{'compiler':<12} {'TU':<16} {'median s':>9} {'peak MiB':>9}")
        for cc in compilers:
            base_t, base_m = measure(cc, include, HERE / "headers_only.cpp", obj)
            t, m = measure(cc, include, layouts, obj)
            print(f"{cc:<12} {'headers only':<16} {base_t:9.3f} {base_m:9.1f}")
            print(f"{cc:<12} {'100 layouts':<16} {t:9.3f} {m:9.1f}")
            print(f"RESULT compiler={cc} headers_s={base_t:.3f} layouts_s={t:.3f} "
                  f"per_layout_ms={(t - base_t) * 10:.2f} headers_mib={base_m:.1f} layouts_mib={m:.1f}")


if __name__ == "__main__":
    main()
