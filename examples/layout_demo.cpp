// spmd demo: layouts of a few tensors on a 2x4 (dp x tp) mesh.
//
// Everything asserted below is computed by the compiler; the program then prints the
// same layouts the way DTensor's visualize_sharding does, from the same constexpr code.
#include <iostream>
#include <type_traits>

#include "spmd/io/placement_text.hpp"
#include "spmd/io/visualize.hpp"
#include "spmd/spmd.hpp"

namespace {

using spmd::dims;
using spmd::dyn;
using spmd::extents;
using spmd::layout;
using spmd::placements;
using spmd::replicate;
using spmd::shard;

using Mesh = spmd::mesh<2, 4>::named<"dp", "tp">;

// Rows split by dp, then each half split again by tp: torch.chunk's rule, chunk of chunk.
using Rows = layout<Mesh, placements<shard<0>, shard<0>>, extents<10, 5>>;
static_assert(Rows{}.local_shape(0) == dims<2>{2, 5});
static_assert(Rows{}.local_shape(3) == dims<2>{0, 5});     // 5 rows over 4 ranks: 2,2,1,0
static_assert(Rows{}.global_offset(3) == dims<2>{10, 0});  // zero-size: offset = extent
static_assert(std::is_same_v<decltype(Rows{}.local_extents<5>()), extents<2, 5>>);

// The classic 2-d layout: batch over dp, features over tp. Even, so every rank's local
// extents are one static type.
using Grid = layout<Mesh, placements<shard<0>, shard<1>>, extents<8, 8>>;
static_assert(std::is_same_v<decltype(Grid{}.uniform_local_extents()), extents<4, 2>>);
static_assert(Grid{}.global_offset(6) == dims<2>{4, 4});

// Same placements, tp splitting first (explicit shard order): a different map.
using TpFirst = layout<Mesh, placements<shard<0, 1>, shard<0, 0>>, extents<10, 5>>;
static_assert(TpFirst{}.local_shape(0) == dims<2>{2, 5} && TpFirst{}.global_offset(4) == dims<2>{2, 0});

// Weights replicated over dp, columns over tp, with a run-time column count.
using Cols = layout<Mesh, placements<replicate, shard<-1>>, extents<4, dyn>>;

// Sub-meshes and groups are types too.
using TP = Mesh::sub<"tp">::containing<5>;
static_assert(std::is_same_v<TP, spmd::mesh<4>::named<"tp">::with_ranks<4, 5, 6, 7>>);

template <class L>
void show(const char* title, const L& l) {
  const auto spec = L::spec();
  std::cout << "== " << title << ": mesh 2x4 (dp, tp), shape " << spmd::format_shape(l.extents().to_vec())
            << ", placements " << spmd::format_placements(spec) << "\n\n"
            << spmd::layout_table(spec, l.extents().to_vec()) << "\n"
            << spmd::visualize(spec, l.extents().to_vec()) << "\n\n";
}

}  // namespace

int main() {
  show("rows split twice (uneven)", Rows{});
  show("batch x features", Grid{});
  show("tp splits first", TpFirst{});
  show("replicated over dp, columns over tp (run-time width 10)", Cols{extents<4, dyn>{10}});

  // A run-time rank reaches the compiled per-rank path through a jump table.
  for (spmd::index_t rank : {0, 5}) {
    spmd::with_rank<Mesh>(rank, [](auto r) {
      constexpr auto e = Rows{}.local_extents<decltype(r)::value>();  // a static type per rank
      std::cout << "rank " << decltype(r)::value << " holds a " << e.extent(0) << "x" << e.extent(1)
                << " block of Rows (static extents)\n";
    });
  }
  return 0;
}
