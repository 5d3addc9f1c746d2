#!/usr/bin/env python3
"""Generate a TU with N distinct operator resolutions for the compile-time benchmark.

usage: gen_ops.py N {exact|costed} {1d|2d} [sim]

Each resolution is a matmul whose sharding the compiler must choose, checked by a
static_assert on the result's placements (so the choice is evaluated). Shapes differ per
entry, so every resolution is a distinct instantiation.
  exact   the inputs already fit a strategy (x S(0) @ w R, x R @ w S(1), x S(1) @ w S(0)):
          step 1 of the engine, no planning;
  costed  they fit none (x S(0) @ w S(0), ...): branch and bound over planned candidates.
With `sim`, each entry also runs the op in the simulation backend (its redistributions and
kernel instantiated), which is what a user's program pays.
"""
import sys

n, kind, mesh = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sim = len(sys.argv) > 4 and sys.argv[4] == "sim"
M = "spmd::mesh<4>" if mesh == "1d" else "spmd::mesh<2, 2>"
if mesh == "1d":
    cases = {
        "exact": [("shard<0>", "replicate", "shard<0>"), ("replicate", "shard<1>", "shard<1>"),
                  ("shard<1>", "shard<0>", "partial<>")],
        "costed": [("shard<0>", "shard<0>", None), ("shard<1>", "shard<1>", None),
                   ("partial<spmd::reduce_op::max>", "replicate", None)],
    }[kind]
    wrap = lambda p: f"spmd::placements<spmd::{p}>"
else:
    cases = {
        "exact": [("shard<0>, spmd::replicate", "replicate, spmd::shard<1>", "shard<0>, spmd::shard<1>"),
                  ("replicate, spmd::shard<1>", "replicate, spmd::shard<0>", "replicate, spmd::partial<>"),
                  ("shard<0>, spmd::shard<1>", "shard<1>, spmd::replicate", None)],
        "costed": [("shard<0>, spmd::shard<0>", "shard<0>, spmd::shard<1>", None),
                   ("shard<1>, spmd::shard<1>", "shard<1>, spmd::shard<0>", None),
                   ("partial<spmd::reduce_op::max>, spmd::shard<0>", "shard<1>, spmd::replicate", None)],
    }[kind]
    wrap = lambda p: f"spmd::placements<spmd::{p}>"

print('#include "spmd/ops/matmul.hpp"\n#include "spmd/ops/typed_op.hpp"')
if sim:
    print('#include "spmd/runtime/ops/matmul.hpp"\n#include "spmd/backends/sim/sim.hpp"')
print("#include <type_traits>\nfloat sink;")
for i in range(n):
    xp, wp, out = cases[i % len(cases)]
    m, k, nn = 8 + i, 16 + i % 7, 12 + i % 5
    print(f"using X{i} = spmd::layout<{M}, {wrap(xp)}, spmd::extents<{m}, {k}>>;")
    print(f"using W{i} = spmd::layout<{M}, {wrap(wp)}, spmd::extents<{k}, {nn}>>;")
    print(f"using R{i} = spmd::ops::resolved<spmd::ops::matmul, float, void, X{i}, W{i}>;")
    if out:
        print(f"static_assert(std::is_same_v<R{i}::out_placements, {wrap(out)}>);")
    else:
        print(f"static_assert(R{i}::result.index >= 0);")
    if sim:
        print(f"void run{i}() {{ auto y = spmd::sim::matmul(spmd::sim::zeros<float, X{i}>(), "
              f"spmd::sim::zeros<float, W{i}>()); sink += y.full_tensor()[0]; }}")
print("int main() { return 0; }")
