#!/usr/bin/env python3
"""Compile-time cost of spmd's layouts: wall time and peak memory of the compiler.

usage: measure.py <include-dir> [compiler ...]   (default compilers: g++ and clang++)

Compiles bench/compile/headers_only.cpp and a generated TU with 100 distinct layouts
(gen_layouts.py) with -std=c++20 -O2 -c, 5 runs
each, and prints the median wall time and the peak RSS of the compiler process. Then, with
the first compiler only, operator resolutions (gen_ops.py): 30 matmuls whose inputs fit a
strategy ("exact") or do not ("costed"), on 1-d and 2-d meshes, alone and with the
simulation backend's code for them ("sim").
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
        measure_ops(compilers[0], include, pathlib.Path(tmp), obj)


def measure_ops(cc, include, tmp, obj):
    n = 30
    print(f"\noperator resolutions ({cc}, {n} distinct matmuls per TU)")
    print(f"{'TU':<22} {'median s':>9} {'peak MiB':>9} {'ms per op':>10}")
    bases = {}
    for extra in ["", "sim"]:
        src = tmp / f"ops_base_{extra or 'types'}.cpp"
        src.write_text(subprocess.check_output(
            [sys.executable, str(HERE / "gen_ops.py"), "0", "exact", "1d"] + ([extra] if extra else []), text=True))
        bases[extra] = measure(cc, include, src, obj)[0]
    for kind in ["exact", "costed"]:
        for mesh in ["1d", "2d"]:
            for extra in ["", "sim"]:
                src = tmp / f"ops_{kind}_{mesh}_{extra or 'types'}.cpp"
                src.write_text(subprocess.check_output(
                    [sys.executable, str(HERE / "gen_ops.py"), str(n), kind, mesh] + ([extra] if extra else []),
                    text=True))
                t, m = measure(cc, include, src, obj)
                per = (t - bases[extra]) / n * 1000
                name = f"{kind} {mesh} {extra or 'types'}"
                print(f"{name:<22} {t:9.3f} {m:9.1f} {per:10.1f}")
                print(f"RESULT ops={kind}_{mesh}_{extra or 'types'} s={t:.3f} per_op_ms={per:.1f}")


if __name__ == "__main__":
    main()
