// libFuzzer harness: the run-time layout and plan entry points (make_spec, make_plan) and
// executing a plan in the simulation, on layouts built from the input: a mesh of 1-3 dims
// (sizes 1-4), a tensor of rank 0-3 (sizes 0-6), two placement lists over R, S(d) with an
// explicit shard order or not, and P(op). Invalid layouts must be refused by make_spec;
// for valid ones the plan must exist, its cost equal the sum of its steps' costs, and the
// redistributed tensor must hold the same logical value, element for element, as the
// element-by-element reference (tests/sim/reference.hpp) computes it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../sim/reference.hpp"
#include "spmd/plan.hpp"
#include "spmd/backends/sim/sim.hpp"

namespace {

struct reader {
  const std::uint8_t* p;
  std::size_t n;
  unsigned next(unsigned mod) {
    if (n == 0) return 0;
    --n;
    return *p++ % mod;
  }
};

spmd::placement_vec placements(reader& in, int dims, int rank) {
  spmd::placement_vec v{};
  for (int m = 0; m < dims; ++m) {
    const unsigned k = in.next(4);
    if (k == 0 || rank == 0) v.push_back(spmd::make_replicate());
    else if (k == 1) v.push_back(spmd::make_shard(static_cast<int>(in.next(2 * rank)) - rank));
    else if (k == 2) v.push_back(spmd::make_shard(static_cast<int>(in.next(rank)), static_cast<int>(in.next(dims + 1)) - 1));
    else v.push_back(spmd::make_partial(static_cast<spmd::reduce_op>(in.next(5))));
  }
  return v;
}

template <class T>
void check(const spmd::layout_spec& a, const spmd::layout_spec& b, const simref::ivec& g,
           const spmd::plan& p) {
  std::vector<T> data(static_cast<std::size_t>(simref::volume(g)));
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<T>(static_cast<int>(i % 13) - 6);
  const auto in = spmd::sim::distribute<T>(data, a, simref::to_shape(g));
  const auto out = spmd::sim::execute<T>(p, simref::to_shape(g), in);
  if (simref::global_value(b, g, simref::from_set(out, b, g)) != data) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader in{data, size};
  spmd::mesh_shape_vec mesh{};
  const int dims = 1 + static_cast<int>(in.next(3));
  for (int m = 0; m < dims; ++m) mesh.push_back(1 + in.next(4));
  const int rank = static_cast<int>(in.next(4));
  simref::ivec g;
  for (int d = 0; d < rank; ++d) g.push_back(in.next(7));
  const spmd::spec_result a = spmd::make_spec(mesh, placements(in, dims, rank), rank);
  const spmd::spec_result b = spmd::make_spec(mesh, placements(in, dims, rank), rank);
  if (!a.ok() || !b.ok()) return 0;  // refused with an error code: fine
  const double bytes = 8.0 * static_cast<double>(simref::volume(g));
  const spmd::plan_result r = spmd::make_plan(a.spec, b.spec, bytes);
  if (!r.ok()) __builtin_trap();  // every pair of valid layouts on <= 3 dims has a plan
  // Integers are exact; P(avg) has no integer form, so it runs in double (exact here too).
  if (spmd::holds_partial(a.spec.placements, spmd::reduce_op::avg) ||
      spmd::holds_partial(b.spec.placements, spmd::reduce_op::avg))
    check<double>(a.spec, b.spec, g, r.value);
  else
    check<std::int64_t>(a.spec, b.spec, g, r.value);
  return 0;
}
