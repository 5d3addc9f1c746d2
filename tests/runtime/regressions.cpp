// tests/runtime/regressions.cpp — core bugs these tests found, kept as regression tests.
#include <catch2/catch.hpp>

#include <spmd/spmd.hpp>

TEST_CASE("make_spec rejects an explicit shard position below -1", "[value][regression]") {
  // make_spec once checked only `order >= count`: an order of -2 counted as "given",
  // passed, and shard_order() never listed the shard, so the rank held the whole dim.
  spmd::placement_vec p{};
  p.push_back(spmd::make_shard(0, -2));
  const spmd::spec_result r = spmd::make_spec({{4}, 1}, p, 1);
  CHECK(r.error == spmd::layout_error::inconsistent_shard_order);
  // Were it accepted, rank 3 of 4 must still hold 2 of the 8 rows.
  if (r.ok()) {
    const spmd::local_box b = spmd::box_at(r.spec, {{8}, 1}, {{3}, 1});
    CHECK(b.shape[0] == 2);
  }
}
