#!/usr/bin/env python3
"""Tests of `spmd-plan explain` (python3, standard library only).

usage: test_explain.py SPMD_PLAN

- the canonical matmul propagations (x S(0) @ w R -> S(0); x R @ w S(1) -> S(1);
  x S(1) @ w S(0) -> P(sum)) are chosen "as they are", at cost 0;
- in a costed choice the chosen candidate has the least cost of the valid ones, and the
  lowest candidate number among equal costs; every listed candidate's layouts are printed;
- --out forces the output; --einsum explains any rule; --all lists invalid candidates with a
  reason;
- bad input exits 2 with an empty stdout and a message naming the bad value.
"""
import json
import subprocess
import sys

TOOL = sys.argv[1]
failures = []


def run(*args):
    p = subprocess.run([TOOL, "explain", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(ok, what, detail=""):
    if not ok:
        failures.append(f"FAILED: {what}\n{detail}")


def explain_json(*args):
    rc, out, err = run(*args, "--json")
    check(rc == 0, f"exit 0 for {args}", err)
    return json.loads(out) if rc == 0 else None


# Canonical propagations on a 1-d mesh of 4.
for x, w, want in [("S(0)", "R", "S(0)"), ("R", "S(1)", "S(1)"), ("S(1)", "S(0)", "P(sum)")]:
    j = explain_json("--mesh", "4", "--op", "matmul", "--input", f"{x}:16,8", "--input", f"{w}:8,12")
    if j:
        check(j["output"] == want, f"matmul {x} @ {w} -> {want}", json.dumps(j)[:400])
        check(j["rule"] == "inputs as they are", f"matmul {x} @ {w}: no redistribution")
        chosen = [c for c in j["candidates"] if c["chosen"]]
        check(len(chosen) == 1 and chosen[0]["cost_us"] == 0, f"matmul {x} @ {w}: cost 0")
        check(chosen[0]["inputs"] == [x, w], f"matmul {x} @ {w}: inputs kept", json.dumps(chosen))

# Costed choices: the chosen is the cheapest valid candidate, lowest number on ties.
cases = [
    ("4", "matmul", ["S(0):16,8", "S(0):8,12"]),
    ("4", "matmul", ["S(0):4096,8", "S(0):8,12"]),
    ("2x2", "matmul", ["S(1),S(0):6,5", "S(0),P:5,3"]),
    ("2x4", "matmul_t", ["R,S(1):16,32", "S(0),R:64,32"]),
    ("2x2x2", "bmm", ["S(1),S(2),P:4,6,8", "S(0),R,S(2):4,8,2"]),
]
for mesh, op, inputs in cases:
    args = ["--mesh", mesh, "--op", op]
    for i in inputs:
        args += ["--input", i]
    j = explain_json(*args)
    if not j:
        continue
    valid = [c for c in j["candidates"] if c["valid"]]
    chosen = [c for c in valid if c["chosen"]]
    check(len(chosen) == 1, f"{op} {inputs}: one chosen")
    if chosen and j["rule"] == "cheapest":
        best = min(c["cost_us"] for c in valid)
        ties = sorted(c["index"] for c in valid if c["cost_us"] == best)
        check(chosen[0]["cost_us"] == best and chosen[0]["index"] == ties[0],
              f"{op} {inputs}: the chosen is the first cheapest", json.dumps(chosen))
    check(all(len(c["inputs"]) == len(inputs) for c in j["candidates"]), f"{op}: every input listed")

# The large-x case keeps x and gathers w.
j = explain_json("--mesh", "4", "--op", "matmul", "--input", "S(0):4096,8", "--input", "S(0):8,12")
if j:
    c = [c for c in j["candidates"] if c["chosen"]][0]
    check(c["inputs"] == ["S(0)", "R"] and j["output"] == "S(0)", "large x: gather w", json.dumps(c))

# Forced output: the listed costs include moving the output.
j = explain_json("--mesh", "4", "--op", "matmul", "--input", "S(1):16,8", "--input", "S(0):8,12", "--out", "R")
if j:
    check(j["output"] == "R" and j["rule"] == "cheapest", "forced R", json.dumps(j)[:300])
    c = [c for c in j["candidates"] if c["chosen"]][0]
    check(c["cost_us"] > 0, "forced R costs a collective")

# --einsum and --all.
rc, out, err = run("--mesh", "4", "--einsum", "ij->ij", "--input", "S(1):8,8", "--all")
check(rc == 0 and "P#" not in out, "einsum without partial rules", out + err)
j = explain_json("--mesh", "4", "--einsum", "ij->i", "--input", "S(1):8,8", "--all")
if j:
    check(j["output"] == "P(sum)", "sum over a sharded dim is P(sum)", json.dumps(j)[:300])
j = explain_json("--mesh", "2x2", "--op", "matmul", "--input", "P(max),R:8,8", "--input", "R,P(sum):8,8", "--all")
if j:
    bad = [c for c in j["candidates"] if not c["valid"]]
    check(bad and all(c["why"] for c in bad), "--all lists invalid candidates with a reason", json.dumps(bad)[:300])

# The other operators of the catalog: the propagations the typed API static_asserts.
for args, want in [
    (["--op", "add", "--input", "S(0):8,4", "--input", "S(0):8,4"], "S(0)"),
    (["--op", "add", "--input", "S(1):8,4", "--input", "S(0):4"], "S(1)"),         # broadcast bias
    (["--op", "relu", "--input", "P(max):8,4"], "P(max)"),                        # monotone
    (["--op", "sum", "--input", "S(1):8,4"], "P(sum)"),
    (["--op", "max", "--input", "S(1):8,4"], "P(max)"),
    (["--op", "mean", "--input", "S(1):8,4"], "P(avg)"),                          # 4 over 4: even
    (["--op", "embedding", "--input", "S(0):16,8", "--input", "R:3,5"], "P(sum)"),  # rowwise
    (["--op", "embedding", "--input", "S(1):16,8", "--input", "R:3,5"], "S(2)"),    # colwise
    (["--op", "transpose", "--input", "S(0):8,4"], "S(1)"),
]:
    j = explain_json("--mesh", "4", *args)
    if j:
        check(j["output"] == want and j["rule"] == "inputs as they are", f"{args} -> {want}",
              json.dumps(j)[:300])
# Not allowed: a mean over an uneven dim is not P(avg); softmax's dim and cat's dim are
# never sharded.
for args, not_want in [
    (["--op", "mean", "--input", "S(1):8,6"], "P(avg)"),
    (["--op", "softmax", "--input", "S(1):8,4"], "S(1)"),
    (["--op", "cat", "--input", "S(0):8,4", "--input", "S(0):8,4"], "S(0)"),
]:
    j = explain_json("--mesh", "4", *args)
    if j:
        check(j["output"] != not_want and j["rule"] == "cheapest", f"{args} is not {not_want}",
              json.dumps(j)[:300])

# The text form names the choice.
rc, out, err = run("--mesh", "2x4", "--op", "matmul_t", "--input", "S(0),R:16,32", "--input", "R,S(0):64,32")
check(rc == 0 and "chosen: #" in out and "S(0),S(1)" in out and "takes the inputs as they are" in out,
      "text output", out + err)

# Bad input: exit 2, empty stdout, the bad value named.
for args, needle in [
    (["--mesh", "4", "--op", "nope", "--input", "R:4,4"], "nope"),
    (["--mesh", "4", "--op", "matmul", "--input", "R:4,4"], "takes 2 inputs"),
    (["--mesh", "4", "--op", "matmul", "--input", "R:4,4", "--input", "R:5,4"], "(4 and 5)"),
    (["--mesh", "4", "--op", "matmul", "--input", "R4,4", "--input", "R:4,4"], "PLACEMENTS:SHAPE"),
    (["--mesh", "4", "--op", "matmul", "--input", "S(2):4,4", "--input", "R:4,4"], "S(2)"),
    (["--mesh", "4", "--op", "matmul", "--input", "R:4,4", "--input", "R:4,4", "--out", "S(3)"], "S(3)"),
    (["--mesh", "4", "--op", "matmul", "--einsum", "ij->i", "--input", "R:4,4"], "exactly one"),
    (["--mesh", "4", "--einsum", "ij-i", "--input", "R:4,4"], "ij-i"),
    (["--mesh", "4", "--einsum", "ij->i", "--input", "R:4"], "gives it 2"),
    (["--mesh", "0", "--op", "matmul", "--input", "R:4,4", "--input", "R:4,4"], "0"),
    (["--mesh", "4", "--op", "matmul", "--input", "R:4,4", "--input", "R:4,4", "--dtype", "f16"], "f16"),
    (["--mesh", "4", "--op", "softmax", "--input", "R:4"], "at least 2 dims"),
    (["--mesh", "4", "--op", "add", "--input", "R:4,3", "--input", "R:4,5"], "3"),
]:
    rc, out, err = run(*args)
    check(rc == 2 and out == "" and needle in err, f"bad input {args} -> exit 2 naming '{needle}'",
          f"rc={rc}\nstdout={out}\nstderr={err}")

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("PASS: explain")
