// tests/cuda/divisor.cpp — division by invariants (backends/cuda/divisor.hpp) against `/` and
// `%`, and what leans on it: the block geometry (block_jobs.hpp's block_geometry: dims merged
// only where contiguous, global indices as the plain row-major formula gives them), a batch's
// job by division, and the random draws' whole-item path.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "spmd/backends/cuda/block_body.hpp"
#include "spmd/backends/cuda/block_jobs.hpp"
#include "spmd/backends/cuda/divisor.hpp"
#include "spmd/backends/cuda/job_batch.hpp"
#include "spmd/random/draw.hpp"
#include "run_table.hpp"

namespace {

namespace cu = spmd::cuda;
using spmd::index_t;
using spmd::shape_vec;
using spmd_test::vec;

/// How many (n, d) pairs disagree with `/` and `%`.
long wrong(const cu::divisor& by, std::uint64_t n) {
  index_t q = -1, r = -1;
  by.divmod(static_cast<index_t>(n), q, r);
  const auto d = static_cast<std::uint64_t>(by.d);
  return (static_cast<std::uint64_t>(q) != n / d || static_cast<std::uint64_t>(r) != n % d) ? 1 : 0;
}

}  // namespace

TEST_CASE("a divisor's magic number divides every 32-bit dividend as / does", "[cuda][divisor]") {
  std::mt19937_64 rng(28);
  std::vector<std::uint64_t> ds;
  for (std::uint64_t d = 1; d <= 4200; ++d) ds.push_back(d);
  for (int s = 2; s <= 33; ++s) {  // around every power of two, 2^32 and 2^33 included
    const std::uint64_t p = std::uint64_t{1} << s;
    for (std::uint64_t d : {p - 3, p - 1, p, p + 1, p + 3}) ds.push_back(d);
  }
  for (int k = 0; k < 3000; ++k) ds.push_back(1 + rng() % 0xffffffffu);
  long bad = 0, checked = 0;
  for (const std::uint64_t d : ds) {
    const cu::divisor by(static_cast<index_t>(d));
    // Near the multiples of d where a rounding error shows first, near 2^32, and at random.
    std::vector<std::uint64_t> ns = {0, 1, 2, 0x7fffffff, 0x80000000u, 0xfffffffe, 0xffffffff};
    for (std::uint64_t m : {std::uint64_t{1}, std::uint64_t{2}, 0xffffffffu / d, 0xffffffffu / d - 1})
      for (std::uint64_t n : {m * d - 1, m * d, m * d + 1, m * d + d - 1})
        if (n <= 0xffffffffu) ns.push_back(n);
    for (int k = 0; k < 64; ++k) ns.push_back(rng() & 0xffffffffu);
    // Past 32 bits: the plain division.
    ns.push_back(std::uint64_t{1} << 32);
    ns.push_back((std::uint64_t{1} << 40) + 12345);
    for (const std::uint64_t n : ns) {
      bad += wrong(by, n);
      ++checked;
    }
  }
  INFO(checked << " pairs");
  CHECK(bad == 0);
  CHECK(checked > 300000);
  // Every dividend below 2^20 for the small divisors (the extents a block's rows have).
  long all = 0;
  for (std::uint64_t d = 1; d <= 40; ++d) {
    const cu::divisor by(static_cast<index_t>(d));
    for (std::uint64_t n = 0; n < (std::uint64_t{1} << 20); ++n) all += wrong(by, n);
  }
  CHECK(all == 0);
  CHECK_THROWS_AS(cu::divisor(0), std::invalid_argument);
}

TEST_CASE("a wrong magic number is caught", "[cuda][divisor]") {
  cu::divisor by(1000);
  ++by.magic;  // one off: wrong somewhere below 2^32
  long bad = 0;
  for (std::uint64_t n = 0; n <= 0xffffffffu && bad == 0; n += 997) bad += wrong(by, n);
  CHECK(bad > 0);
}

TEST_CASE("a block's geometry merges only the dims that are contiguous in the global tensor", "[cuda][divisor]") {
  struct expect {
    shape_vec block, global;
    int nd;
  };
  const expect cases[] = {
      {vec({2, 1024}), vec({16, 1024}), 1},     // whole rows (Shard(0)): one dim, no division
      {vec({16, 128}), vec({16, 1024}), 2},     // a column cut (Shard(1))
      {vec({2, 3, 8}), vec({4, 3, 8}), 1},      // whole planes
      {vec({2, 1, 8}), vec({4, 3, 8}), 2},      // one row of each plane: the 1 dropped, not merged
      {vec({4, 3, 4}), vec({4, 3, 8}), 2},      // rows cut: the outer two merge
      {vec({1, 1, 5}), vec({3, 4, 9}), 1},      // a piece of one row
      {vec({3, 0}), vec({3, 4}), 1},            // empty
      {shape_vec{}, shape_vec{}, 1},            // a scalar
      {vec({2, 2, 2, 2}), vec({4, 4, 4, 4}), 4}, // every dim cut
      {vec({2, 2, 2, 2}), vec({2, 4, 2, 4}), 3}  // the whole third dim: it merges with the second
  };
  for (const expect& c : cases) {
    const cu::block_geom g = cu::block_geometry(c.block, c.global);
    INFO("block dims " << c.block.size());
    CHECK(g.nd == c.nd);
    index_t n = 1;
    for (int d = 0; d < c.block.size(); ++d) n *= c.block[d];
    // Every element's global index against the row-major formula, from a block at offset 1 in
    // every dim it does not fill.
    index_t base = 0, stride = 1;
    std::vector<index_t> gstride(static_cast<std::size_t>(c.global.size()));
    for (int d = c.global.size() - 1; d >= 0; --d) {
      gstride[static_cast<std::size_t>(d)] = stride;
      if (c.block[d] < c.global[d]) base += stride;
      stride *= c.global[d];
    }
    long bad = 0;
    for (index_t e = 0; e < n; ++e) {
      index_t want = base, rest = e;
      for (int d = c.block.size() - 1; d >= 0; --d) {
        want += (rest % c.block[d]) * gstride[static_cast<std::size_t>(d)];
        rest /= c.block[d];
      }
      bad += cu::global_index(g, base, e) != want ? 1 : 0;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("a batch of equal jobs finds an item's job by division, as the search does", "[cuda][divisor]") {
  for (const index_t per : {index_t{1}, index_t{7}, index_t{1000}, index_t{4096}}) {
    cu::job_batch<int> equal, searched;
    for (int k = 0; k < 9; ++k) {
      equal.add(k, cu::no_geom{}, per);
      searched.add(k, cu::no_geom{}, per);
    }
    searched.add(9, cu::no_geom{}, per + 1);  // one job longer: a search
    REQUIRE(equal.uniform == per);
    REQUIRE(searched.uniform == 0);
    long bad = 0;
    for (index_t i = 0; i < equal.items(); ++i) {
      const int want = static_cast<int>(i / per);
      bad += equal.job_of(i) != want ? 1 : 0;
      bad += searched.job_of(i) != want ? 1 : 0;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("a random draw's whole items take one Philox block, the rest the element path", "[cuda][divisor]") {
  namespace rnd = spmd::random;
  const rnd::draw d{rnd::distribution::uniform, 7, 12, -2.0, 3.0, 0};
  // A block of whole rows at base 8 (aligned to a block of 4 words) and at base 6 (not).
  const cu::block_geom rows = cu::block_geometry(vec({2, 6}), vec({4, 6}));
  float v[8];
  CHECK(cu::detail::random_whole_item<4, 4, float>({v, 12, 8, 0, false}, rows, 4, d, v));
  for (int q = 0; q < 4; ++q) CHECK(v[q] == rnd::draw_at<float>(d, 8 + 4 + q));
  CHECK(cu::detail::random_whole_item<4, 8, float>({v, 12, 8, 0, false}, rows, 0, d, v));
  for (int q = 0; q < 8; ++q) CHECK(v[q] == rnd::draw_at<float>(d, 8 + q));
  CHECK_FALSE(cu::detail::random_whole_item<4, 4, float>({v, 12, 6, 0, false}, rows, 4, d, v));
  CHECK_FALSE(cu::detail::random_whole_item<4, 8, float>({v, 12, 8, 0, false}, rows, 8, d, v));  // past the block's row
  // A column cut (rows of 3): no four elements consecutive.
  const cu::block_geom cols = cu::block_geometry(vec({4, 3}), vec({4, 6}));
  CHECK_FALSE(cu::detail::random_whole_item<4, 4, float>({v, 12, 0, 0, false}, cols, 0, d, v));
  // f64: two elements a block, so four blocks for eight elements.
  double w[8];
  CHECK(cu::detail::random_whole_item<2, 8, double>({w, 12, 6, 0, false}, rows, 0, d, w));
  for (int q = 0; q < 8; ++q) CHECK(w[q] == rnd::draw_at<double>(d, 6 + q));
}
