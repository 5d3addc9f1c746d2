// tests/training/fsdp: fully_shard against one-device training (f64, 1e-12) on a 1-d mesh with
// uneven and empty shards and on a 2×4 (dp, tp) mesh with the Megatron MLP (FSDP × TP), the
// collectives per step (compile-time counts against what ran), reshard_after_forward both
// ways, the gathered memory freed, and bf16 mixed precision (bf16 gathers, f32 gradients).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "data_parallel.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"
#include "spmd/runtime/optim.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;
using dp_test::close;
using dp_test::batch, dp_test::in, dp_test::hidden, dp_test::out;

struct trained {
  std::vector<double> w1, b1, w2, b2;
  std::vector<double> losses;
  std::vector<int> gathers, scatters, all_reduces;  // per step
};

void close_all(const trained& a, const trained& b, double tol) {
  close(a.w1, b.w1, tol);
  close(a.b1, b.b1, tol);
  close(a.w2, b.w2, tol);
  close(a.b2, b.b2, tol);
  close(a.losses, b.losses, tol);
}

/// Three AdamW steps on one device (no FSDP: the reference).
trained one_device() {
  using M = mesh<1>;
  using R = placements<replicate>;
  const dp_test::init init;
  auto w1 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<hidden, in>>>(init.w1), "w1");
  auto b1 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<hidden>>>(init.b1), "b1");
  auto w2 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<out, hidden>>>(init.w2), "w2");
  auto b2 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<out>>>(init.b2), "b2");
  rt::adamw opt({.lr = 0.01}, w1, b1, w2, b2);
  trained r;
  for (int step = 0; step < 3; ++step) {
    const auto x = sim::distribute_tensor<layout<M, R, extents<batch, in>>>(init.x(step));
    const auto t = sim::distribute_tensor<layout<M, R, extents<batch, out>>>(init.t(step));
    auto loss = dp_test::loss(x, t, w1, b1, w2, b2);
    r.losses.push_back(loss.full_tensor()[0]);
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  r.w1 = w1.full_tensor(), r.b1 = b1.full_tensor(), r.w2 = w2.full_tensor(), r.b2 = b2.full_tensor();
  return r;
}

/// The same on mesh<4>: two units, (w1, b1) and (w2, b2), data sharded over dp; with
/// `prefetch`, down's all_gather starts before up runs and up's re-gather when down's backward
/// begins.
trained fsdp_1d(bool reshard_after_forward, bool prefetch = false) {
  using M = mesh<4>;
  using S = placements<shard<0>>;
  const dp_test::init init;
  auto w1 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<hidden, in>>>(init.w1), "w1");
  auto b1 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<hidden>>>(init.b1), "b1");
  auto w2 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<out, hidden>>>(init.w2), "w2");
  auto b2 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<out>>>(init.b2), "b2");  // 1,1,1,0
  const rt::fsdp_options o{.reshard_after_forward = reshard_after_forward};
  // [docs:fsdp-units]
  auto up = rt::fully_shard<0>(o, w1, b1);    // a unit: one all_gather, one reduce_scatter
  auto down = rt::fully_shard<0>(o, w2, b2);
  static_assert(decltype(up)::collectives_per_step() == 3 && decltype(up)::collectives_per_step(false) == 2);
  rt::adamw opt({.lr = 0.01}, w1, b1, w2, b2);  // sharded parameters: sharded state
  // [/docs:fsdp-units]
  trained r;
  for (int step = 0; step < 3; ++step) {
    const auto x = sim::distribute_tensor<layout<M, S, extents<batch, in>>>(init.x(step));
    const auto t = sim::distribute_tensor<layout<M, S, extents<batch, out>>>(init.t(step));
    sim::comm_counter comm;
    std::size_t inside = 0;
    if (prefetch) {
      down.prefetch();
      down.prefetch_in_backward(up);
    }
    // [docs:fsdp-forward]
    auto h = up.forward([&](const auto& W1, const auto& B1) {  // W1, B1: gathered, Replicate
      inside = up.gathered_bytes();
      return rt::relu(rt::linear(rt::as_variable(x), W1, B1));
    });
    auto y = down.forward([&](const auto& W2, const auto& B2) { return rt::linear(h, W2, B2); });
    // [/docs:fsdp-forward]
    // Every rank holds the whole: in the simulation the group's gathered blocks are one buffer
    // (docs/simulation.md), which gathered_bytes counts once.
    CHECK(inside >= (hidden * in + hidden) * sizeof(double));
    CHECK(up.gathered_bytes() == (reshard_after_forward ? 0u : inside));
    // The loss's own collectives (the mean of 10 rows over 4 ranks gathers them: an uneven
    // Shard is not a Partial(avg)) are not the units'.
    sim::comm_counter of_loss;
    auto d = y - t;
    auto loss = rt::mean<>(d * d);
    const int loss_gathers = of_loss.count(step_kind::all_gather), loss_total = of_loss.total();
    r.losses.push_back(loss.full_tensor()[0]);
    loss.backward();
    CHECK(up.gathered_bytes() == 0);  // freed after the reduce_scatter
    CHECK(down.gathered_bytes() == 0);
    r.gathers.push_back(comm.count(step_kind::all_gather) - loss_gathers);
    r.scatters.push_back(comm.count(step_kind::reduce_scatter));
    r.all_reduces.push_back(comm.count(step_kind::all_reduce));
    CHECK(comm.total() - loss_total == decltype(up)::collectives_per_step(reshard_after_forward) +
                              decltype(down)::collectives_per_step(reshard_after_forward));
    // The gradients, and so the optimizer's state, are sharded as the parameters are.
    static_assert(std::is_same_v<decltype(w1)::grad_layout, decltype(w1)::layout_type>);
    opt.step();
    // Rank 0 holds its rows: w1 2×4, b1 2, w2 1×6, b2 1; AdamW's state twice that; rank 3
    // holds no row of any parameter (6 and 3 rows over 4 ranks).
    constexpr std::size_t rank0 = (2 * 4 + 2 + 1 * 6 + 1) * sizeof(double);
    CHECK(opt.bytes_of_rank(0).parameters == rank0);
    CHECK(opt.bytes_of_rank(0).gradients == rank0);
    CHECK(opt.bytes_of_rank(0).state == 2 * rank0);
    CHECK(opt.bytes_of_rank(3).total() == 0);
    opt.zero_grad();
  }
  r.w1 = w1.full_tensor(), r.b1 = b1.full_tensor(), r.w2 = w2.full_tensor(), r.b2 = b2.full_tensor();
  return r;
}

}  // namespace

TEST_CASE("fully_shard on 1-d: the one-device parameters after three AdamW steps", "[fsdp]") {
  const trained one = one_device();
  for (const bool reshard : {true, false}) {
    INFO("reshard_after_forward " << reshard);
    const trained f = fsdp_1d(reshard);
    close_all(f, one, 1e-12);
    // Per step: each unit's all_gather (twice when resharded) and one reduce_scatter.
    CHECK(f.gathers == std::vector<int>(3, reshard ? 4 : 2));
    CHECK(f.scatters == std::vector<int>{2, 2, 2});
    CHECK(f.all_reduces == std::vector<int>{0, 0, 0});
    // Prefetching changes when the all_gathers start, not what they compute or how many run.
    const trained p = fsdp_1d(reshard, true);
    CHECK(p.w1 == f.w1);
    CHECK(p.b2 == f.b2);
    CHECK(p.losses == f.losses);
    CHECK(p.gathers == f.gathers);
  }
}

TEST_CASE("fully_shard: an unused parameter gets no gradient; no_grad gathers without recording", "[fsdp]") {
  using M = mesh<2>;
  using S = placements<shard<0>>;
  auto a = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<3>>>(dp_test::values(3, 5)), "a");
  auto unused = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<2>>>(dp_test::values(2, 6)), "u");
  const auto x = sim::distribute_tensor<layout<M, S, extents<4, 3>>>(dp_test::values(12, 7));
  auto unit = rt::fully_shard<0>(a, unused);
  auto y = unit.forward([&](const auto& A, const auto&) { return rt::sum<>(rt::as_variable(x) * A); });
  y.backward();
  CHECK(a.has_grad());
  CHECK_FALSE(unused.has_grad());
  auto a2 = rt::requires_grad(sim::distribute_tensor<layout<M, placements<replicate>, extents<3>>>(dp_test::values(3, 5)), "a2");
  rt::sum<>(rt::as_variable(x) * a2).backward();
  CHECK(a.grad().full_tensor() == a2.grad().full_tensor());
  {
    rt::no_grad guard;
    auto z = unit.forward([&](const auto& A, const auto&) { return rt::sum<>(rt::as_variable(x) * A); });
    CHECK_FALSE(z.requires_grad());
    CHECK(unit.gathered_bytes() == 0);
  }
}

namespace {

// The Megatron MLP, one device or FSDP × TP on (dp, tp) = (2, 4): 5 samples of 8 features,
// hidden 12, 8 outputs.
constexpr index_t mb = 5, mi = 8, mh = 12, mo = 8;

template <class M, class PW1, class PB1, class PW2, class PB2, class PX, bool Fsdp>
trained megatron() {
  using PY = PX;
  const std::vector<double> w1 = dp_test::values(mh * mi, 21), b1 = dp_test::values(mh, 22, 1e-4),
                            w2 = dp_test::values(mo * mh, 23), b2 = dp_test::values(mo, 24, 1e-4);
  auto W1 = rt::requires_grad(sim::distribute_tensor<layout<M, PW1, extents<mh, mi>>>(w1), "w1");
  auto B1 = rt::requires_grad(sim::distribute_tensor<layout<M, PB1, extents<mh>>>(b1), "b1");
  auto W2 = rt::requires_grad(sim::distribute_tensor<layout<M, PW2, extents<mo, mh>>>(w2), "w2");
  auto B2 = rt::requires_grad(sim::distribute_tensor<layout<M, PB2, extents<mo>>>(b2), "b2");
  rt::adamw opt({.lr = 0.01}, W1, B1, W2, B2);
  trained r;
  for (int step = 0; step < 3; ++step) {
    const auto x = sim::distribute_tensor<layout<M, PX, extents<mb, mi>>>(dp_test::values(mb * mi, 30 + step, 2e-3));
    const auto t = sim::distribute_tensor<layout<M, PY, extents<mb, mo>>>(dp_test::values(mb * mo, 40 + step));
    sim::comm_counter comm;
    auto mlp = [&](const auto& w1v, const auto& b1v, const auto& w2v, const auto& b2v) {
      auto h = rt::relu(rt::linear(rt::as_variable(x), w1v, b1v));
      return rt::add<PY>(rt::matmul_t(h, w2v), b2v);  // row-parallel: P(sum) on tp -> R
    };
    auto y = [&] {
      if constexpr (Fsdp) {
        auto up = rt::fully_shard<0>(W1, B1);
        auto down = rt::fully_shard<0>(W2, B2);
        static_assert(decltype(up)::collectives_per_step() == 3 && decltype(down)::collectives_per_step() == 3);
        auto h = up.forward([&](const auto& a, const auto& b) { return rt::relu(rt::linear(rt::as_variable(x), a, b)); });
        return down.forward([&](const auto& a, const auto& b) { return rt::add<PY>(rt::matmul_t(h, a), b); });
      } else {
        return mlp(W1, B1, W2, B2);
      }
    }();
    const int forward_all_reduces = comm.count(step_kind::all_reduce);
    sim::comm_counter of_loss;
    auto d = y - t;
    auto loss = rt::mean<>(d * d);
    const int loss_total = of_loss.total(), loss_gathers = of_loss.count(step_kind::all_gather);
    r.losses.push_back(loss.full_tensor()[0]);
    loss.backward();
    r.gathers.push_back(comm.count(step_kind::all_gather) - loss_gathers);
    r.scatters.push_back(comm.count(step_kind::reduce_scatter));
    r.all_reduces.push_back(forward_all_reduces);
    if constexpr (Fsdp) {
      // Per step: FSDP's 3 + 3, and the row-parallel layer's one all_reduce over tp (its
      // backward is the identity; x is data, so the column-parallel input gradient's
      // all_reduce does not run).
      using Product = layout<M, placements<shard<0>, partial<reduce_op::sum>>, extents<mb, mo>>;
      constexpr int tp_per_step = plan_of<Product, layout<M, PY, extents<mb, mo>>, double>::collectives();
      static_assert(tp_per_step == 1);
      CHECK(comm.total() - loss_total == 3 + 3 + tp_per_step);
    }
    opt.step();
    opt.zero_grad();
  }
  r.w1 = W1.full_tensor(), r.b1 = B1.full_tensor(), r.w2 = W2.full_tensor(), r.b2 = B2.full_tensor();
  return r;
}

}  // namespace

TEST_CASE("fully_shard × TP on a 2×4 mesh: the Megatron MLP trains as on one device", "[fsdp]") {
  using R = placements<replicate>;
  const trained one = megatron<mesh<1>, R, R, R, R, R, false>();
  using M = mesh<2, 4>;
  // Column-parallel W1, b1: tp splits the rows first, dp splits each tp block (shard order).
  using Col = placements<shard<0, 1>, shard<0, 0>>;
  // Row-parallel W2: dp on rows, tp on columns; b2: dp on its rows, replicated over tp.
  const trained two_d = megatron<M, Col, Col, placements<shard<0>, shard<1>>, placements<shard<0>, replicate>,
                                 placements<shard<0>, replicate>, true>();
  close_all(two_d, one, 1e-12);
  CHECK(two_d.gathers == std::vector<int>{4, 4, 4});
  CHECK(two_d.scatters == std::vector<int>{2, 2, 2});
  CHECK(two_d.all_reduces == std::vector<int>{1, 1, 1});
}

TEST_CASE("fully_shard with mixed precision: bf16 gathers and compute, f32 gradients and steps", "[fsdp]") {
  using M = mesh<4>;
  using S = placements<shard<0>>;
  const dp_test::init init;
  const auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto bf = [](const std::vector<double>& v) { return std::vector<spmd::bfloat16>(v.begin(), v.end()); };
  auto run = [&](auto policy) {
    using Policy = decltype(policy);
    auto w1 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<hidden, in>>>(f(init.w1)), "w1");
    auto b1 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<hidden>>>(f(init.b1)), "b1");
    auto unit = rt::fully_shard<0, Policy>(w1, b1);
    rt::adamw opt({.lr = 0.01}, w1, b1);
    std::vector<double> losses;
    std::int64_t gathered_bytes = 0;
    for (int step = 0; step < 3; ++step) {
      sim::comm_counter comm;
      auto h = unit.forward([&](const auto& W1, const auto& B1) {
        using C = typename std::remove_cvref_t<decltype(W1)>::element_type;
        if constexpr (std::is_same_v<C, spmd::bfloat16>) {
          const auto x = sim::distribute_tensor<layout<M, S, extents<batch, in>>>(bf(init.x(step)));
          return rt::relu(rt::linear(rt::as_variable(x), W1, B1));
        } else {
          const auto x = sim::distribute_tensor<layout<M, S, extents<batch, in>>>(f(init.x(step)));
          return rt::relu(rt::linear(rt::as_variable(x), W1, B1));
        }
      });
      gathered_bytes = comm.bytes(step_kind::all_gather);
      auto loss = rt::mean<>(h * h);
      losses.push_back(static_cast<double>(loss.full_tensor()[0]));
      loss.backward();
      static_assert(std::is_same_v<typename decltype(w1)::grad_type::value_type, float>);
      opt.step();
      opt.zero_grad();
    }
    return std::make_tuple(losses, w1.full_tensor(), gathered_bytes);
  };
  const auto [l32, w32, bytes32] = run(rt::mixed_precision<>{});
  const auto [l16, w16, bytes16] = run(rt::mixed_precision<spmd::bfloat16, float>{});
  // The all_gather moved bf16: half the bytes (the loss's own gather moves its type too).
  CHECK(bytes16 * 2 == bytes32);
  for (std::size_t i = 0; i < l32.size(); ++i) CHECK(std::abs(l16[i] - l32[i]) <= 2e-2 * std::abs(l32[i]) + 1e-6);
  // AdamW moves each weight by about lr per step whatever the gradient's scale: bf16 rounding
  // of the gradient can change a step's size, not its sign for these values.
  for (std::size_t i = 0; i < w32.size(); ++i) CHECK(std::abs(w16[i] - w32[i]) <= 1e-2);
}

namespace {

// The attention block with its heads split over tp, FSDP on dp: 4 sequences of 3 tokens,
// width 8, 4 heads of 2. The rows are the (sequence, token) pairs, sharded over dp by whole
// sequences; q, k, v are column-parallel (each tp rank one head), the output projection
// row-parallel. Scores are computed for all rows of a head at once and the pairs of different
// sequences masked out, so that the head is the batch dim of bmm.
constexpr index_t seqs = 4, toks = 3, rows = seqs * toks, width = 8, heads = 4, hd = 2;

template <class M, class PCol, class PRow, class PRowBias, class PX, bool Fsdp>
trained attention() {
  const auto init = [](unsigned seed, double scale) { return dp_test::values(width * width, seed, scale); };
  auto wq = rt::requires_grad(sim::distribute_tensor<layout<M, PCol, extents<width, width>>>(init(61, 3e-3)), "wq");
  auto wk = rt::requires_grad(sim::distribute_tensor<layout<M, PCol, extents<width, width>>>(init(62, 3e-3)), "wk");
  auto wv = rt::requires_grad(sim::distribute_tensor<layout<M, PCol, extents<width, width>>>(init(63, 1e-3)), "wv");
  auto wo = rt::requires_grad(sim::distribute_tensor<layout<M, PRow, extents<width, width>>>(init(64, 1e-3)), "wo");
  auto bo = rt::requires_grad(sim::distribute_tensor<layout<M, PRowBias, extents<width>>>(dp_test::values(width, 65, 1e-4)), "bo");
  std::vector<double> mask(rows * rows);
  for (index_t i = 0; i < rows; ++i)
    for (index_t j = 0; j < rows; ++j) mask[static_cast<std::size_t>(i * rows + j)] = i / toks == j / toks ? 0.0 : -1e9;
  using PMask = std::conditional_t<M::ndim == 2, placements<shard<0>, replicate>, placements<replicate>>;
  const auto m = sim::distribute_tensor<layout<M, PMask, extents<rows, rows>>>(mask);
  rt::adamw opt({.lr = 0.01}, wq, wk, wv, wo, bo);
  trained r;
  for (int step = 0; step < 3; ++step) {
    const auto x = sim::distribute_tensor<layout<M, PX, extents<rows, width>>>(dp_test::values(rows * width, 70 + step, 2e-3));
    const auto t = sim::distribute_tensor<layout<M, PX, extents<rows, width>>>(dp_test::values(rows * width, 80 + step));
    // One head per tp rank: (rows, width) -> (heads, rows, hd).
    auto split = [](const auto& y) { return rt::transpose<0, 1>(rt::reshape<rows, heads, hd>(y)); };
    auto core = [&](const auto& q, const auto& k, const auto& v) {
      auto s = rt::bmm(split(q), rt::transpose<1, 2>(split(k))) * (1.0 / std::sqrt(double(hd))) + m;
      auto o = rt::bmm(rt::softmax<2>(s), split(v));
      return rt::reshape<rows, width>(rt::transpose<0, 1>(o));
    };
    auto xv = rt::as_variable(x);
    auto y = [&] {
      if constexpr (Fsdp) {
        auto qkv = rt::fully_shard<0>(wq, wk, wv);
        auto out = rt::fully_shard<0>(wo, bo);
        static_assert(decltype(qkv)::collectives_per_step() == 3 && decltype(out)::collectives_per_step() == 3);
        auto o = qkv.forward([&](const auto& a, const auto& b, const auto& c) {
          return core(rt::matmul_t(xv, a), rt::matmul_t(xv, b), rt::matmul_t(xv, c));
        });
        return out.forward([&](const auto& a, const auto& b) { return rt::add<PX>(rt::matmul_t(o, a), b); });
      } else {
        auto o = core(rt::matmul_t(xv, wq), rt::matmul_t(xv, wk), rt::matmul_t(xv, wv));
        return rt::add<PX>(rt::matmul_t(o, wo), bo);
      }
    }();
    auto d = y - t;
    auto loss = rt::mean<>(d * d);
    r.losses.push_back(loss.full_tensor()[0]);
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  r.w1 = wq.full_tensor(), r.b1 = wk.full_tensor(), r.w2 = wo.full_tensor(), r.b2 = bo.full_tensor();
  std::vector<double> v = wv.full_tensor();
  r.w1.insert(r.w1.end(), v.begin(), v.end());
  return r;
}

}  // namespace

TEST_CASE("fully_shard × TP on a 2×4 mesh: the attention block (a head per tp rank) trains as on one device",
          "[fsdp]") {
  using R = placements<replicate>;
  const trained one = attention<mesh<1>, R, R, R, R, false>();
  using M = mesh<2, 4>;
  const trained two_d = attention<M, placements<shard<0, 1>, shard<0, 0>>, placements<shard<0>, shard<1>>,
                                  placements<shard<0>, replicate>, placements<shard<0>, replicate>, true>();
  close_all(two_d, one, 1e-10);
  // Training moved the weights (the comparison is not of the initial values).
  CHECK(one.w2 != dp_test::values(width * width, 64, 1e-3));
}
