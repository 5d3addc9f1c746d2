#!/usr/bin/env python3
"""Pictures as a person sees them: `spmd-plan layout --svg` and `spmd-plan plan --svg` drawn by
a real renderer (librsvg's rsvg-convert), the pixel at the centre of every block checked
against the owner table `spmd-plan layout --json` prints (computed from box_at, not from the
picture): each distinct non-empty block is drawn once, in the colour of the lowest rank that
holds it (Okabe-Ito, rank mod 8), and its labels fit inside it. Then what --svg does to what
is at the name: a directory or socket refused, a full device named, a FIFO, /dev/stdout and a
symbolic link written through.

usage: test_svg.py SPMD_PLAN OUT_DIR
Skips (77) without rsvg-convert.
"""
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pixels import read_png  # noqa: E402

TOOL, OUT = sys.argv[1], sys.argv[2]
PALETTE = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999"]
FONT = 11
FAILS = []
SVG = "{http://www.w3.org/2000/svg}"

if not shutil.which("rsvg-convert"):
    print("SKIP: rsvg-convert is not installed (Debian: librsvg2-bin; .ci/install-deps installs it)")
    sys.exit(77)
os.makedirs(OUT, exist_ok=True)


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def rgb(hexcolour):
    return tuple(int(hexcolour[i:i + 2], 16) for i in (1, 3, 5))


def tool(*args):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{TOOL} {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return p.stdout


def owners(mesh, shape, placements):
    """{(offset, shape): [ranks]} of the non-empty blocks, from spmd-plan layout --json."""
    j = json.loads(tool("layout", "--mesh", mesh, "--shape", shape, "--placements", placements, "--json"))
    blocks = {}
    for r in j["ranks"]:
        if all(e > 0 for e in r["local_shape"]):
            blocks.setdefault((tuple(r["offset"]), tuple(r["local_shape"])), []).append(r["rank"])
    empty = [r["rank"] for r in j["ranks"] if not all(e > 0 for e in r["local_shape"])]
    return blocks, empty


def render(svg):
    png = svg[:-4] + ".png"
    subprocess.run(["rsvg-convert", svg, "-o", png], check=True)
    return read_png(png)


def ints(s):
    return tuple(int(x) for x in s.split(",") if x.strip() != "")


def check_group(root, rows, want, empty, what):
    """The rects under `root` against the owner table `want`."""
    rects = [e for e in root.iter(SVG + "rect") if e.get("data-ranks") is not None]
    texts = [e for e in root.iter(SVG + "text")]
    got = {}
    for r in rects:
        got.setdefault((ints(r.get("data-offset")), ints(r.get("data-shape"))), []).append(r)
    for key, drawn in got.items():
        # A 3-d tensor is drawn as slices: a block spanning several slice ranges appears in each.
        check(len(drawn) == 1 or len(key[0]) == 3, f"{what}: block {key} drawn {len(drawn)} times")
    for key, ranks in want.items():
        # 3-d tensors are drawn once per distinct slice range: the block appears with its full offset.
        if key not in got:
            check(False, f"{what}: block {key} of ranks {ranks} is not drawn")
            continue
        for r in got[key]:
            check(ints(r.get("data-ranks")) == tuple(sorted(ranks)),
                  f"{what}: block {key} says ranks {r.get('data-ranks')}, the table says {sorted(ranks)}")
            x, y, w, h = (float(r.get(k)) for k in ("x", "y", "width", "height"))
            cx, cy = int(x + w / 2), int(y + h / 2)
            pixel = rows[cy][cx]
            expect = rgb(PALETTE[min(ranks) % 8])
            check(all(abs(a - b) <= 2 for a, b in zip(pixel, expect)),
                  f"{what}: pixel ({cx}, {cy}) at the centre of block {key} is {pixel}, rank {min(ranks)}'s colour is {expect}")
            # Its labels start inside it and fit its width (no label runs into a neighbour).
            inside = [t for t in texts if x <= float(t.get("x")) < x + w and y <= float(t.get("y")) - FONT < y + h]
            check(len(inside) >= 2, f"{what}: block {key} has {len(inside)} labels")
            for t in inside:
                width = len(t.text or "") * FONT * 0.64
                check(float(t.get("x")) + width <= x + w + 1,
                      f"{what}: label {t.text!r} ({width:.0f} px) overflows block {key} ({w:.0f} px wide)")
    check(len(got) == len(want), f"{what}: {len(got)} blocks drawn, the table has {len(want)}")
    if empty:
        words = " ".join(t.text or "" for t in texts)
        check("empty:" in words, f"{what}: ranks {empty} hold empty blocks and the picture does not say so")


LAYOUTS = [
    ("4", "10", "S(0)"),                       # 1-d, uneven (3, 3, 3, 1)
    ("2x4", "10,7", "S(0),S(1)"),              # 2-d, uneven
    ("2x4", "6,8", "R,S(1)"),                  # replicated over dim 0: shared blocks
    ("2x2", "4,3,5", "S(0),P(sum)"),           # 3-d, Partial
    ("2x2x2", "4,6,8", "S(2),S(0),S(1)"),      # 3-d over a 3-d mesh
    ("4", "3,4", "S(0)"),                      # an empty shard (3 rows over 4 ranks)
    ("8x8", "64,64", "S(0),S(1)"),             # 64 ranks, labels at their narrowest
    ("8x8", "16,16", "S(0)[1],S(0)[0]"),       # strided order
]
for mesh, shape, pl in LAYOUTS:
    what = f"layout {mesh} {shape} {pl}"
    svg = os.path.join(OUT, "layout-" + re.sub(r"[^A-Za-z0-9]+", "_", f"{mesh}-{shape}-{pl}") + ".svg")
    tool("layout", "--mesh", mesh, "--shape", shape, "--placements", pl, "--svg", svg)
    want, empty = owners(mesh, shape, pl)
    _, _, rows = render(svg)
    check_group(ET.parse(svg).getroot(), rows, want, empty, what)


def placements_of(state):
    """DTensor trace notation (S(0)[1]P(sum)R) to the layout grammar (S(0)[1],P(sum),R)."""
    return ",".join(re.findall(r"S\(\d+\)(?:\[\d+\])?|R|P\([a-z]+\)", state))


PLANS = [("2x4", "10,7", "S(0),S(1)", "R,S(0)"), ("2x2", "8,6", "P(sum),S(0)", "S(1),R"), ("4", "9", "S(0)", "R")]
for mesh, shape, src, dst in PLANS:
    what = f"plan {mesh} {shape} {src} -> {dst}"
    svg = os.path.join(OUT, "plan-" + re.sub(r"[^A-Za-z0-9]+", "_", f"{mesh}-{shape}-{src}-{dst}") + ".svg")
    tool("plan", "--mesh", mesh, "--shape", shape, "--from", src, "--to", dst, "--svg", svg)
    steps = json.loads(tool("plan", "--mesh", mesh, "--shape", shape, "--from", src, "--to", dst, "--json"))["steps"]
    root = ET.parse(svg).getroot()
    _, _, rows = render(svg)
    groups = {(g.get("data-step"), g.get("data-side")): g for g in root.iter(SVG + "g")}
    check(len(groups) == 2 * len(steps), f"{what}: {len(groups)} panels for {len(steps)} steps")
    heads = [t.text for t in root.iter(SVG + "text") if (t.text or "").startswith("step ")]
    for i, s in enumerate(steps, 1):
        check(any(h.startswith(f"step {i}: {s['kind']}") and f"{s['bytes_per_rank']} B/rank" in h for h in heads),
              f"{what}: no panel heading names step {i} as {s['kind']} with {s['bytes_per_rank']} B/rank: {heads}")
        for side, state in (("before", s["from"]), ("after", s["to"])):
            pl = placements_of(state)
            if i == 1 and side == "before":
                pl = src
            if i == len(steps) and side == "after":
                pl = dst
            want, empty = owners(mesh, shape, pl)
            check_group(groups[(str(i), side)], rows, want, empty, f"{what}, step {i} {side} ({pl})")

# Bad input: the file cannot be written -> exit 2, nothing on stdout.
p = subprocess.run([TOOL, "layout", "--mesh", "2", "--shape", "4", "--placements", "S(0)", "--svg",
                    os.path.join(OUT, "no-such-dir", "x.svg")], capture_output=True, text=True)
check(p.returncode == 2 and "x.svg" in p.stderr and p.stdout == "",
      f"--svg into a missing folder: exit {p.returncode}, stderr {p.stderr!r}, stdout {p.stdout[:80]!r}")

# What is at the name (docs/files.md): a directory or a socket refused; a full device's
# failure named; a FIFO and /dev/stdout written through; a symbolic link followed.
layout = ["layout", "--mesh", "2", "--shape", "4", "--placements", "S(0)"]
sock_path = os.path.join(OUT, "svg.sock")
if os.path.exists(sock_path):
    os.remove(sock_path)
sock = socket.socket(socket.AF_UNIX)
sock.bind(sock_path)
for target, words in ((OUT, "is a directory"), ("/dev/full", "/dev/full: write failed: No space left on device"),
                      (sock_path, "is a socket")):
    p = subprocess.run([TOOL, *layout, "--svg", target], capture_output=True, text=True)
    check(p.returncode == 2 and words in p.stderr and p.stdout == "",
          f"--svg {target}: exit {p.returncode}, stderr {p.stderr!r}")
check(stat.S_ISSOCK(os.lstat(sock_path).st_mode), "the socket was replaced")
sock.close()
os.remove(sock_path)
fifo = os.path.join(OUT, "svg.fifo")
if os.path.exists(fifo):
    os.remove(fifo)
os.mkfifo(fifo)
got = {}
reader = threading.Thread(target=lambda: got.update(text=open(fifo).read()), daemon=True)
reader.start()
p = subprocess.run([TOOL, *layout, "--svg", fifo], capture_output=True, text=True, timeout=60)
reader.join(60)
check(p.returncode == 0 and "<svg" in got.get("text", "") and stat.S_ISFIFO(os.lstat(fifo).st_mode),
      f"--svg FIFO: exit {p.returncode} {p.stderr!r} read {got.get('text', '')[:80]!r}")
os.remove(fifo)
p = subprocess.run([TOOL, *layout, "--svg", "/dev/stdout"], capture_output=True, text=True)
check(p.returncode == 0 and "<svg" in p.stdout and "</svg>" in p.stdout,
      f"--svg /dev/stdout: exit {p.returncode} {p.stdout[:80]!r}")
real, link = os.path.join(OUT, "real.svg"), os.path.join(OUT, "link.svg")
for f in (real, link):
    if os.path.lexists(f):
        os.remove(f)
open(real, "w").write("old")
os.symlink("real.svg", link)
p = subprocess.run([TOOL, *layout, "--svg", link], capture_output=True, text=True)
check(p.returncode == 0 and os.path.islink(link) and "<svg" in open(real).read(),
      f"--svg through a link: exit {p.returncode} {p.stderr!r}")

if FAILS:
    print(f"{len(FAILS)} check(s) failed")
    sys.exit(1)
print(f"svg: {len(LAYOUTS)} layouts and {len(PLANS)} plans drawn and checked pixel by pixel")
