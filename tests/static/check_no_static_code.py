#!/usr/bin/env python3
"""Including spmd costs a unit no code: a unit that includes a public header and uses nothing
from it compiles (-O2) to an object that defines no symbol and runs nothing before main.

usage: check_no_static_code.py INCLUDE_DIR COMPILER [ARGS...]

Why: every function, static object and initialiser that such a unit gets is compiled again in
every translation unit of every program that includes spmd. Before issue 27 a unit that
included only spmd/backends/sim/sim.hpp got 12 KB of code (the SPMD_LOG and SPMD_TRACE
readers, run before main by two inline variables) and 0.4 s of optimisation and code
generation (bench/RESULTS.md, "Compile time"). The environment is now read when first
asked; this test keeps it so. It fails naming the header and the symbols its unit defines.
"""
import concurrent.futures
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
cmd = sys.argv[2:]
# The headers users include (bench/compile/per_header.py's list, kept there once), but the
# backends that need MPI or CUDA flags: headers-self-contained compiles their units.
sys.path.insert(0, str(root.parent / "bench" / "compile"))
from per_header import HEADERS as PUBLIC  # noqa: E402

HEADERS = [h for h in PUBLIC if not h.startswith(("spmd/backends/mpi/", "spmd/backends/cuda/", "spmd/backends/nccl/"))]


def check(h):
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = pathlib.Path(tmp) / "unit.cpp", pathlib.Path(tmp) / "unit.o"
        src.write_text(f"#include <{h}>\n")
        p = subprocess.run(cmd + ["-std=c++20", "-O2", "-c", f"-I{root}", str(src), "-o", str(obj)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return f"FAILED: {h} does not compile:\n{p.stderr[:2000]}"
        nm = subprocess.run(["nm", "-C", "--defined-only", str(obj)], capture_output=True, text=True)
        if nm.returncode != 0:
            return f"FAILED: nm on {h}'s unit: {nm.stderr[:500]}"
        defined = [line for line in nm.stdout.splitlines() if line.strip()]
        if defined:
            shown = "\n  ".join(defined[:20])
            return (f"FAILED: a unit that only includes {h} defines {len(defined)} symbols "
                    f"(code or static objects every including unit compiles again):\n  {shown}")
        return None


failed = []
with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    for h, err in zip(HEADERS, pool.map(check, HEADERS)):
        if err:
            failed.append(err)
        else:
            print(f"PASS: {h}: no code")
if failed:
    print("\n\n".join(failed))
    sys.exit(1)
