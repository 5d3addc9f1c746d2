// tools/train/mlp.hpp — the mlp model of `spmd-train` (docs/training.md):
//
//   loss = cross_entropy(relu(x @ w1ᵀ + b1) @ w2ᵀ + b2, labels)      x (16, 32), 16 classes
//
// w1, b1 column-parallel and w2 row-parallel over tp (one all_reduce forward, none backward:
// x is data); b2 replicated. The batch is sharded on dp. Under FSDP each layer is a unit.
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "model_common.hpp"

namespace spmd_train {

template <class Cfg>
struct mlp_model {
  static constexpr index_t batch = 16, d_in = 32, hidden = 64, classes = 16;
  using Tc = typename Cfg::compute;
  using col = typename Cfg::column;
  using row = typename Cfg::row;
  using rep = typename Cfg::replicated;

  typename Cfg::template param<col, hidden, d_in> w1;
  typename Cfg::template param<col, hidden> b1;
  typename Cfg::template param<row, classes, hidden> w2;
  typename Cfg::template param<rep, classes> b2;

  static mlp_model load(const inputs& in) {
    return {Cfg::template load<decltype(w1)>(in, "w1"), Cfg::template load<decltype(b1)>(in, "b1"),
            Cfg::template load<decltype(w2)>(in, "w2"), Cfg::template load<decltype(b2)>(in, "b2")};
  }
  /// Every parameter, in the spec's order (the optimizer's, --save's).
  auto params() { return std::tie(w1, b1, w2, b2); }

  /// Step s: the forward of its batch, then finish(loss) (the backward) while the FSDP units
  /// or the DDP model live.
  template <class Finish>
  auto step(const inputs& in, std::int64_t s, Finish&& finish) {
    const auto x = Cfg::template batch_of<Tc, batch, d_in>(in, "x", in.x, s);
    const auto labels = Cfg::template batch_of<std::int64_t, batch>(in, "labels", in.labels, s);
    return Cfg::template with_params<2, 2>(
        params(),
        [&](auto&& up, auto&& down) {
          auto h = up([&](const auto& a, const auto& b) { return rt::relu(rt::linear(rt::as_variable(x), a, b)); });
          auto logits = down([&](const auto& a, const auto& b) {
            return rt::add<typename Cfg::batch_placements>(rt::matmul_t(h, a), b);
          });
          if constexpr (std::is_same_v<Tc, float>) return rt::cross_entropy<classes>(logits, labels);
          else return rt::cross_entropy<classes>(rt::cast<float>(logits), labels);  // the loss in f32
        },
        finish);
  }
};

}  // namespace spmd_train
