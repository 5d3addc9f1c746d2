#!/usr/bin/env python3
"""spmd-plan run --backend mpi: under mpirun -np N, the first process prints exactly the JSON
(and the text) that --backend sim prints; another process count exits 2 with a message.

usage: test_plan_run_mpi.py <spmd-plan> <mpirun> [mpirun args...]
"""
import subprocess
import sys

TOOL, MPIRUN = sys.argv[1], sys.argv[2:]
FAILS = []
CASES = [
    ("4", "7,5", "S(0)", "R", "f32"),
    ("4", "5", "S(0)", "R", "i32"),
    ("2x2", "5,7", "S(0),S(1)", "S(1),S(0)", "f64"),
    ("2x2", "8,6", "P(sum),S(0)", "R,R", "f32"),
    ("2x2", "3,4", "R,S(1)", "P(max),S(0)", "i64"),
    ("2x3", "4,6", "P(avg),S(1)", "S(0),R", "f32"),
    ("2x2x2", "8,4", "S(0),S(1),P(sum)", "R,S(0),S(1)", "f32"),
    ("4", "3,0", "S(1)", "R", "f32"),
]


def size(mesh):
    n = 1
    for k in mesh.split("x"):
        n *= int(k)
    return n


for mesh, shape, src, dst, dtype in CASES:
    for fmt in (["--json"], []):
        args = ["run", "--mesh", mesh, "--shape", shape, "--from", src, "--to", dst,
                "--dtype", dtype, *fmt]
        sim = subprocess.run([TOOL, *args], capture_output=True, text=True)
        mpi = subprocess.run([*MPIRUN, "-np", str(size(mesh)), TOOL, *args, "--backend", "mpi"],
                             capture_output=True, text=True, timeout=120)
        what = " ".join(args)
        if sim.returncode != 0 or mpi.returncode != 0:
            FAILS.append(f"{what}: exit sim {sim.returncode}, mpi {mpi.returncode}\n{mpi.stderr[-2000:]}")
        elif sim.stdout != mpi.stdout:
            FAILS.append(f"{what}: mpi printed\n{mpi.stdout[:2000]}\nsim printed\n{sim.stdout[:2000]}")

# A process count other than the mesh size: exit 2, a message naming both.
bad = subprocess.run([*MPIRUN, "-np", "2", TOOL, "run", "--mesh", "2x2", "--shape", "4,4",
                      "--from", "S(0),R", "--to", "R,R", "--backend", "mpi"],
                     capture_output=True, text=True, timeout=120)
if bad.returncode != 2 or "has 4 ranks but 2 processes were started" not in bad.stderr:
    FAILS.append(f"-np 2 on a 2x2 mesh: exit {bad.returncode}, stderr {bad.stderr[-1500:]}")
# A bad backend name: exit 2.
bad = subprocess.run([TOOL, "run", "--mesh", "4", "--shape", "4", "--from", "S(0)", "--to", "R",
                      "--backend", "nccl"], capture_output=True, text=True)
if bad.returncode != 2 or "bad backend 'nccl'" not in bad.stderr:
    FAILS.append(f"--backend nccl: exit {bad.returncode}, stderr {bad.stderr}")

for f in FAILS:
    print("FAIL:", f)
print(f"{2 * len(CASES) + 2 - len(FAILS)} of {2 * len(CASES) + 2} checks passed")
sys.exit(1 if FAILS else 0)
