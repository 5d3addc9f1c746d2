#!/usr/bin/env python3
"""Plots of the redistribute benchmarks: bus bandwidth against size, spmd beside the raw
collective, PyTorch and the floor, one panel per case (and mesh).

usage: bench/plot.py RESULT.txt [RESULT.txt ...] [-o DIR]

Reads the nccl-tests-style tables the benchmarks print (redistribute_sim, redistribute_mpi,
redistribute_cuda, redistribute_nccl): a header line naming the columns (size, time(us),
algbw, busbw, and where the benchmark has them raw(us), floor(us), torch(us)) and the rows
under it. A time column other than time(us) becomes a line at the same bus-bandwidth
factor as spmd's row (busbw / algbw), so the lines compare like for like. Writes
DIR/<input name>.png (default: next to the input). Needs matplotlib (Debian:
python3-matplotlib; pip: matplotlib).
"""
import argparse
import collections
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OTHER_TIMES = {"raw(us)": "raw collective", "floor(us)": "floor", "torch(us)": "PyTorch", "graph(us)": "CUDA graph"}
CASE_COLUMNS = ("case", "op")


def parse(path):
    """{panel title: {series: [(size, busbw)]}} and the file's comment lines."""
    panels = collections.OrderedDict()
    header, notes, mesh = None, [], None
    for line in open(path):
        text = line.strip()
        if not text:
            continue
        if text.startswith("#"):
            body = text.lstrip("#").strip()
            m = re.match(r"mesh (\S+)", body)
            if m and "busbw" not in body:
                mesh = m.group(1)
            if "busbw" in body.split():
                header = body.split()
            else:
                notes.append(body)
            continue
        if text[0].isalpha() and "busbw" in text.split():
            header = text.split()
            continue
        if header is None or text.startswith("RESULT"):
            continue
        cells = text.split()
        if len(cells) < len(header):
            continue
        row = dict(zip(header, cells))
        try:
            size = float(row.get("size", row.get("size(B)")))
            time_us, algbw, busbw = float(row["time(us)"]), float(row["algbw"]), float(row["busbw"])
        except (KeyError, ValueError):
            continue
        case = next((row[c] for c in CASE_COLUMNS if c in row), "")
        title = " ".join(x for x in (f"mesh {row.get('mesh', mesh)}" if row.get("mesh", mesh) else "", case) if x)
        series = panels.setdefault(title, collections.OrderedDict())
        series.setdefault("spmd", []).append((size, busbw))
        factor = busbw / algbw if algbw > 0 else 1.0
        for col, name in OTHER_TIMES.items():
            try:
                t = float(row[col])
            except (KeyError, ValueError):
                continue
            if t > 0:
                series.setdefault(name, []).append((size, size / (t * 1e3) * factor))
    return panels, notes


def plot(path, out_dir):
    panels, notes = parse(path)
    if not panels:
        raise SystemExit(f"{path}: no table with a busbw column")
    n = len(panels)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    styles = {"spmd": ("#0072B2", "o", "-"), "raw collective": ("#E69F00", "s", "--"), "floor": ("#999999", "", ":"),
              "PyTorch": ("#D55E00", "^", "-."), "CUDA graph": ("#009E73", "v", "-")}
    for ax, (title, series) in zip(axes.flat, panels.items()):
        for name, pts in series.items():
            pts.sort()
            colour, marker, line = styles.get(name, ("#CC79A7", "x", "-"))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, linestyle=line, color=colour,
                    label=name, markersize=3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("size (bytes)", fontsize=8)
        ax.set_ylabel("bus bandwidth (GB/s)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(os.path.basename(path) + (": " + notes[0] if notes else ""), fontsize=9)
    fig.tight_layout()
    out = os.path.join(out_dir or os.path.dirname(path) or ".", os.path.splitext(os.path.basename(path))[0] + ".png")
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("-o", "--out", default=None, help="folder for the PNGs (default: next to each input)")
    a = ap.parse_args()
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    for p in a.results:
        plot(p, a.out)


if __name__ == "__main__":
    main()
