#!/usr/bin/env python3
"""spmd-plan run --backend cuda: with a GPU, exactly the JSON (and the text) that --backend sim
prints, for every element type and mesh rank; without one, exit 2 and a message saying there is
no CUDA device (then the test checks that and reports the comparison as skipped: exit 77).

usage: test_plan_run_cuda.py <spmd-plan>
"""
import subprocess
import sys

TOOL = sys.argv[1]
FAILS = []
CASES = [
    ("4", "7,5", "S(0)", "R", "f32"),
    ("4", "5", "S(0)", "R", "i32"),
    ("2x2", "5,7", "S(0),S(1)", "S(1),S(0)", "f64"),
    ("2x2", "8,6", "P(sum),S(0)", "R,R", "f32"),
    ("2x2", "3,4", "R,S(1)", "P(max),S(0)", "i64"),
    ("2x3", "4,6", "P(avg),S(1)", "S(0),R", "f32"),
    ("2x2x2", "8,4", "S(0),S(1),P(sum)", "R,S(0),S(1)", "f32"),
    ("8", "16,8", "S(0)", "S(1)", "f32"),
    ("4", "3,0", "S(1)", "R", "f32"),
]

probe = subprocess.run([TOOL, "run", "--mesh", "2", "--shape", "4", "--from", "S(0)", "--to", "R",
                        "--backend", "cuda"], capture_output=True, text=True)
if probe.returncode == 2 and "no CUDA device" in probe.stderr:
    if probe.stdout:
        print(f"FAIL: exit 2 without a GPU but stdout was not empty: {probe.stdout[:500]}")
        sys.exit(1)
    print("SKIP spmd-plan run --backend cuda: no CUDA device; exit 2 and the message checked:",
          probe.stderr.strip())
    sys.exit(77)
if probe.returncode != 0:
    print(f"FAIL: probe exit {probe.returncode}: {probe.stderr[-1500:]}")
    sys.exit(1)

for mesh, shape, src, dst, dtype in CASES:
    for fmt in (["--json"], []):
        args = ["run", "--mesh", mesh, "--shape", shape, "--from", src, "--to", dst,
                "--dtype", dtype, *fmt]
        sim = subprocess.run([TOOL, *args], capture_output=True, text=True)
        gpu = subprocess.run([TOOL, *args, "--backend", "cuda"], capture_output=True, text=True,
                             timeout=120)
        what = " ".join(args)
        if sim.returncode != 0 or gpu.returncode != 0:
            FAILS.append(f"{what}: exit sim {sim.returncode}, cuda {gpu.returncode}\n{gpu.stderr[-2000:]}")
        elif sim.stdout != gpu.stdout:
            FAILS.append(f"{what}: cuda printed\n{gpu.stdout[:2000]}\nsim printed\n{sim.stdout[:2000]}")

for f in FAILS:
    print("FAIL:", f)
print(f"spmd-plan run --backend cuda: {2 * len(CASES)} comparisons, {len(FAILS)} failed")
sys.exit(1 if FAILS else 0)
