#!/usr/bin/env python3
"""SPMD_TRACE and SPMD_LOG as a user meets them, through `spmd-plan run`:

- the simulation: one lane per rank, each with the plan's steps in order (the kinds
  `spmd-plan plan --json` lists), inside one redistribute span; a Chrome trace-event file
  (traceEvents, ph X with ts and dur, thread names "rank r");
- MPI (when given mpirun): one file written by rank 0 with every process's lane, each with
  the steps in order; SPMD_LOG=all's lines carry "[spmd rank r]" and SPMD_LOG_RANKS=1 keeps
  rank 1's alone; the plan is reported as made at run time;
- SPMD_LOG with an unknown word says so on stderr;
- SPMD_LOG=redistribute's line names every step as `spmd-plan plan --json` lists it: kind,
  mesh dims, bytes per rank, in order;
- a trace that cannot be written (a missing directory, a directory) says why and exits 2
  after the program's own output; one to /dev/stdout or a FIFO is written through.

usage: test_trace.py SPMD_PLAN [MPIRUN ARGS...]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

TOOL, MPIRUN = sys.argv[1], sys.argv[2:]
FAILS = []
CASES = [("2x2", "8,6", "S(0),S(1)", "S(1),S(0)"), ("4", "7,5", "S(0)", "R"), ("2x2", "8,6", "P(sum),S(0)", "R,R"),
         ("2x2", "8", "S(0)[0],S(0)[1]", "R,R"), ("2x4", "10,6", "S(0),S(1)", "S(1),R"), ("2x2", "6,4", "R,R", "S(1),R"),
         ("2x2x2", "4,6", "S(0),S(1)[1],S(1)[0]", "R,S(0),R")]

MPI_CASES = 3  # the first three also under mpirun (the rest check the log's words alone)


def steps_of(line):
    """The steps a redistribute line names: [(kind, [mesh dims], bytes)], in order."""
    m = re.search(r", \d+ steps? \((.*)\), \d+ B/rank, ", line)
    if not m:
        return []
    out = []
    for part in m.group(1).split("; "):
        sm = re.fullmatch(r"(\w+)(?:\((\w+)\))? over mesh dims ([\d,]+), (\d+) B/rank", part)
        if not sm:
            return [("unparsed", part)]
        out.append((sm.group(1), [int(x) for x in sm.group(3).split(",")], int(sm.group(4))))
    return out


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def size(mesh):
    n = 1
    for k in mesh.split("x"):
        n *= int(k)
    return n


def lanes_of(path, what):
    with open(path) as f:
        j = json.load(f)
    lanes, names = {}, {}
    for e in j["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        if e["ph"] != "X":
            continue
        check(e["ts"] >= 0 and e["dur"] >= 0 and e["pid"] == 0, f"{what}: event {e}")
        lanes.setdefault(e["tid"], []).append(e)
    for r, ev in lanes.items():
        check(names.get(r) == f"rank {r}", f"{what}: lane {r} is named {names.get(r)!r}")
        ev.sort(key=lambda e: e["ts"])
    return lanes


def check_lanes(lanes, ranks, kinds, what):
    check(sorted(lanes) == list(range(ranks)), f"{what}: lanes {sorted(lanes)}, expected 0..{ranks - 1}")
    for r, ev in lanes.items():
        steps = [e["name"] for e in ev if e["cat"] == "step"]
        check(steps == kinds, f"{what}: rank {r}'s steps {steps}, the plan's {kinds}")
        red = [e for e in ev if e["cat"] == "redistribute"]
        check(len(red) == 1, f"{what}: rank {r} has {len(red)} redistribute spans")
        if red:
            t0, t1 = red[0]["ts"], red[0]["ts"] + red[0]["dur"]
            for e in ev:
                if e["cat"] == "step":
                    check(t0 <= e["ts"] and e["ts"] + e["dur"] <= t1 + 1e-3, f"{what}: rank {r}: step {e} outside {red[0]}")


with tempfile.TemporaryDirectory() as d:
    for case, (mesh, shape, src, dst) in enumerate(CASES):
        args = ["--mesh", mesh, "--shape", shape, "--from", src, "--to", dst]
        plan = json.loads(subprocess.run([TOOL, "plan", *args, "--json"], capture_output=True, text=True, check=True).stdout)
        kinds = [s["kind"] for s in plan["steps"]]
        out = os.path.join(d, "sim.json")
        env = dict(os.environ, SPMD_TRACE=out, SPMD_LOG="redistribute")
        p = subprocess.run([TOOL, "run", *args], capture_output=True, text=True, env=env)
        what = f"sim {' '.join(args)}"
        check(p.returncode == 0, f"{what}: exit {p.returncode} {p.stderr}")
        check(os.path.exists(out), f"{what}: SPMD_TRACE wrote no file")
        if os.path.exists(out):
            check_lanes(lanes_of(out, what), size(mesh), kinds, what)
            os.remove(out)
        lines = [l for l in p.stderr.splitlines() if l.startswith("[spmd")]
        check(len(lines) == 1 and lines[0].startswith("[spmd] redistribute ") and "run time" in lines[0] and
              f"{len(kinds)} step" in lines[0], f"{what}: SPMD_LOG lines {lines}")
        want = [(s["kind"], s["mesh_dims"], s["bytes_per_rank"]) for s in plan["steps"]]
        if lines:
            check(steps_of(lines[0]) == want, f"{what}: the log's steps {steps_of(lines[0])}, spmd-plan plan --json's {want}")
        if MPIRUN and case < MPI_CASES:
            out = os.path.join(d, "mpi.json")
            env = dict(os.environ, SPMD_TRACE=out, SPMD_LOG="all")
            n = size(mesh)
            p = subprocess.run([*MPIRUN, "-np", str(n), "-x", "SPMD_TRACE", "-x", "SPMD_LOG", TOOL, "run", *args,
                                "--backend", "mpi"], capture_output=True, text=True, env=env, timeout=120)
            what = f"mpi {' '.join(args)}"
            check(p.returncode == 0, f"{what}: exit {p.returncode} {p.stderr[-2000:]}")
            if os.path.exists(out):
                check_lanes(lanes_of(out, what), n, kinds, what)
                os.remove(out)
            else:
                check(False, f"{what}: SPMD_TRACE wrote no file")
            lines = [l for l in p.stderr.splitlines() if l.startswith("[spmd")]
            for r in range(n):
                mine = [l for l in lines if l.startswith(f"[spmd rank {r}] ")]
                check(any("redistribute" in l and "run time" in l for l in mine), f"{what}: rank {r} logs {mine}")
                check(sum(re.match(r"\[spmd rank \d+\]   step ", l) is not None for l in mine) == len(kinds), f"{what}: rank {r} logs {len(mine)} lines: {mine}")
            env["SPMD_LOG_RANKS"] = "1"
            del env["SPMD_TRACE"]
            p = subprocess.run([*MPIRUN, "-np", str(n), "-x", "SPMD_LOG", "-x", "SPMD_LOG_RANKS", TOOL, "run", *args,
                                "--backend", "mpi"], capture_output=True, text=True, env=env, timeout=120)
            lines = [l for l in p.stderr.splitlines() if l.startswith("[spmd")]
            check(lines and all(l.startswith("[spmd rank 1] ") for l in lines), f"{what}: SPMD_LOG_RANKS=1 gave {lines}")

    # A trace that cannot be written: the reason, exit 2, after the program's own output.
    args = ["run", "--mesh", "2", "--shape", "4", "--from", "S(0)", "--to", "R", "--json"]
    for bad, words in ((os.path.join(d, "absent", "t.json"), "does not exist"), (d, "is a directory")):
        p = subprocess.run([TOOL, *args], capture_output=True, text=True, env=dict(os.environ, SPMD_TRACE=bad))
        check(p.returncode == 2 and "SPMD_TRACE: the trace was not written" in p.stderr and words in p.stderr,
              f"SPMD_TRACE={bad}: exit {p.returncode} {p.stderr!r}")
        check(p.stdout.strip().startswith("{") and json.loads(p.stdout)["trace"] == "S(0)->R",
              f"SPMD_TRACE={bad}: the program's output was lost: {p.stdout!r}")
    # To /dev/stdout: after the program's output, on the same stream.
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, env=dict(os.environ, SPMD_TRACE="/dev/stdout"))
    first, _, rest = p.stdout.partition("\n")
    check(p.returncode == 0 and json.loads(first)["trace"] == "S(0)->R" and "traceEvents" in json.loads(rest),
          f"SPMD_TRACE=/dev/stdout: exit {p.returncode} {p.stdout[:300]!r} {p.stderr!r}")
    # To a FIFO: written through to its reader.
    fifo = os.path.join(d, "trace.fifo")
    os.mkfifo(fifo)
    got = {}
    reader = threading.Thread(target=lambda: got.update(text=open(fifo).read()), daemon=True)
    reader.start()
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, env=dict(os.environ, SPMD_TRACE=fifo), timeout=60)
    reader.join(60)
    check(p.returncode == 0 and "traceEvents" in json.loads(got.get("text", "{}")) and os.path.exists(fifo) and
          not os.path.isfile(fifo), f"SPMD_TRACE=FIFO: exit {p.returncode} {p.stderr!r} {got.get('text', '')[:200]!r}")

    env = dict(os.environ, SPMD_LOG="redistribute,nonsense")
    p = subprocess.run([TOOL, "run", "--mesh", "2", "--shape", "4", "--from", "S(0)", "--to", "R"], capture_output=True,
                       text=True, env=env)
    check(p.returncode == 0 and "SPMD_LOG: unknown nonsense" in p.stderr, f"SPMD_LOG=...,nonsense: {p.stderr!r}")

if FAILS:
    print(f"{len(FAILS)} check(s) failed")
    sys.exit(1)
print(f"trace: {len(CASES)} plans traced on the simulation" + (" and under MPI" if MPIRUN else ""))
