// expect: the partition's placements do not fit a member's shape
// expect-also: string<'b', 'i', 'a', 's'>
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/module.hpp>

// The partition shards member "bias" (1-d) on tensor dim 1: refused at compile time, and the
// compiler names the member in the instantiation (module_member<"bias", ...>).
struct model {
  BOOST_HANA_DEFINE_STRUCT(model, (spmd::tensor<float, spmd::extents<4, 4>>, weight),
                           (spmd::tensor<float, spmd::extents<4>>, bias));
};
template <spmd::fixed_string Name, class M>
struct plan {
  using type = spmd::placements<spmd::shard<1>>;
};
int main() {
  const model m{};
  (void)spmd::sim::distribute_module<plan, spmd::mesh<2>>(m);
}
