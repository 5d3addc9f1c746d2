#!/usr/bin/env python3
"""Every public header compiles on its own (includes what it uses), with -Wall -Wextra -Wpedantic.

usage: check_headers.py INCLUDE_DIR COMPILER [ARGS...]

The MPI backend's headers (spmd/backends/mpi/) get MPI's include flags from
`mpicxx --showme:compile`; without mpicxx they are skipped, and the output says so. CUDA-only
headers (none yet) would be skipped by name. Runs the compiles two at a time.
"""
import concurrent.futures
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
cmd = sys.argv[2:]
headers = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.hpp"))
try:
    mpi_flags = subprocess.run(["mpicxx", "--showme:compile"], capture_output=True, text=True,
                               check=True).stdout.split()
except (OSError, subprocess.CalledProcessError):
    mpi_flags = None
    skipped = [h for h in headers if h.startswith("spmd/backends/mpi/")]
    headers = [h for h in headers if h not in skipped]
    print(f"SKIP: {len(skipped)} MPI headers (no mpicxx to give MPI's include flags)")


def compile_one(h):
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(f"#include <{h}>\nint main() {{ return 0; }}\n")
    extra = mpi_flags if h.startswith("spmd/backends/mpi/") else []
    p = subprocess.run(cmd + extra + ["-std=c++20", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                              "-fsyntax-only", f"-I{root}", f.name], capture_output=True, text=True)
    pathlib.Path(f.name).unlink()
    return h, p.returncode, p.stderr


failed = []
with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    for h, rc, err in pool.map(compile_one, headers):
        if rc != 0:
            failed.append(f"FAILED: {h} does not compile on its own:\n{err[:2000]}")
if failed:
    print("\n".join(failed))
    sys.exit(1)
print(f"PASS: {len(headers)} headers compile on their own")
