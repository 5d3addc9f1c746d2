// tests/sim/reduce_kernels.cpp — the reduction kernels (host/kernels.hpp) against
// the element-by-element definition: reduce_chunk (through a scratch block) and
// reduce_stream (straight from registers, non-temporal stores) must give, bit for bit, what
// combining the inputs left to right with spmd::maximum / minimum / + gives, for every
// length (whole blocks and tails), every group size and the edge values: NaN of either
// sign, signed zeros, infinities, the largest and smallest finite values, denormals. The
// vectorised max/min (SSE) take other paths than the scalar tails, so the random lengths
// cover both.
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/host/kernels.hpp"

namespace {

using spmd::index_t;
using spmd::reduce_op;
namespace hd = spmd::host::detail;

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
T combine_ref(reduce_op op, T a, T b) {
  switch (op) {
    case reduce_op::max: return spmd::maximum(a, b);
    case reduce_op::min: return spmd::minimum(a, b);
    default: return a + b;
  }
}

template <class T, reduce_op Op>
int mismatches(unsigned seed) {
  using L = std::numeric_limits<T>;
  const T vals[] = {T(0),       -T(0),         T(1),      -T(1),       L::infinity(),
                    -L::infinity(), L::quiet_NaN(), -L::quiet_NaN(), L::denorm_min(), T(3.5),
                    L::max(),   L::lowest()};
  const int nv = static_cast<int>(sizeof(vals) / sizeof(T));
  std::mt19937 rng(seed);
  int bad = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const index_t n = 1 + static_cast<index_t>(rng() % 8), m = 1 + static_cast<index_t>(rng() % 90);
    std::vector<std::vector<T>> in(static_cast<std::size_t>(n), std::vector<T>(static_cast<std::size_t>(m)));
    for (auto& v : in)
      for (auto& e : v) e = vals[rng() % static_cast<unsigned>(nv)];
    std::vector<const T*> p;
    for (auto& v : in) p.push_back(v.data());
    std::vector<T> chunk(static_cast<std::size_t>(m)), stream(static_cast<std::size_t>(m) + 16);
    hd::reduce_chunk<Op, T>(chunk.data(), p.data(), n, 0, m);
    T* o = stream.data();
    while (reinterpret_cast<std::uintptr_t>(o) % 16 != 0) ++o;
    hd::reduce_stream<Op, T>(o, p.data(), n, 0, m);
    hd::stream_fence();
    for (index_t i = 0; i < m; ++i) {
      T want = in[0][static_cast<std::size_t>(i)];
      for (index_t j = 1; j < n; ++j) want = combine_ref(Op, want, in[static_cast<std::size_t>(j)][static_cast<std::size_t>(i)]);
      bad += !same_bits(chunk[static_cast<std::size_t>(i)], want);
      bad += !same_bits(o[i], want);
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("reduction kernels equal the element-by-element definition, bit for bit",
          "[kernels]") {
  CHECK(mismatches<float, reduce_op::max>(1) == 0);
  CHECK(mismatches<float, reduce_op::min>(2) == 0);
  CHECK(mismatches<double, reduce_op::max>(3) == 0);
  CHECK(mismatches<double, reduce_op::min>(4) == 0);
  CHECK(mismatches<float, reduce_op::sum>(5) == 0);
  CHECK(mismatches<double, reduce_op::sum>(6) == 0);
}
