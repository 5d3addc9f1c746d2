#!/usr/bin/env python3
"""spmd-plan pipeline: every schedule's table, read from --json, checked here on its own
terms (an independent model of what a table must be), against the published formulas, and
against its text and SVG forms; bad input exits 2 naming the value.

usage: test_pipeline.py SPMD_PLAN
"""
import json
import os
import re
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
failures = []
DURATION = {"F": 1, "B": 2, "I": 1, "W": 1}


def run(*args):
    p = subprocess.run([TOOL, "pipeline", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def fail(what, args, detail=""):
    failures.append(f"{what}: spmd-plan pipeline {' '.join(args)}\n{detail}")


def check_table(j, split):
    """The table's own rules, from the JSON alone: returns an error string or None."""
    p, v, m = j["stages"], j["virtual"], j["microbatches"]
    stages = p * v
    slots = j["slots"]
    ends = {}  # (op class, stage, microbatch) -> last slot: 'F', 'X' (B or I), 'W' (B or W)
    busy = [[False] * slots for _ in range(p)]
    events = []  # (slot, order, rank, action)
    for rj in j["ranks"]:
        r = rj["rank"]
        for a in rj["actions"]:
            if a["stage"] % p != r:
                return f"rank {r} runs stage {a['stage']}"
            for s in range(a["slot"], a["slot"] + DURATION[a["op"]]):
                if s >= slots or busy[r][s]:
                    return f"rank {r} has two tasks in slot {s}"
                busy[r][s] = True
            if (a["op"] == "B" and split) or (a["op"] in "IW" and not split):
                return f"op {a['op']} in a schedule with split={split}"
            events.append((a["slot"], r, a))
    events.sort(key=lambda e: e[0])
    # transfers: every send has the receive in the same slot and the other way round
    sends = {(rj["rank"], x["slot"], x["to"], x["stage"], x["microbatch"], x["kind"])
             for rj in j["ranks"] for x in rj["sends"]}
    recvs = {(x["from"], x["slot"], rj["rank"], x["stage"], x["microbatch"], x["kind"])
             for rj in j["ranks"] for x in rj["receives"]}
    if sends != recvs:
        return f"unpaired transfers: {sorted(sends ^ recvs)[:3]}"
    arrival = {}  # (kind, stage, microbatch, rank) -> slot it arrived
    for (src, slot, dst, stage, mb, kind) in sends:
        arrival[(kind, stage, mb, dst)] = slot
    for (slot, r, a) in events:
        s, mb, op = a["stage"], a["microbatch"], a["op"]

        def have(kind, from_stage):
            key = "F" if kind == "activation" else "X"
            if from_stage % p == r:
                return ends.get((key, from_stage, mb), 1 << 30) < slot
            return arrival.get((kind, from_stage, mb, r), 1 << 30) < slot

        if op == "F":
            ok = s == 0 or have("activation", s - 1)
            key = "F"
        elif op in "BI":
            ok = ends.get(("F", s, mb), 1 << 30) < slot and (s == stages - 1 or have("gradient", s + 1))
            key = "X"
        else:
            ok = ends.get(("X", s, mb), 1 << 30) < slot
            key = "W"
        if not ok:
            return f"rank {r} starts {op}{mb} of stage {s} in slot {slot} before its input"
        if (key, s, mb) in ends:
            return f"{op}{mb} of stage {s} twice"
        ends[(key, s, mb)] = slot + DURATION[op] - 1
        if op == "B":
            ends[("W", s, mb)] = slot + 1
    for s in range(stages):
        for mb in range(m):
            for key in "FXW":
                if (key, s, mb) not in ends:
                    return f"{key} of stage {s} microbatch {mb} never runs"
    # bubble and peaks, from the actions
    idle = sum(not b for row in busy for b in row)
    if idle != j["idle_slots"] or j["rank_slots"] != slots * p or abs(j["bubble"] - idle / (slots * p)) > 1e-12:
        return f"bubble figures {j['idle_slots']}/{j['rank_slots']} against {idle}/{slots * p}"
    for rj in j["ranks"]:
        live = peak = 0
        for a in sorted(rj["actions"], key=lambda a: a["slot"]):
            if a["op"] == "F":
                live += 1
            peak = max(peak, live)
            if a["op"] in "BW":
                live -= 1
        if peak != j["peak"][rj["rank"]]:
            return f"rank {rj['rank']} peak {j['peak'][rj['rank']]}, counted {peak}"
    return None


cases = [(k, p, 1, m) for k in ("gpipe", "1f1b", "zb") for p in (1, 2, 3, 4) for m in (1, 2, 3, 4, 5, 8)]
cases += [("interleaved", p, v, m) for p in (1, 2, 4) for v in (1, 2, 3) for m in (1, 2, 3, 4, 5, 7, 8)]
for (k, p, v, m) in cases:
    args = ["--schedule", k, "--stages", str(p), "--microbatches", str(m), "--virtual", str(v), "--json"]
    rc, out, err = run(*args)
    if rc != 0:
        fail("exit code", args, err)
        continue
    j = json.loads(out)
    if list(j)[:4] != ["schedule", "stages", "virtual", "microbatches"]:
        fail("field order", args, list(j))
    e = check_table(j, k == "zb")
    if e:
        fail("table", args, e)
    slots = j["slots"]
    if k in ("gpipe", "1f1b") and slots != 3 * (m + p - 1):
        fail("length", args, f"{slots} slots, not 3(m+p-1) = {3 * (m + p - 1)}")
    if k == "1f1b" and j["peak"] != [min(p - r, m) for r in range(p)]:
        fail("1f1b peak", args, j["peak"])
    if k == "gpipe" and j["peak"] != [m] * p:
        fail("gpipe peak", args, j["peak"])
    if k == "zb" and m >= p and slots != 3 * m + p - 1:
        fail("zb length", args, f"{slots} slots, not 3m+p-1 = {3 * m + p - 1}")
    if k == "interleaved" and m % p == 0 and slots != 3 * (v * m + p - 1):
        fail("interleaved length", args, f"{slots} slots, not 3(vm+p-1) = {3 * (v * m + p - 1)}")

# the text form: one row per rank, slots as columns, the same figures
args = ["--schedule", "1f1b", "--stages", "4", "--microbatches", "8"]
rc, out, err = run(*args)
lines = out.splitlines()
if rc != 0 or not lines[1].startswith("33 slots") or "bubble 0.2727 (36 of 132" not in lines[1] \
        or lines[2] != "peak live microbatches by rank: 4 3 2 1":
    fail("text header", args, out + err)
rows = [l for l in lines if l.startswith("rank ")]
if len(rows) != 4 or rows[0].split("|")[1].split()[:5] != ["F0", "F1", "F2", "F3", "."]:
    fail("text rows", args, out)

# the picture: a <rect data-op> per action, at its slot and rank
with tempfile.TemporaryDirectory() as d:
    svg = os.path.join(d, "p.svg")
    args = ["--schedule", "interleaved", "--stages", "2", "--virtual", "2", "--microbatches", "4",
            "--svg", svg, "--json"]
    rc, out, err = run(*args)
    if rc != 0:
        fail("svg", args, err)
    else:
        j = json.loads(out)
        text = open(svg).read()
        boxes = set(re.findall(r'data-op="(\w)" data-rank="(\d+)" data-slot="(\d+)" data-stage="(\d+)" '
                               r'data-microbatch="(\d+)"', text))
        want = {(a["op"], str(rj["rank"]), str(a["slot"]), str(a["stage"]), str(a["microbatch"]))
                for rj in j["ranks"] for a in rj["actions"]}
        if boxes != want or not text.startswith("<?xml"):
            fail("svg boxes", args, f"{len(boxes)} boxes, {len(want)} actions")
    bad_svg = ["--schedule", "1f1b", "--stages", "2", "--microbatches", "2", "--svg", os.path.join(d, "no", "x.svg")]
    rc, out, err = run(*bad_svg)
    if rc != 2 or "--svg" not in err or out:
        fail("svg to a missing folder", bad_svg, f"rc {rc}\n{out}{err}")

# bad input: exit 2, the value named, nothing on stdout
for args, named in [
    (["--schedule", "pipedream", "--stages", "2", "--microbatches", "2"], "'pipedream'"),
    (["--schedule", "1f1b", "--stages", "0", "--microbatches", "2"], "--stages 0"),
    (["--schedule", "1f1b", "--stages", "65", "--microbatches", "2"], "--stages 65"),
    (["--schedule", "1f1b", "--stages", "2", "--microbatches", "0"], "--microbatches 0"),
    (["--schedule", "1f1b", "--stages", "2", "--microbatches", "-3"], "--microbatches -3"),
    (["--schedule", "1f1b", "--stages", "2", "--microbatches", "257"], "--microbatches 257"),
    (["--schedule", "gpipe", "--stages", "2", "--microbatches", "4", "--virtual", "2"], "--virtual 2"),
    (["--schedule", "zb", "--stages", "2", "--microbatches", "4", "--virtual", "3"], "--virtual 3"),
    (["--schedule", "interleaved", "--stages", "2", "--microbatches", "4", "--virtual", "9"], "--virtual 9"),
    (["--schedule", "1f1b", "--stages", "two", "--microbatches", "4"], "two"),
    (["--schedule", "1f1b", "--microbatches", "4"], "--stages"),
]:
    rc, out, err = run(*args)
    if rc != 2 or named not in err or out:
        fail("bad input", args, f"rc {rc}\nstdout: {out}\nstderr: {err}")

for f in failures:
    print("FAIL", f, "\n")
print(f"{len(cases)} tables checked; {len(failures)} failures")
sys.exit(1 if failures else 0)
