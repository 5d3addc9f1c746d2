// tests/io/data_loader.cpp — randperm, DistributedSampler's index order, the loader's batches
// over epochs, and batches read from safetensors files into dtensors, each rank its rows.
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/io/data_loader.hpp"
#include "spmd/random/permutation.hpp"
#include "spmd/sim/sim.hpp"

using namespace spmd;
using idx = std::vector<index_t>;

namespace {

/// PyTorch's DistributedSampler.__iter__, written as its source reads, over a given epoch
/// order (`indices`): the reference the sampler is checked against.
idx torch_sampler(idx indices, index_t num_replicas, index_t rank, bool drop_last) {
  const index_t n = static_cast<index_t>(indices.size());
  index_t num_samples;
  if (drop_last && n % num_replicas != 0) {
    const double q = static_cast<double>(n - num_replicas) / static_cast<double>(num_replicas);  // math.ceil
    num_samples = static_cast<index_t>(q == static_cast<double>(static_cast<index_t>(q)) || q < 0
                                           ? static_cast<index_t>(q)
                                           : static_cast<index_t>(q) + 1);
  } else {
    num_samples = (n + num_replicas - 1) / num_replicas;
  }
  const index_t total_size = num_samples * num_replicas;
  if (!drop_last) {
    const index_t padding = total_size - n;
    if (padding <= n) {
      indices.insert(indices.end(), indices.begin(), indices.begin() + padding);
    } else {
      idx rep;
      for (index_t k = 0; k < (padding + n - 1) / n; ++k) rep.insert(rep.end(), indices.begin(), indices.begin() + n);
      indices.insert(indices.end(), rep.begin(), rep.begin() + padding);
    }
  } else {
    indices.resize(static_cast<std::size_t>(total_size));
  }
  idx out;
  for (index_t i = rank; i < total_size; i += num_replicas) out.push_back(indices[static_cast<std::size_t>(i)]);
  return out;
}

idx iota(index_t n) {
  idx v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), index_t{0});
  return v;
}

std::string temp_path(const std::string& name) {
  return "/tmp/spmd_data_loader_" + std::to_string(::getpid()) + "_" + name;
}

/// A safetensors file of int64 and f32 tensors (name, shape, values).
struct tensor_in {
  std::string name;
  io::dtype type;
  idx shape;
  std::vector<double> values;  // written as the dtype
};
void write_file(const std::string& path, const std::vector<tensor_in>& ts) {
  std::vector<io::tensor_entry> entries;
  for (const auto& t : ts) entries.push_back({t.name, t.type, t.shape, 0, 0});
  const io::safetensors_layout l(entries, {});
  io::atomic_file out = io::atomic_file::create(path, l.file_bytes());
  out.write(l.header_bytes().data(), l.header_bytes().size(), 0);
  for (const auto& t : ts) {
    const auto& e = l.at(t.name);
    std::vector<char> bytes;
    for (double v : t.values) {
      if (t.type == io::dtype::i64) {
        const std::int64_t x = static_cast<std::int64_t>(v);
        bytes.insert(bytes.end(), reinterpret_cast<const char*>(&x), reinterpret_cast<const char*>(&x) + 8);
      } else {
        const float x = static_cast<float>(v);
        bytes.insert(bytes.end(), reinterpret_cast<const char*>(&x), reinterpret_cast<const char*>(&x) + 4);
      }
    }
    out.write(bytes.data(), bytes.size(), l.data_start() + static_cast<std::size_t>(e.begin));
  }
  out.commit();
}

}  // namespace

TEST_CASE("randperm: a permutation, the generator advanced by the words it took", "[io][data]") {
  generator g(5);
  const idx p = randperm(100, g);
  CHECK(g.offset() == 200);  // 2 words a swap, 99 swaps: 198, rounded up to whole blocks
  idx s = p;
  std::sort(s.begin(), s.end());
  CHECK(s == iota(100));
  CHECK(p != iota(100));
  CHECK(randperm_at(100, {5, 0}) == p);
  CHECK(randperm_at(100, {6, 0}) != p);
  generator h(5);
  CHECK(randperm(0, h).empty());
  CHECK(randperm(1, h) == idx{0});
  CHECK(h.offset() == 0);
  CHECK_THROWS_WITH(randperm(-1, h), "spmd::randperm: n = -1 is negative");
}

TEST_CASE("randperm: every permutation of 4 about equally often", "[io][data]") {
  std::map<idx, int> seen;
  constexpr int draws = 24000;
  for (int s = 0; s < draws; ++s) ++seen[randperm_at(4, {static_cast<std::uint64_t>(s) * 7919u, 0})];
  REQUIRE(seen.size() == 24);
  double chi2 = 0;
  for (const auto& [p, k] : seen) chi2 += (k - 1000.0) * (k - 1000.0) / 1000.0;
  CHECK(chi2 < 60);  // 23 degrees of freedom: p < 1e-4 above 52
}

TEST_CASE("distributed_sampler: PyTorch's index order, padded and cut", "[io][data]") {
  using io::distributed_sampler;
  // Written out from DistributedSampler's rule: 10 over 3 pads with 0, 1.
  CHECK(distributed_sampler(10, {.replicas = 3, .rank = 0, .shuffle = false}).indices() == idx{0, 3, 6, 9});
  CHECK(distributed_sampler(10, {.replicas = 3, .rank = 1, .shuffle = false}).indices() == idx{1, 4, 7, 0});
  CHECK(distributed_sampler(10, {.replicas = 3, .rank = 2, .shuffle = false}).indices() == idx{2, 5, 8, 1});
  CHECK(distributed_sampler(10, {.replicas = 3, .rank = 2, .shuffle = false, .drop_last = true}).indices() == idx{2, 5, 8});
  // 2 over 5: padding longer than the data repeats it whole
  for (index_t r = 0; r < 5; ++r)
    CHECK(distributed_sampler(2, {.replicas = 5, .rank = r, .shuffle = false}).indices() == idx{r % 2});
  CHECK(distributed_sampler(2, {.replicas = 5, .rank = 3, .shuffle = false, .drop_last = true}).num_samples() == 0);
  CHECK(distributed_sampler(0, {.replicas = 4, .rank = 3, .shuffle = false}).indices().empty());

  for (const index_t n : {0, 1, 7, 12, 13, 100})
    for (const index_t R : {1, 2, 3, 4, 8, 16})
      for (const bool drop : {false, true})
        for (const bool shuffle : {false, true})
          for (index_t r = 0; r < R; ++r) {
            distributed_sampler s(n, {.replicas = R, .rank = r, .shuffle = shuffle, .seed = 11, .drop_last = drop});
            for (const index_t epoch : {0, 3}) {
              s.set_epoch(epoch);
              const idx order = shuffle ? randperm_at(n, {11 + static_cast<std::uint64_t>(epoch), 0}) : iota(n);
              const idx want = torch_sampler(order, R, r, drop);
              INFO("n " << n << ", replicas " << R << ", rank " << r << ", drop_last " << drop << ", shuffle "
                        << shuffle << ", epoch " << epoch);
              CHECK(s.indices() == want);
              CHECK(s.num_samples() == static_cast<index_t>(want.size()));
            }
          }
  CHECK_THROWS_WITH(distributed_sampler(10, {.replicas = 3, .rank = 3}),
                    "spmd::io::distributed_sampler: rank 3, rank should be in the interval [0, 2]");
  CHECK_THROWS_WITH(distributed_sampler(10, {.replicas = 0}), "spmd::io::distributed_sampler: replicas = 0, at least 1");
}

TEST_CASE("batch_order: DistributedSampler's shares per step, every sample once an epoch", "[io][data]") {
  for (const bool shuffle : {false, true})
    for (const index_t R : {1, 2, 4}) {
      const index_t B = 8, n = 64;
      io::batch_order o(n, {.batch = B, .replicas = R, .shuffle = shuffle, .seed = 3});
      REQUIRE(o.steps_per_epoch() == 8);
      for (const index_t epoch : {0, 1, 2}) {
        std::vector<idx> shares;
        for (index_t r = 0; r < R; ++r) {
          io::distributed_sampler s(n, {.replicas = R, .rank = r, .shuffle = shuffle, .seed = 3});
          s.set_epoch(epoch);
          shares.push_back(s.indices());
        }
        std::multiset<index_t> all;
        for (index_t k = 0; k < o.steps_per_epoch(); ++k) {
          const index_t step = epoch * o.steps_per_epoch() + k;
          CHECK(o.epoch_of(step) == epoch);
          const idx b = o.batch(step);
          const index_t per = B / R;
          for (index_t r = 0; r < R; ++r)
            for (index_t j = 0; j < per; ++j)
              CHECK(b[static_cast<std::size_t>(r * per + j)] == shares[static_cast<std::size_t>(r)][static_cast<std::size_t>(k * per + j)]);
          all.insert(b.begin(), b.end());
          // one replica reads the same samples in the step (another order)
          idx one = io::batch_order(n, {.batch = B, .replicas = 1, .shuffle = shuffle, .seed = 3}).batch(step);
          idx mine = b;
          std::sort(one.begin(), one.end());
          std::sort(mine.begin(), mine.end());
          CHECK(one == mine);
        }
        const idx every = iota(n);
        CHECK(std::equal(all.begin(), all.end(), every.begin(), every.end()));
      }
    }
  // Replicas that do not divide the batch: the step's positions in order.
  io::batch_order u(30, {.batch = 8, .replicas = 3});
  CHECK(u.steps_per_epoch() == 3);  // 30 padded to 30 (a multiple of 3): 3 whole batches, 6 left
  CHECK(u.batch(1) == idx{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(u.batch(3) == idx{0, 1, 2, 3, 4, 5, 6, 7});  // epoch 1
  CHECK(u.epoch_of(3) == 1);
  CHECK_THROWS_WITH(io::batch_order(5, {.batch = 8}), "spmd::io::batch_order: 5 samples do not make one batch of 8");
  CHECK_THROWS_WITH(io::batch_order(5, {.batch = 12, .replicas = 4}),
                    "spmd::io::batch_order: 5 samples (8 over 4 replicas) do not make one batch of 12");
}

TEST_CASE("data_loader: batches from two files, each rank its rows", "[io][data]") {
  // 6 steps of 4 samples (steps, batch, 3) in one file, 8 samples (8, 3) in another: 32.
  const std::string a = temp_path("a.safetensors"), b = temp_path("b.safetensors");
  const auto tok = [](index_t s, index_t c) { return static_cast<double>(s * 100 + c); };
  std::vector<double> ta, tb, la, lb;
  for (index_t s = 0; s < 24; ++s) {
    for (index_t c = 0; c < 3; ++c) ta.push_back(tok(s, c));
    la.push_back(0.5 * static_cast<double>(s));
  }
  for (index_t s = 24; s < 32; ++s) {
    for (index_t c = 0; c < 3; ++c) tb.push_back(tok(s, c));
    lb.push_back(0.5 * static_cast<double>(s));
  }
  write_file(a, {{"tokens", io::dtype::i64, {6, 4, 3}, ta}, {"y", io::dtype::f32, {6, 4}, la}});
  write_file(b, {{"tokens", io::dtype::i64, {8, 3}, tb}, {"y", io::dtype::f32, {8}, lb}});

  const auto check_layout = [&]<class L>(L layout, index_t replicas) {
    io::data_loader loader(io::safetensors_dataset({a, b}, {{"tokens", {3}}, {"y", {}}}),
                           {.batch = 8, .replicas = replicas, .shuffle = true, .seed = 9});
    CHECK(loader.steps_per_epoch() == 4);
    for (const index_t step : {0, 3, 4, 9}) {
      const idx want = loader.order().batch(step);
      const auto x = loader.batch<std::int64_t, L, sim::backend>("tokens", step, layout);
      const std::vector<std::int64_t> full = x.full_tensor();
      REQUIRE(full.size() == 24);
      bool same = true;
      for (index_t i = 0; i < 8; ++i)
        for (index_t c = 0; c < 3; ++c)
          same = same && full[static_cast<std::size_t>(i * 3 + c)] == static_cast<std::int64_t>(tok(want[static_cast<std::size_t>(i)], c));
      CHECK(same);
      using M = typename L::mesh_type;
      using PY = std::conditional_t<M::ndim == 1, placements<shard<0>>, placements<shard<0>, replicate>>;
      using LY = spmd::layout<M, PY, spmd::extents<8>>;
      const auto y = loader.batch<double, LY, sim::backend>("y", step);
      const std::vector<double> fy = y.full_tensor();
      for (index_t i = 0; i < 8; ++i) CHECK(fy[static_cast<std::size_t>(i)] == 0.5 * static_cast<double>(want[static_cast<std::size_t>(i)]));
    }
  };
  using M2 = mesh<2, 2>;
  check_layout(layout<M2, placements<shard<0>, replicate>, extents<8, 3>>{}, 2);
  check_layout(layout<M2, placements<shard<0>, shard<1>>, extents<8, 3>>{}, 2);  // columns on the second dim
  check_layout(layout<mesh<4>, placements<shard<0>>, extents<8, 3>>{}, 4);
  using D = mesh<dyn>;
  bind_mesh<D>(3);  // 8 rows over 3: torch.chunk's 3, 3, 2
  check_layout(layout<D, placements<shard<0>>, extents<8, 3>>{}, 3);

  io::data_loader loader(io::safetensors_dataset({a, b}, {{"tokens", {3}}, {"y", {}}}), {.batch = 8, .replicas = 2});
  // unshuffled, step 1: row 2 is rank 0's third sample of the step, its share's (4 + 2)th: sample 12
  CHECK(loader.rows<std::int64_t>("tokens", 1, 2, 1) == std::vector<std::int64_t>{1200, 1201, 1202});
  using L = layout<mesh<4>, placements<shard<0>>, extents<8, 3>>;
  CHECK_THROWS_WITH((loader.batch<std::int64_t, L, sim::backend>("tokens", 0)),
                    "spmd::io::data_loader: the layout splits the batch over 4 ranks, the loader's replicas are 2");
  using LP = layout<mesh<2>, placements<partial<>>, extents<8, 3>>;
  CHECK_THROWS_WITH((loader.batch<std::int64_t, LP, sim::backend>("tokens", 0)),
                    "spmd::io::data_loader: a batch's layout holds no Partial (field 'tokens')");
  using LW = layout<mesh<2>, placements<shard<0>>, extents<8, 4>>;
  CHECK_THROWS_WITH((loader.batch<std::int64_t, LW, sim::backend>("tokens", 0)),
                    "spmd::io::data_loader: the layout's shape (8, 4) is not field 'tokens''s batch (8, 3)");
  CHECK_THROWS_WITH(loader.rows<float>("tokens", 0, 0, 1),
                    "spmd::io::safetensors_dataset: field 'tokens' is I64, read as a floating type");
  CHECK_THROWS_WITH(loader.rows<float>("x", 0, 0, 1),
                    "spmd::io::safetensors_dataset: no field 'x' (the fields: tokens, y)");
  CHECK_THROWS_WITH(io::safetensors_dataset({a}, {{"tokens", {4}}}),
                    a + ": tensor 'tokens' has shape (6, 4, 3), which does not end with a sample's (4,)");
  CHECK_THROWS_WITH(io::safetensors_dataset({a}, {{"tokens", {3}}, {"z", {}}}), a + ": no tensor 'z' (a sample's ())");
  CHECK_THROWS_WITH(io::safetensors_dataset({a}, {{"tokens", {3}}, {"y", {4}}}),
                    a + ": tensor 'y' holds 6 samples, 'tokens' 24");
  std::remove(a.c_str());
  std::remove(b.c_str());
}
