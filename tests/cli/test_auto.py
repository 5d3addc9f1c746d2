#!/usr/bin/env python3
"""Tests of `spmd-plan auto` (python3, standard library only).

usage: test_auto.py SPMD_PLAN

- spmd-train's mlp as a graph file on 2x4 and 4: JSON fields in the stated order, every tensor
  placed, step = compute + communication, the search no slower than any hand-written plan;
- the replicate plan's compute is the step's FLOPs, counted here from the shapes alone, at
  the default rate (no communication);
- --fix: pinning the search's own parameter and data layouts reproduces its step; pinning
  Megatron's costs at least as much; the operators may be listed out of order;
- --memory: below every assignment, exit 2 with the least memory that fits; that budget then
  succeeds within it;
- bad input (an unknown operator, shapes that do not fit, a cycle, a tensor no operator makes,
  a loss that is not a tensor, not JSON, --fix naming nothing) exits 2 with an empty stdout
  and a message naming the problem.
"""
import json
import os
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
failures = []

MLP = {"tensors": {"x": [16, 32], "w1": [64, 32], "b1": [64], "w2": [16, 64], "b2": [16]},
       "params": ["w1", "b1", "w2", "b2"],
       "ops": [{"op": "matmul_t", "in": ["x", "w1"], "out": "h"},
               {"op": "add", "in": ["h", "b1"], "out": "hb"},
               {"op": "relu", "in": ["hb"], "out": "a"},
               {"op": "matmul_t", "in": ["a", "w2"], "out": "z"},
               {"op": "add", "in": ["z", "b2"], "out": "y"},
               {"op": "sum", "in": ["y"], "out": "loss"}],
       "loss": "loss"}


def check(ok, what, detail=""):
    if not ok:
        failures.append(f"FAILED: {what}\n{detail}")


def write(graph, d, name="g.json"):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(graph if isinstance(graph, str) else json.dumps(graph))
    return path


def run(*args):
    p = subprocess.run([TOOL, "auto", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def auto_json(*args):
    rc, out, err = run(*args, "--json")
    check(rc == 0, f"exit 0 for {args}", err)
    return json.loads(out, object_pairs_hook=lambda kv: kv) if rc == 0 else None


def scaled(k):
    """The mlp with every size times k."""
    g = json.loads(json.dumps(MLP))
    g["tensors"] = {n: [s * k for s in shape] for n, shape in g["tensors"].items()}
    return g


def flops(g):
    """3x the forward's FLOPs: products 2mnk, adds and relu one per element, the sum 2 per element."""
    t = {n: list(s) for n, s in g["tensors"].items()}
    total = 0
    for o in g["ops"]:
        a = t[o["in"][0]]
        if o["op"] == "matmul_t":
            w = t[o["in"][1]]
            t[o["out"]] = [a[0], w[0]]
            total += 2 * a[0] * w[0] * a[1]
        elif o["op"] in ("add", "relu"):
            t[o["out"]] = a
            total += a[0] * a[1]
        elif o["op"] == "sum":
            t[o["out"]] = a[:-1]
            total += 2 * a[0] * a[1]
    return 3 * total


with tempfile.TemporaryDirectory() as d:
    for k, mesh in ((1, "2x4"), (16, "2x4"), (16, "4")):
        graph = scaled(k)
        path = write(graph, d)
        pairs = auto_json("--mesh", mesh, "--graph", path)
        if pairs is None:
            continue
        check([p[0] for p in pairs] == ["mesh", "tensors", "compute_s", "comm_s", "step_s", "memory_bytes", "baselines"],
              "the JSON's fields in order", str([p[0] for p in pairs]))
        j = {p[0]: p[1] for p in pairs}
        tensors = dict(j["tensors"])
        names = list(graph["tensors"]) + [o["out"] for o in graph["ops"]]
        check(sorted(tensors) == sorted(names), f"every tensor placed on {mesh}", str(tensors))
        check(all(len(p) == len(mesh.split("x")) for p in tensors.values()), "a placement per mesh dim", str(tensors))
        check(abs(j["step_s"] - (j["compute_s"] + j["comm_s"])) <= 1e-12 * j["step_s"], "step = compute + comm", str(j))
        base = {b[0]: dict(b[1]) for b in j["baselines"]}
        check(sorted(base) == sorted(["replicate", "fsdp", "megatron"] + (["fsdp_tp"] if "x" in mesh else [])),
              f"the hand-written plans on {mesh}", str(base))
        for name, b in base.items():
            check(j["step_s"] <= b["step_s"] * (1 + 1e-9), f"{mesh} x{k}: the search no slower than {name}",
                  f"{j['step_s']} against {b['step_s']}")
        want = flops(graph) / 50e9
        check(abs(base["replicate"]["step_s"] - want) <= 1e-9 * want,
              f"x{k}: the replicate plan computes the step's FLOPs whole", f"{base['replicate']['step_s']} against {want}")
        if k == 16:
            check(j["step_s"] < base["replicate"]["step_s"] / 2, f"{mesh} x16: the search splits the work", str(j))
            # pinning the search's own parameter and data layouts costs what it said
            fix = ";".join(f"{n}={','.join(dict(j['tensors'])[n])}" for n in graph["tensors"])
            again = auto_json("--mesh", mesh, "--graph", path, "--fix", fix)
            if again:
                a = dict(again)
                check(abs(a["step_s"] - j["step_s"]) <= 1e-12 * j["step_s"], f"{mesh}: --fix of the search's answer", fix)
                check(dict(a["tensors"])["w1"] == dict(j["tensors"])["w1"], "--fix keeps the pinned layout")
            # Megatron pinned by hand
            rep = ",".join(["R"] * (len(mesh.split("x")) - 1))
            pre = rep + "," if rep else ""
            meg = auto_json("--mesh", mesh, "--graph", path, "--fix", f"w1={pre}S(0);w2={pre}S(1);b1={pre}S(0)")
            if meg:
                m = dict(meg)
                check(m["step_s"] >= j["step_s"] * (1 - 1e-12), f"{mesh}: Megatron pinned no faster than the search")
                check(dict(m["tensors"])["w2"][-1] == "S(1)", "the pin holds", str(m["tensors"]))
    # the operators in another order: the same answer
    shuffled = json.loads(json.dumps(scaled(16)))
    shuffled["ops"] = list(reversed(shuffled["ops"]))
    a = auto_json("--mesh", "2x4", "--graph", write(scaled(16), d, "a.json"))
    b = auto_json("--mesh", "2x4", "--graph", write(shuffled, d, "b.json"))
    if a and b:
        check(dict(a)["step_s"] == dict(b)["step_s"], "the operators' order in the file does not matter")

    # --memory
    path = write(scaled(16), d)
    free = auto_json("--mesh", "2x4", "--graph", path)
    rc, out, err = run("--mesh", "2x4", "--graph", path, "--memory", "1000")
    check(rc == 2 and out == "" and "least memory" in err, "--memory too small exits 2 naming the least", err)
    least = None
    for word in err.split():
        if word.isdigit():
            least = int(word)
    check(least is not None and least > 1000, "the least memory is a number of bytes", err)
    if least and free:
        fit = auto_json("--mesh", "2x4", "--graph", path, "--memory", str(least + 1))
        if fit:
            f = dict(fit)
            check(f["memory_bytes"] <= least + 1, "the least budget is met", str(f))
            check(f["step_s"] >= dict(free)["step_s"], "a budget never speeds the step up")

    # bad input: exit 2, stdout empty, the problem named
    def bad(graph, needle, *extra, mesh="2x4"):
        rc, out, err = run("--mesh", mesh, "--graph", write(graph, d, "bad.json"), *extra)
        check(rc == 2 and out == "" and needle in err, f"exit 2 naming {needle!r}", f"rc {rc}\n{out}\n{err}")

    g = json.loads(json.dumps(MLP))
    g["ops"][2]["op"] = "softplus"
    bad(g, "softplus")
    g = json.loads(json.dumps(MLP))
    g["tensors"]["w2"] = [16, 63]
    bad(g, "inner dims differ")
    g = json.loads(json.dumps(MLP))
    g["ops"][0]["in"] = ["x", "w1"]
    g["ops"][1]["in"] = ["loss", "b1"]  # the sum at the end feeds the add at the start
    bad(g, "cycle")
    g = json.loads(json.dumps(MLP))
    g["ops"][3]["in"] = ["a", "w3"]
    bad(g, "'w3'")
    bad(g, "no producer")
    g = json.loads(json.dumps(MLP))
    g["loss"] = "nothing"
    bad(g, "'nothing'")
    bad("{not json", "not JSON")
    rc, out, err = run("--mesh", "2x4", "--graph", "/dev/null/none.json")
    check(rc == 2 and "regular file" in err, "a missing graph file exits 2", err)
    rc, out, err = run("--mesh", "2x4", "--graph", d)
    check(rc == 2 and "regular file" in err, "a directory as the graph exits 2", err)
    bad(MLP, "'w9'", "--fix", "w9=R,R")
    bad(MLP, "placement", "--fix", "w1=Q,R")
    g = json.loads(json.dumps(MLP))
    g["params"].append("w9")
    bad(g, "w9")
    g = json.loads(json.dumps(MLP))
    g["ops"][4]["out"] = "z"
    bad(g, "'z'")

# --cost: a file of the machine's figures (bench/auto_calibrate writes them)
with tempfile.TemporaryDirectory() as d:
    path = write(scaled(16), d)
    slow = write('{"mesh": [2, 4], "links": [{"alpha_s": 1.0, "beta_s_per_byte": 1e-9}, '
                 '{"alpha_s": 1.0, "beta_s_per_byte": 1e-9}], "flops_per_s": 1e9, "memory_bytes_per_s": 1e10}',
                 d, "slow.json")
    j = auto_json("--mesh", "2x4", "--graph", path, "--cost", slow)
    if j:
        j = dict(j)
        check(j["comm_s"] == 0, "collectives at a second each: none chosen", str(j))
        want = flops(scaled(16)) / 1e9
        rep = dict(dict(j["baselines"])["replicate"])
        check(abs(rep["step_s"] - want) <= 1e-9 * want, "--cost's FLOP rate is used", f"{rep} against {want}")
    for text, needle in (('{"mesh": [4, 2], "links": []}', "mesh"),
                         ('{"mesh": [2, 4], "speed": 1}', "speed"),
                         ('{"mesh": [2, 4], "flops_per_s": -1}', "flops_per_s"),
                         ('{"mesh": [2, 4], "links": [{"alpha_s": 1}]}', "links")):
        rc, out, err = run("--mesh", "2x4", "--graph", path, "--cost", write(text, d, "c.json"))
        check(rc == 2 and out == "" and needle in err, f"a bad cost file exits 2 naming {needle}", err)

# examples/auto/mlp_step.json: what docs/auto.md and the README show is what it prints
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
rc, out, err = run("--mesh", "2x4", "--graph", os.path.join(root, "examples", "auto", "mlp_step.json"))
check(rc == 0, "the example graph runs", err)
if rc == 0:
    first = out.splitlines()[0]
    for doc in ("docs/auto.md", "README.md"):
        with open(os.path.join(root, doc)) as f:
            check(first in f.read(), f"{doc} shows the example's first line", first)
    with open(os.path.join(root, "docs", "auto.md")) as f:
        text = f.read()
    for line in out.splitlines()[1:]:
        check(line in text, "docs/auto.md shows the example's output", line)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("spmd-plan auto: all checks passed")
