// bench/compile/resolve.cpp — what the compiler's sharding choice (ops::resolved) costs:
// 256 resolutions of one operator, every pair of R, S(0), S(1) and P(sum) placements of its
// two inputs on a 2x2 mesh. Most of them leave no input where it is, so step 2 (cost by
// plans) decides; the rest take step 1 (bench/RESULTS.md, docs/operators.md).
//
//   g++ -std=c++20 -Iinclude -fsyntax-only -DOP_ADD bench/compile/resolve.cpp    (or -DOP_MM)
//
// Time it with /usr/bin/time; -DOP_NONE instantiates the same layouts without resolving,
// the floor.
#include <type_traits>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include "spmd/ops/elementwise.hpp"
#include "spmd/ops/matmul.hpp"
#include "spmd/ops/typed_op.hpp"

namespace {

using namespace spmd;
namespace mp = boost::mp11;

using M = mesh<2, 2>;
using choices = mp::mp_list<replicate, shard<0>, shard<1>, partial<reduce_op::sum>>;
using all = mp::mp_product<placements, choices, choices>;
template <class P>
using LA = layout<M, P, extents<8, 12>>;
template <class P>
using LB = layout<M, P, extents<12, 16>>;

template <class P, class Q>
constexpr int one() {
#if defined(OP_ADD)
  return static_cast<int>(ops::resolved<ops::binary<ops::add_fn>, double, void, LA<P>, LA<Q>>::result.index);
#elif defined(OP_MM)
  return static_cast<int>(ops::resolved<ops::matmul, double, void, LA<P>, LB<Q>>::result.index);
#else
  return static_cast<int>(LA<P>::spec().tensor_rank + LB<Q>::spec().tensor_rank);
#endif
}

template <class P>
struct row {
  template <class Q>
  using f = std::integral_constant<int, one<P, Q>()>;
  static constexpr int sum = mp::mp_apply<mp::mp_plus, mp::mp_transform<f, all>>::value;
};
template <class P>
using row_sum = std::integral_constant<int, row<P>::sum>;

static_assert(mp::mp_apply<mp::mp_plus, mp::mp_transform<row_sum, all>>::value >= 0);

}  // namespace
