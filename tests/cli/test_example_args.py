#!/usr/bin/env python3
"""The examples as a new user meets them: bad arguments named, a run that does not learn said
so, what the header promises printed, and under mpirun a wrong process count said once.

usage: test_example_args.py TRAIN_GPT SPMD_DEMO [MPIRUN ARGS...]

- train-gpt --steps abc / --steps 0 / --lr -1 / --lr x: exit 2 naming the flag and the value;
- train-gpt --steps 5 --lr 0.1: the loss does not fall (or goes non-finite): a message on
  stderr and a non-zero exit (1, or 3 for non-finite), never a silent exit;
- train-gpt --steps 60: the loss falls (exit 0) and the count of next tokens predicted right
  on unseen sequences is printed, within its bounds;
- under mpirun -np 4 (the mesh has 8 ranks): spmd-demo and train-gpt --backend mpi exit 2
  with one line from the first process and no MPI_ABORT banner.
"""
import re
import subprocess
import sys

TRAIN_GPT, DEMO, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3:]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(cmd, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p, " ".join(cmd)


for args, words in ((["--steps", "abc"], "--steps abc: give a whole number"),
                    (["--steps", "0"], "--steps 0: give a whole number of steps, at least 1"),
                    (["--steps", "12x"], "--steps 12x"),
                    (["--lr", "-1"], "--lr -1: give a positive number"),
                    (["--lr", "x"], "--lr x: give a positive number"),
                    (["--lr", "nan"], "--lr nan"),
                    (["--bogus"], "unknown argument --bogus")):
    p, cmd = run([TRAIN_GPT, *args])
    check(p.returncode == 2 and words in p.stderr and p.stdout == "", f"{cmd}: exit {p.returncode} {p.stderr!r}")

p, cmd = run([TRAIN_GPT, "--steps", "5", "--lr", "0.1"])
check(p.returncode in (1, 3) and ("did not fall" in p.stderr or "non-finite" in p.stderr),
      f"{cmd}: exit {p.returncode}, stderr {p.stderr!r}")

p, cmd = run([TRAIN_GPT, "--steps", "60"])
m = re.search(r"next tokens of 8 unseen sequences predicted right: (\d+) of 128 \(120 follow from the two tokens before", p.stdout)
check(p.returncode == 0 and m is not None and 0 <= int(m.group(1)) <= 128, f"{cmd}: exit {p.returncode}\n{p.stdout}")

if MPIRUN:
    for cmd, words in (([DEMO, "--backend", "mpi"], "spmd-demo: the mesh 2x4 has 8 ranks, this job has 4 processes"),
                       ([TRAIN_GPT, "--backend", "mpi"], "train-gpt: --backend mpi runs the 2x4 mesh in 8 processes, this job has 4")):
        p, line = run([*MPIRUN, "-np", "4", *cmd], timeout=120)
        said = [l for l in p.stderr.splitlines() if words in l]
        check(p.returncode == 2 and len(said) == 1 and "MPI_ABORT" not in p.stderr,
              f"{line}: exit {p.returncode}, said {len(said)} times\n{p.stderr}")

if FAILS:
    print(f"{len(FAILS)} check(s) failed")
    sys.exit(1)
print("examples' arguments: ok" + (" (and under mpirun)" if MPIRUN else ""))
