#!/usr/bin/env python3
"""Every public header compiles on its own (includes what it uses), with -Wall -Wextra -Wpedantic.

usage: check_headers.py INCLUDE_DIR COMPILER [ARGS...]

The MPI backend's headers (spmd/backends/mpi/) get MPI's include flags from
`mpicxx --showme:compile`; without mpicxx they are skipped, and the output says so. The CUDA
backend's host headers (spmd/backends/cuda/) get the CUDA toolkit's include directory (next to
nvcc, or /usr/local/cuda); without a toolkit those that include CUDA's headers are skipped, and
the output says so. Runs the compiles two at a time.
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


def cuda_include():
    import shutil
    nvcc = shutil.which("nvcc")
    for d in ([pathlib.Path(nvcc).resolve().parent.parent / "include"] if nvcc else []) + \
             [pathlib.Path("/usr/local/cuda/include")]:
        if (d / "cuda_runtime_api.h").exists():
            return [f"-I{d}"]
    return None


cuda_flags = cuda_include()
if cuda_flags is None:
    # A header that includes another CUDA one needs the toolkit as well: skip the whole folder
    # but the host-only parts (tables, bodies, geometry), which must compile anywhere.
    host_only = ("step_table.hpp", "step_body.hpp", "grid_emulation.hpp", "op_bodies.hpp",
                 "collectives_table.hpp", "ops/geometry.hpp", "block_body.hpp", "block_jobs.hpp")
    skipped = [h for h in headers if h.startswith("spmd/backends/cuda/") and not h.endswith(host_only)]
    headers = [h for h in headers if h not in skipped]
    print(f"SKIP: {len(skipped)} CUDA backend headers (no CUDA toolkit to give cuda_runtime_api.h)")

# The NCCL backend's headers need the toolkit (cuda_runtime_api.h, nccl.h) and, for its MPI
# launch (environment.hpp), MPI's flags.
nccl_ok = cuda_flags is not None and mpi_flags is not None and any(
    (pathlib.Path(f[2:]) / "nccl.h").exists() for f in cuda_flags if f.startswith("-I"))
if not nccl_ok:
    skipped = [h for h in headers if h.startswith("spmd/backends/nccl/")]
    headers = [h for h in headers if h not in skipped]
    print(f"SKIP: {len(skipped)} NCCL backend headers (no CUDA toolkit with nccl.h, or no mpicxx)")


def compile_one(h):
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(f"#include <{h}>\nint main() {{ return 0; }}\n")
    extra = mpi_flags if h.startswith("spmd/backends/mpi/") else []
    if h.startswith("spmd/backends/cuda/") and cuda_flags:
        extra = cuda_flags
    if h.startswith("spmd/backends/nccl/") and nccl_ok:
        extra = cuda_flags + mpi_flags
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
