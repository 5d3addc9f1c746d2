#!/usr/bin/env python3
"""The gallery of layout and plan pictures (docs/observability.md): every picture drawn by
spmd-plan --svg from the build being made, gathered in one HTML page. The build writes it
(build/docs/gallery/gallery.html); nothing here is drawn by hand.

usage: make_gallery.py SPMD_PLAN OUT.html
"""
import html
import os
import subprocess
import sys
import tempfile

TOOL, OUT = sys.argv[1], sys.argv[2]
LAYOUTS = [
    ("1-d, even", "4", "16", "S(0)"),
    ("1-d, uneven: 10 over 4 (3, 3, 3, 1)", "4", "10", "S(0)"),
    ("an empty shard: 3 rows over 4 ranks", "4", "3,4", "S(0)"),
    ("2-d over a 2x4 mesh", "2x4", "8,8", "S(0),S(1)"),
    ("replicated over one mesh dim (each block held by 2 ranks)", "2x4", "8,8", "R,S(1)"),
    ("Partial over one mesh dim", "2x2", "6,6", "P(sum),S(1)"),
    ("one tensor dim sharded by both mesh dims (default order)", "2x4", "16,4", "S(0),S(0)"),
    ("the same, strided order", "2x4", "16,4", "S(0)[1],S(0)[0]"),
    ("3-d, as slices along dim 0", "2x2x2", "4,6,8", "S(2),S(0),S(1)"),
    ("64 ranks", "8x8", "64,64", "S(0),S(1)"),
]
PLANS = [
    ("all_gather", "4", "8,8", "S(0)", "R"),
    ("transpose of the sharding (all_to_all)", "2x4", "8,8", "S(0),S(1)", "S(1),S(0)"),
    ("Partial to replicated and sharded", "2x2", "8,6", "P(sum),S(0)", "R,S(1)"),
    ("uneven", "2x4", "10,7", "S(0),S(1)", "R,S(0)"),
]


def svg(*args):
    with tempfile.NamedTemporaryFile(suffix=".svg", delete=False) as f:
        path = f.name
    try:
        subprocess.run([TOOL, *args, "--svg", path], check=True, stdout=subprocess.DEVNULL)
        text = open(path).read()
    finally:
        os.remove(path)
    return text[text.index("<svg"):]


parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>spmd: layouts and plans</title>",
         "<style>body{font-family:sans-serif;margin:2em} figure{margin:1.5em 0} code{background:#eee}</style>",
         "</head><body><h1>spmd: layouts and plans</h1>",
         "<p>Drawn by <code>spmd-plan layout --svg</code> and <code>spmd-plan plan --svg</code> of this build. "
         "Each block is coloured by the lowest rank that holds it (Okabe&ndash;Ito palette, rank mod 8) and "
         "labelled with its ranks and local shape.</p><h2>Layouts</h2>"]
for title, mesh, shape, pl in LAYOUTS:
    cmd = f"spmd-plan layout --mesh {mesh} --shape {shape} --placements '{pl}' --svg FILE"
    parts.append(f"<figure>{svg('layout', '--mesh', mesh, '--shape', shape, '--placements', pl)}"
                 f"<figcaption>{html.escape(title)}: <code>{html.escape(cmd)}</code></figcaption></figure>")
parts.append("<h2>Plans</h2>")
for title, mesh, shape, src, dst in PLANS:
    cmd = f"spmd-plan plan --mesh {mesh} --shape {shape} --from '{src}' --to '{dst}' --svg FILE"
    parts.append(f"<figure>{svg('plan', '--mesh', mesh, '--shape', shape, '--from', src, '--to', dst)}"
                 f"<figcaption>{html.escape(title)}: <code>{html.escape(cmd)}</code></figcaption></figure>")
parts.append("</body></html>\n")
with open(OUT, "w") as f:
    f.write("\n".join(parts))
