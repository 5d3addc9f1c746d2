#!/usr/bin/env python3
"""Tests of the spmd-plan command-line tool (python3, standard library only).

usage: test_spmd_plan.py SPMD_PLAN GROUP [GOLDEN_DIR]

Groups (one meson test each):
  golden  `layout --json` against hand-computed answers in GOLDEN_DIR (parsed JSON, key order)
  model   `layout` (JSON, table and grid) against an independent Python model of DTensor's
          chunk rule, over a fixed pseudo-random set of layouts; plus a tiling check
  text    the readable output: exact text for one case, the grid's shape for the others
  errors  bad placements, shard dims, counts, partials, orders, meshes, shapes: exit 2,
          empty stdout, and stderr naming the bad value
  usage   --help, unknown options and subcommands, missing options

Every failed check is printed with its command line, exit code, stdout and stderr; the exit
status is 1 when any check failed.
"""

import itertools
import json
import os
import random
import re
import shlex
import subprocess
import sys

TOOL = None
GOLDEN_DIR = None
failures = []
checks = 0


# ---------------------------------------------------------------------------
# Running the tool and reporting
# ---------------------------------------------------------------------------

class Result:
    def __init__(self, args, proc):
        self.args = args
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def describe(self):
        return (f"  command: {shlex.join(['spmd-plan'] + self.args)}\n"
                f"  exit code: {self.rc}\n"
                f"  stdout:\n{indent(self.out)}\n"
                f"  stderr:\n{indent(self.err)}")


def indent(text, prefix="    | "):
    if not text:
        return prefix + "(empty)"
    return "\n".join(prefix + line for line in text.rstrip("\n").split("\n"))


def run(args):
    proc = subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=60)
    return Result(args, proc)


def layout_args(mesh, shape, placements, *extra):
    return ["layout", "--mesh", mesh, "--shape", shape, "--placements", placements, *extra]


def check(ok, what, result=None, detail=""):
    global checks
    checks += 1
    if ok:
        return True
    msg = f"FAIL: {what}"
    if detail:
        msg += f"\n{indent(detail, '  ')}"
    if result is not None:
        msg += "\n" + result.describe()
    failures.append(msg)
    return False


def parse_json_output(r):
    """stdout must be exactly one JSON object; returns it with key order kept, or None."""
    try:
        obj, end = json.JSONDecoder(object_pairs_hook=list).raw_decode(r.out)
    except json.JSONDecodeError as e:
        check(False, f"stdout is not JSON ({e})", r)
        return None
    if not check(r.out[end:].strip() == "", "stdout holds more than one JSON value", r):
        return None
    if not check(isinstance(obj, list), "stdout is not a JSON object", r):
        return None
    return obj


def pairs_to_dict(x):
    """Undo object_pairs_hook=list: lists of (key, value) pairs back into dicts."""
    if isinstance(x, list) and x and all(isinstance(p, tuple) and len(p) == 2 for p in x):
        return {k: pairs_to_dict(v) for k, v in x}
    if isinstance(x, list):
        return [pairs_to_dict(v) for v in x]
    return x


def check_key_order(r, pairs):
    keys = [k for k, _ in pairs]
    check(keys == ["mesh", "shape", "placements", "ranks"],
          f"top-level keys are {keys}, not mesh, shape, placements, ranks in that order", r)
    for k, v in pairs:
        if k != "ranks" or not isinstance(v, list):
            continue
        for entry in v:
            rk = [p[0] for p in entry] if isinstance(entry, list) else None
            if not check(rk == ["rank", "coord", "local_shape", "offset"],
                         f"rank entry keys are {rk}, not rank, coord, local_shape, offset", r):
                break


def run_json(mesh, shape, placements):
    """Run `layout --json`, check exit 0 / empty stderr / one object / key order; return dict."""
    r = run(layout_args(mesh, shape, placements, "--json"))
    if not check(r.rc == 0, "exit code is not 0", r):
        return r, None
    check(r.err == "", "stderr is not empty on success", r)
    pairs = parse_json_output(r)
    if pairs is None:
        return r, None
    check_key_order(r, pairs)
    return r, pairs_to_dict(pairs)


# ---------------------------------------------------------------------------
# An independent model of the semantics (DTensor's chunk rule, nested shard order)
# ---------------------------------------------------------------------------

def chunk(size, n, r):
    """torch.chunk: every piece but the tail has ceil(size/n); past the end -> (0, size)."""
    full = -(-size // n)
    start = full * r
    if start >= size:
        return 0, size
    return min(size, start + full) - start, start


TOKEN = re.compile(r"^\s*(?:(R)|S\(\s*(-?\d+)\s*\)(?:\s*\[\s*(\d+)\s*\])?"
                   r"|P(?:\(\s*(sum|avg|max|min|product)\s*\))?)\s*$")


def model(mesh, shape, placements_text):
    """Expected JSON for a *valid* layout, computed without the tool."""
    rank = len(shape)
    kinds = []  # ("R",) | ("S", dim, order or None) | ("P", op)
    for tok in placements_text.split(","):
        m = TOKEN.match(tok)
        assert m, f"model: test generated an invalid token {tok!r}"
        if m.group(1):
            kinds.append(("R",))
        elif m.group(2) is not None:
            d = int(m.group(2))
            kinds.append(("S", d + rank if d < 0 else d,
                          int(m.group(3)) if m.group(3) is not None else None))
        else:
            kinds.append(("P", m.group(4) or "sum"))
    # per tensor dim: mesh dims in split order; explicit when not the left-to-right order
    order, explicit = {}, {}
    for d in range(rank):
        ms = [m for m, k in enumerate(kinds) if k[0] == "S" and k[1] == d]
        if ms and kinds[ms[0]][2] is not None:
            ms_sorted = sorted(ms, key=lambda m: kinds[m][2])
        else:
            ms_sorted = ms
        order[d] = ms_sorted
        explicit[d] = ms_sorted != ms
    names = []
    for m, k in enumerate(kinds):
        if k[0] == "R":
            names.append("R")
        elif k[0] == "P":
            names.append(f"P({k[1]})")
        else:
            pos = order[k[1]].index(m)
            names.append(f"S({k[1]})[{pos}]" if explicit[k[1]] else f"S({k[1]})")
    ranks = []
    for r, coord in enumerate(itertools.product(*[range(n) for n in mesh])):
        local, offset = [], []
        for d in range(rank):
            size, off = shape[d], 0
            for m in order[d]:
                piece, start = chunk(size, mesh[m], coord[m])
                size = piece
                off = shape[d] if piece == 0 else off + start
            local.append(size)
            offset.append(off)
        ranks.append({"rank": r, "coord": list(coord), "local_shape": local, "offset": offset})
    return {"mesh": list(mesh), "shape": list(shape), "placements": names, "ranks": ranks}


def model_grid(expected):
    """{(row label, col label): cell text} as visualize_sharding would print it."""
    shape = expected["shape"]
    cells = {}
    for e in expected["ranks"]:
        if any(s == 0 for s in e["local_shape"]):
            continue
        spans = [(o, o + s - 1) for o, s in zip(e["offset"], e["local_shape"])]
        if len(shape) == 0:
            row, col = (0, 0), (0, 0)
        elif len(shape) == 1:
            row, col = (0, 0), spans[0]
        else:
            row, col = spans
        key = (f"Row {row[0]}-{row[1]}", f"Col {col[0]}-{col[1]}")
        cells.setdefault(key, []).append(str(e["rank"]))
    return {k: ", ".join(v) for k, v in cells.items()}


def parse_table(text, first_header):
    """Split a tabulate-'simple' table that starts at the line whose first cell is
    `first_header` (or whose line starts with whitespace then `first_header`) into rows of
    cells, using the dash line to find the columns. Returns (header, rows) or None."""
    lines = text.split("\n")
    for i in range(len(lines) - 1):
        if re.fullmatch(r"[- ]*-[- ]*", lines[i + 1] or " ") and first_header in lines[i]:
            dash = lines[i + 1]
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", dash)]
            def cut(line):
                return [line[a:b if k + 1 < len(spans) else None].strip()
                        for k, (a, b) in enumerate(spans)]
            rows = []
            for line in lines[i + 2:]:
                if not line.strip():
                    break
                rows.append(cut(line))
            return cut(lines[i]), rows
    return None


def grid_of(text):
    """{(row label, col label): cell} from the tool's grid, or None when there is none."""
    t = parse_table(text, "Col ")
    if t is None:
        return None
    header, rows = t
    out = {}
    for row in rows:
        for c in range(1, len(header)):
            if row[c]:
                out[(row[0], header[c])] = row[c]
    return out


def fmt_list(v):
    return "[" + ", ".join(str(x) for x in v) + "]"


# ---------------------------------------------------------------------------
# golden
# ---------------------------------------------------------------------------

# (golden file, mesh, shape, placements) — the files hold answers worked out by hand from
# the chunk rule (see the comments), not copied from the tool.
GOLDEN = [
    # PyTorch's worked values: ranks 0, 2, 3, 5 -> [2,5]@[0,0], [1,5]@[4,0], [0,5]@[10,0],
    # [2,5]@[7,0]; zero-size shards report the global extent as offset.
    ("mesh2x4_shape10x5_S0_S0.json", "2x4", "10,5", "S(0),S(0)"),
    # 4 over (2,3) -> 1,1,0,1,1,0
    ("mesh2x3_shape4_S0_S0.json", "2x3", "4", "S(0),S(0)"),
    # (9,5) over (2,2) -> rows 3,2,2,2
    ("mesh2x2_shape9x5_S0_S0.json", "2x2", "9,5", "S(0),S(0)"),
    # 5 over 4 -> 2,2,1,0 ; 6 over 4 -> 2,2,2,0
    ("mesh4_shape5_S0.json", "4", "5", "S(0)"),
    ("mesh4_shape6_S0.json", "4", "6", "S(0)"),
    # dim 1 split by mesh dims 2, then 0, then 1: 13 -> 7|6 -> 4|3, 3|3 -> 2|2, 2|1, 2|1, 2|1
    ("mesh2x2x2_shape3x13_S1o1_S1o2_S1o0.json", "2x2x2", "3,13", "S(1)[1],S(1)[2],S(1)[0]"),
    # dim 0 default order (no brackets), dim 1 split by mesh dim 2 then 1: 6 -> 3|3 -> 2|1
    ("mesh2x2x2_shape4x6_S0_S1o1_S1o0.json", "2x2x2", "4,6", "S(0),S(1)[1],S(1)[0]"),
    # negative dim normalised, partial keeps the block of the shard
    ("mesh2x2_shape4x6_Sm1_Pmax.json", "2x2", "4,6", "S(-1),P(max)"),
    # explicit default order prints without brackets; whitespace is tolerated
    ("mesh2x2_shape8_S0o0_S0o1.json", "2x2", "8", " S(0)[0] , S( 0 )[ 1 ] "),
    # reversed order: mesh dim 1 splits first -> offsets 0,4,2,6
    ("mesh2x2_shape8_S0o1_S0o0.json", "2x2", "8", "S(0)[1],S(0)[0]"),
    # 0-d tensor, bare P = P(sum)
    ("mesh2_scalar_P.json", "2", "", "P"),
    # empty tensor: every piece is empty, offset = global extent 0
    ("mesh3_shape0x2_S0.json", "3", "0,2", "S(0)"),
]


def group_golden():
    for name, mesh, shape, placements in GOLDEN:
        with open(os.path.join(GOLDEN_DIR, name)) as f:
            expected = json.load(f)
        r, got = run_json(mesh, shape, placements)
        if got is None:
            continue
        check(got == expected, f"{name}: JSON differs from the golden answer", r,
              json_diff(expected, got))
        # the golden answers agree with the model too (guards the model itself)
        check(model([int(x) for x in mesh.split("x")],
                    [int(x) for x in shape.split(",")] if shape else [], placements) == expected,
              f"{name}: the Python model disagrees with the golden answer")


def json_diff(expected, got):
    lines = []
    for k in ("mesh", "shape", "placements"):
        if expected.get(k) != got.get(k):
            lines.append(f"{k}: expected {expected.get(k)}, got {got.get(k)}")
    er, gr = expected.get("ranks", []), got.get("ranks", [])
    if len(er) != len(gr):
        lines.append(f"ranks: expected {len(er)} entries, got {len(gr)}")
    for e, g in zip(er, gr):
        if e != g:
            lines.append(f"expected {json.dumps(e)}\n     got {json.dumps(g)}")
    if set(got) != set(expected):
        lines.append(f"keys: expected {sorted(expected)}, got {sorted(got)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------

def model_cases():
    rnd = random.Random(20240611)
    meshes = [[1], [4], [3], [2, 3], [3, 2], [2, 2, 2], [1, 4], [3, 1, 2]]
    shapes = [[], [5], [6], [0], [7, 3], [9, 5], [4, 13], [3, 1, 5], [2, 0, 7]]
    cases = []
    for mesh in meshes:
        for shape in shapes:
            rank = len(shape)
            for _ in range(4):
                op = rnd.choice(["sum", "avg", "max", "min", "product"])
                toks = []
                for _m in mesh:
                    choice = rnd.random()
                    if rank and choice < 0.6:
                        toks.append(["S", rnd.randrange(-rank, rank)])
                    elif choice < 0.8:
                        toks.append(["R"])
                    else:
                        toks.append(["P", op])
                # an explicit (random) shard order for each tensor dim sharded twice or more
                if rnd.random() < 0.5:
                    for d in range(rank):
                        ms = [m for m, t in enumerate(toks)
                              if t[0] == "S" and (t[1] + rank) % rank == d]
                        if len(ms) >= 2:
                            perm = list(range(len(ms)))
                            rnd.shuffle(perm)
                            for m, pos in zip(ms, perm):
                                toks[m].append(pos)
                text = ",".join(
                    "R" if t[0] == "R" else
                    f"P({t[1]})" if t[0] == "P" else
                    f"S({t[1]})" + (f"[{t[2]}]" if len(t) > 2 else "")
                    for t in toks)
                cases.append((mesh, shape, text))
    return sorted(set((tuple(m), tuple(s), t) for m, s, t in cases))


def group_model():
    for mesh, shape, text in model_cases():
        mesh_s = "x".join(map(str, mesh))
        shape_s = ",".join(map(str, shape))
        expected = model(list(mesh), list(shape), text)
        r, got = run_json(mesh_s, shape_s, text)
        if got is None:
            continue
        check(got == expected, f"layout --json differs from the model", r,
              json_diff(expected, got))
        check_tiling(r, mesh, shape, text, got)

        # readable mode: the table lists the same blocks; the grid is the model's grid
        t = run(layout_args(mesh_s, shape_s, text))
        if not check(t.rc == 0 and t.err == "", "text mode failed", t):
            continue
        table = parse_table(t.out, "rank")
        if check(table is not None, "text mode has no rank table", t):
            header, rows = table
            check(header == ["rank", "coord", "local_shape", "offset"],
                  f"table header is {header}", t)
            want = [[str(e["rank"]), fmt_list(e["coord"]), fmt_list(e["local_shape"]),
                     fmt_list(e["offset"])] for e in expected["ranks"]]
            check(rows == want, "table rows differ from the model", t,
                  f"expected {want}\ngot      {rows}")
        grid = grid_of(t.out)
        if len(shape) <= 2:
            want = model_grid(expected)
            if want:
                check(grid == want, "grid differs from the model", t,
                      f"expected {want}\ngot      {grid}")
            else:
                check(grid is None and "every block is empty" in t.out,
                      "an all-empty tensor should print no grid but say so", t)
        else:
            check(grid is None and "Col " not in t.out, "a >2-d tensor printed a grid", t)


def check_tiling(r, mesh, shape, text, got):
    """Shards tile the tensor: every element is held by exactly prod(non-shard mesh dims)
    ranks (for tensors small enough to enumerate)."""
    kinds = [tok.strip()[0] for tok in text.split(",")]
    copies = 1
    for m, k in enumerate(kinds):
        if k != "S":
            copies *= mesh[m]
    count = {}
    for e in got["ranks"]:
        for idx in itertools.product(*[range(o, o + s) for o, s in
                                        zip(e["offset"], e["local_shape"])]):
            count[idx] = count.get(idx, 0) + 1
    elements = list(itertools.product(*[range(n) for n in shape]))
    bad = [i for i in elements if count.get(i, 0) != copies]
    extra = [i for i in count if i not in set(elements)]
    check(not bad and not extra,
          f"blocks do not tile the tensor ({copies} copies of each element expected)", r,
          f"wrong counts at {bad[:5]}, outside the tensor: {extra[:5]}")


# ---------------------------------------------------------------------------
# text
# ---------------------------------------------------------------------------

TEXT_2x4 = """\
mesh 2x4 (8 ranks), shape [10, 5], placements S(0),S(0)

rank  coord   local_shape  offset
----  ------  -----------  -------
   0  [0, 0]  [2, 5]       [0, 0]
   1  [0, 1]  [2, 5]       [2, 0]
   2  [0, 2]  [1, 5]       [4, 0]
   3  [0, 3]  [0, 5]       [10, 0]
   4  [1, 0]  [2, 5]       [5, 0]
   5  [1, 1]  [2, 5]       [7, 0]
   6  [1, 2]  [1, 5]       [9, 0]
   7  [1, 3]  [0, 5]       [10, 0]

         Col 0-4
-------  -------
Row 0-1  0
Row 2-3  1
Row 4-4  2
Row 5-6  4
Row 7-8  5
Row 9-9  6
"""


def text_case(mesh, shape, placements):
    r = run(layout_args(mesh, shape, placements))
    check(r.rc == 0, "exit code is not 0", r)
    check(r.err == "", "stderr is not empty on success", r)
    return r


def group_text():
    r = text_case("2x4", "10,5", "S(0),S(0)")
    check(r.out == TEXT_2x4, "2x4 / 10,5 / S(0),S(0): text output differs", r,
          "expected:\n" + indent(TEXT_2x4))

    # 1-d: one row of column ranges; rank 3's empty block is left out
    r = text_case("4", "5", "S(0)")
    check(grid_of(r.out) == {("Row 0-0", "Col 0-1"): "0", ("Row 0-0", "Col 2-3"): "1",
                             ("Row 0-0", "Col 4-4"): "2"}, "1-d grid", r)
    check(re.search(r"^Row 0-0 +0 +1 +2$", r.out, re.M) is not None,
          "1-d grid row is not 'Row 0-0  0  1  2'", r)

    # 2-d, sharded on both dims, replicas in one cell, comma-separated
    r = text_case("2x2x2", "4,6", "S(0),R,S(1)")
    check(grid_of(r.out) == {("Row 0-1", "Col 0-2"): "0, 2", ("Row 0-1", "Col 3-5"): "1, 3",
                             ("Row 2-3", "Col 0-2"): "4, 6", ("Row 2-3", "Col 3-5"): "5, 7"},
          "2-d grid with replicas", r)
    check(re.search(r"^ +Col 0-2 +Col 3-5$", r.out, re.M) is not None,
          "grid header is not 'Col 0-2  Col 3-5'", r)

    # explicit order moves the blocks: mesh dim 1 splits first
    r = text_case("2x2", "8", "S(0)[1],S(0)[0]")
    check(grid_of(r.out) == {("Row 0-0", "Col 0-1"): "0", ("Row 0-0", "Col 2-3"): "2",
                             ("Row 0-0", "Col 4-5"): "1", ("Row 0-0", "Col 6-7"): "3"},
          "1-d grid with an explicit shard order", r)
    check("placements S(0)[1],S(0)[0]" in r.out, "summary line shows the explicit order", r)

    # 0-d: one cell with every rank
    r = text_case("3", "", "P(avg)")
    check(grid_of(r.out) == {("Row 0-0", "Col 0-0"): "0, 1, 2"}, "0-d grid", r)
    check("placements P(avg)" in r.out, "summary line names P(avg)", r)

    # 3-d: the table, no grid
    r = text_case("2", "2,3,4", "S(-1)")
    check("Col " not in r.out and "Row " not in r.out, "no grid for a 3-d tensor", r)
    check(re.search(r"^ +1 +\[1\] +\[2, 3, 2\] +\[0, 0, 2\]$", r.out, re.M) is not None,
          "3-d table row for rank 1", r)
    check("placements S(2)" in r.out, "summary line shows the normalised dim", r)

    # all blocks empty
    r = text_case("2", "0", "S(0)")
    check(grid_of(r.out) is None and "every block is empty" in r.out,
          "empty tensor prints no grid but says so", r)


# ---------------------------------------------------------------------------
# errors and usage
# ---------------------------------------------------------------------------

# (args, strings stderr must contain)
ERRORS = [
    # unparsable tokens
    (layout_args("2x4", "10,5", "S(x),R"), ["'S(x)'", "position 0"]),
    (layout_args("2x4", "10,5", "R,Q"), ["'Q'", "position 1"]),
    (layout_args("2x4", "10,5", "P(foo),R"), ["'P(foo)'", "'foo'"]),
    (layout_args("2x4", "10,5", "R,S(0)[-1]"), ["'S(0)[-1]'"]),
    (layout_args("2x4", "10,5", "S(0,R"), ["'S(0'"]),
    (layout_args("2x4", "10,5", "R R,R"), ["'R R'"]),
    (layout_args("2x4", "10,5", "S(0),"), ["''", "position 1"]),
    (layout_args("2x4", "10,5", "s(0),R"), ["'s(0)'"]),
    (layout_args("2x4", "10,5", "S(99999999999),R"), ["'S(99999999999)'"]),
    # shard dim out of range
    (layout_args("2x4", "10,5", "R,S(2)"), ["'S(2)'", "mesh dim 1", "2 dims"]),
    (layout_args("2x4", "10,5", "S(-3),R"), ["'S(-3)'", "mesh dim 0"]),
    (layout_args("2", "", "S(0)"), ["'S(0)'", "0 dims"]),
    # placement count mismatch
    (layout_args("2x4", "10,5", "S(0)"), ["'S(0)'", "'2x4'"]),
    (layout_args("2", "10,5", "S(0),R"), ["'S(0),R'", "'2'"]),
    (layout_args("2", "4", ""), ["''", "'2'"]),
    (layout_args("1x1x1x1x1x1x1x1", "4", "R,R,R,R,R,R,R,R,R"), ["'R,R,R,R,R,R,R,R,R'"]),
    # mixed partial ops
    (layout_args("2x4", "10,5", "P(sum),P(max)"), ["'P(max)'", "'P(sum)'"]),
    (layout_args("2x2x2", "10,5", "P,S(0),P(avg)"), ["'P(avg)'"]),
    # bad shard order
    (layout_args("2x4", "10,5", "S(0)[0],S(0)[0]"), ["'S(0)[0]'", "mesh dim 1"]),
    (layout_args("2x4", "10,5", "S(0)[1],S(0)"), ["'S(0)[1]'"]),
    (layout_args("2x4", "10,5", "S(0)[2],S(0)[0]"), ["'S(0)[2]'"]),
    (layout_args("2x4", "10,5", "S(0)[1],S(1)[0]"), ["'S(0)[1]'"]),
    # bad mesh
    (layout_args("2x0", "10,5", "R,R"), ["'2x0'", "'0'"]),
    (layout_args("2xx4", "10,5", "R,R"), ["'2xx4'"]),
    (layout_args("", "10,5", "R"), ["mesh ''"]),
    (layout_args("ax2", "10,5", "R,R"), ["'ax2'", "'a'"]),
    (layout_args("-2", "10,5", "R"), ["'-2'"]),
    (layout_args("1x1x1x1x1x1x1x1x1", "10,5", "R"), ["'1x1x1x1x1x1x1x1x1'"]),
    (layout_args("2048x1024", "10,5", "R,R"), ["'2048x1024'"]),
    # bad shape
    (layout_args("2", "-1", "R"), ["'-1'"]),
    (layout_args("2", "a", "R"), ["'a'"]),
    (layout_args("2", "4,,5", "R"), ["'4,,5'"]),
    (layout_args("2", "4,5x", "R"), ["'5x'"]),
    (layout_args("2", "1,1,1,1,1,1,1,1,1", "R"), ["'1,1,1,1,1,1,1,1,1'"]),
    (layout_args("2", "99999999999999999999", "R"), ["'99999999999999999999'"]),
]

USAGE_ERRORS = [
    (layout_args("2x4", "10,5", "R,R", "--bogus"), ["--bogus"]),
    (["layout", "--mesh", "2x4", "--placements", "R,R"], ["--shape"]),
    (["layout", "--shape", "4", "--placements", "R"], ["--mesh"]),
    (["layout", "--mesh", "2", "--shape", "4"], ["--placements"]),
    (layout_args("2", "4", "R", "extra"), ["extra"]),
    (["layout", "--mesh"], ["--mesh"]),
    (["bogus"], ["bogus"]),
    ([], ["subcommand"]),
]


def check_error(args, needles):
    r = run(args)
    check(r.rc == 2, "exit code is not 2", r)
    check(r.out == "", "stdout is not empty on an error", r)
    check(r.err.startswith("spmd-plan: "), "stderr does not start with 'spmd-plan: '", r)
    for n in needles:
        check(n in r.err, f"stderr does not name {n}", r)
    check(not re.search(r"terminate|Aborted|Segmentation|core dumped", r.err),
          "the tool crashed", r)


def group_errors():
    for args, needles in ERRORS:
        check_error(args, needles)
        if "--json" not in args:
            check_error(args + ["--json"], needles)


def group_usage():
    for args, needles in USAGE_ERRORS:
        check_error(args, needles)
    r = run(["--help"])
    check(r.rc == 0 and "layout" in r.out and r.err == "", "spmd-plan --help", r)
    r = run(["layout", "--help"])
    check(r.rc == 0 and all(o in r.out for o in ("--mesh", "--shape", "--placements", "--json"))
          and r.err == "", "spmd-plan layout --help", r)
    r = run(layout_args("2", "4", "R", "--help"))
    check(r.rc == 0 and "--placements" in r.out, "--help after options", r)


GROUPS = {"golden": group_golden, "model": group_model, "text": group_text,
          "errors": group_errors, "usage": group_usage}


def main():
    global TOOL, GOLDEN_DIR
    if len(sys.argv) < 3 or sys.argv[2] not in GROUPS:
        print(__doc__, file=sys.stderr)
        return 2
    TOOL = sys.argv[1]
    GOLDEN_DIR = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "golden")
    GROUPS[sys.argv[2]]()
    for f in failures:
        print(f, end="\n\n")
    print(f"{sys.argv[2]}: {checks - len(failures)}/{checks} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
