#!/usr/bin/env python3
"""The AVX-512 draw loops' throughput as llvm-mca models it: what each element type's last step
costs, apart from the machine's noise and memory.

usage: python3 bench/rng_loops.py [--mcpu sapphirerapids] [--cxx g++]   (from the repository)

bench/rng measures the 16-bit draws against f32's element rate on the machine at hand. This
script gives the figure to compare that with: it compiles a unit that instantiates
host::avx512::fill_blocks for f32, bf16 and f16 (uniform and normal), takes each fill_all's
main loop (four groups of sixteen Philox blocks, 256 values an iteration) out of objdump, and
runs llvm-mca over it. Every path draws the same Philox words and computes the same f32 values;
the types differ only in the last step (f32's transpose; f16's vcvtps2ph and 16-bit permutes;
bf16's rounding in 32-bit lanes, or none on its exact path), so the cycle ratio is that step's
share.
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

UNIT = r"""
#include "spmd/host/random_avx512.hpp"
using namespace spmd;
template <class T, random::distribution D>
void fill(const random::draw& d, T* out) { host::avx512::fill_blocks<T, D>(d, 0, 4096, out); }
template void fill<float, random::distribution::uniform>(const random::draw&, float*);
template void fill<bfloat16, random::distribution::uniform>(const random::draw&, bfloat16*);
template void fill<float16, random::distribution::uniform>(const random::draw&, float16*);
template void fill<float, random::distribution::normal>(const random::draw&, float*);
template void fill<bfloat16, random::distribution::normal>(const random::draw&, bfloat16*);
template void fill<float16, random::distribution::normal>(const random::draw&, float16*);
"""


def main_loops(obj):
    """{(type, distribution, path): [instructions of the function's largest loop]}."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", obj], capture_output=True, text=True,
                         check=True).stdout
    loops = {}
    for f in re.split(r"\n(?=[0-9a-f]+ <)", dis):
        head = f.split("\n", 1)[0]
        m = re.search(r"fill_all<(?:spmd::)?(\w+), \(spmd::random::distribution\)(\d), "
                      r"\(spmd::host::avx512::detail::path\)(\d), 4>", head)
        if not m:
            continue
        ins = []
        for line in f.split("\n")[1:]:
            a = re.match(r"\s+([0-9a-f]+):\t(.*)", line)
            if a:
                ins.append((int(a.group(1), 16), a.group(2).strip()))
        at = {a: i for i, (a, _) in enumerate(ins)}
        best = None  # the backward jump spanning the most instructions
        for i, (a, text) in enumerate(ins):
            j = re.match(r"j\w+\s+([0-9a-f]+)", text)
            if j and int(j.group(1), 16) < a and int(j.group(1), 16) in at:
                start = at[int(j.group(1), 16)]
                if best is None or i - start > best[1] - best[0]:
                    best = (start, i)
        if best:
            key = (m.group(1), ("uniform", "normal")[int(m.group(2))], ("fast", "exact")[int(m.group(3))])
            loops[key] = [re.sub(r"<[^>]*>", "", t) for _, t in ins[best[0]:best[1] + 1]]
    return loops


def cycles(body, mcpu):
    with tempfile.NamedTemporaryFile("w", suffix=".s") as s:
        s.write("\n".join(body) + "\n")
        s.flush()
        r = subprocess.run(["llvm-mca", f"-mcpu={mcpu}", "-iterations=100", s.name], capture_output=True, text=True)
    if r.returncode != 0:  # e.g. a CPU model without AVX-512
        sys.exit(f"rng_loops: llvm-mca -mcpu={mcpu} failed: {(r.stderr.strip().splitlines() or ['?'])[0]}")
    out = r.stdout
    return int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpu", default="sapphirerapids")
    ap.add_argument("--cxx", default="g++")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = pathlib.Path(tmp) / "loops.cpp", pathlib.Path(tmp) / "loops.o"
        src.write_text(UNIT)
        subprocess.run([args.cxx, "-std=c++20", "-O2", "-I", str(ROOT / "include"), "-c", str(src), "-o", str(obj)],
                       check=True)
        loops = main_loops(str(obj))
    if not loops:
        sys.exit("rng_loops: no AVX-512 fill loops found (a compiler or target without the AVX-512 path?)")
    print(f"# llvm-mca -mcpu={args.mcpu}, {args.cxx} -O2: cycles per iteration of 256 values; "
          "element rate over f32's (same distribution)")
    print(f"{'case':28} {'instructions':>12} {'cycles':>8} {'vs f32':>7}")
    for dist in ("uniform", "normal"):
        base = cycles(loops[("float", dist, "fast")], args.mcpu)
        for key in sorted(k for k in loops if k[1] == dist):
            c = cycles(loops[key], args.mcpu)
            name = f"{dist} {key[0]} ({key[2]})"
            print(f"{name:28} {len(loops[key]):12d} {c:8.1f} {base / c:7.3f}")


if __name__ == "__main__":
    main()
