#!/usr/bin/env python3
"""tests/backends/check_failure.py MPIRUN_ARGS... -- EXE: a rank that fails must end the job.

Runs EXE under mpirun in five modes and checks each ends (no hang: a 120 s limit) with a
non-zero exit and a message naming the failing rank and its error. A failure on every process
(the mesh larger than the job) is one line from the first process, and no abort banner."""
import subprocess
import sys

sep = sys.argv.index("--")
mpirun, exe = sys.argv[1:sep], sys.argv[sep + 1]
cases = [
    ("from_local", 4, ["spmd::mpi: rank 1 of 4 failed", "spmd::mpi::from_local: rank 1 has local shape [3, 4]"]),
    ("kernel", 4, ["spmd::mpi: rank 2 of 4 failed", "the kernel failed on purpose"]),
    ("world", 4, ["spmd::mpi: every process failed: ",
                  "the mesh has 8 ranks (rank ids up to 7) but the communicator has 4 processes"]),
    ("collective", 4, ["failed", "spmd::mpi::all_reduce: rank 1's tensor [3, 2] differs from rank 0's [2, 2] in their group"]),
    ("training", 4, ["spmd::mpi: rank 3 of 4 failed", "rank 3 failed mid-step on purpose"]),
]
bad = 0
for mode, n, wants in cases:
    cmd = mpirun + ["-np", str(n), exe, mode]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        print(f"FAIL {mode}: the job hung (still running after 120 s)")
        bad += 1
        continue
    out = r.stdout + r.stderr
    missing = [w for w in wants if w not in out]
    if mode == "world":  # every process failed the same way: said once, ended cleanly
        said = sum("the communicator has 4 processes" in l for l in out.splitlines())
        if said != 1 or "MPI_ABORT" in out or r.returncode != 2:
            missing.append(f"one line (said {said} times), no MPI_ABORT, exit 2 (exit {r.returncode})")
    if r.returncode == 0 or missing:
        print(f"FAIL {mode}: exit {r.returncode}, missing {missing}\n{out[-3000:]}")
        bad += 1
    else:
        print(f"ok   {mode}: exit {r.returncode}: "
              + next(l for l in out.splitlines() if "spmd::mpi: " in l))
sys.exit(1 if bad else 0)
