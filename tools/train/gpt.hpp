// tools/train/gpt.hpp — the gpt model of `spmd-train` (docs/training.md): vocabulary 64,
// context 16, width 32, 4 heads of 8, 2 pre-norm blocks, batch 8.
//
//   h = wte[tokens] + wpe
//   per block:  a = ln1(h);  q, k, v = a wqᵀ, a wkᵀ, a wvᵀ  (4 heads of 8)
//               h = h + (softmax(q kᵀ / √8 + causal) v, heads concatenated) woᵀ
//               h = h + gelu_tanh(ln2(h) w1ᵀ + b1) w2ᵀ + b2
//   loss = cross_entropy(ln_f(h) lm_headᵀ, targets), mean over the 8 × 16 positions
//
// Tensor parallel (Megatron): wq, wk, wv column-parallel (the heads split over tp), wo
// row-parallel, mlp.w1/b1 column, mlp.w2 row, lm_head split by vocabulary with the
// vocabulary-parallel cross entropy (the logits are never gathered); the rest replicated on
// tp. Attention is runtime::causal_attention over heads of 8 on (batch, position, width): batch
// on dp, the width (whole heads) on tp; one operator each way on the host backends, bmm and
// softmax composed on the devices. Under FSDP the units are the embeddings, each block, and the
// final norm with lm_head (torchtitan's wrapping).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "model_common.hpp"

namespace spmd_train {

/// The gpt model's sizes: spmd-train's (the defaults), or wider ones for bench/train_step.
template <index_t Vocab = 64, index_t Context = 16, index_t Width = 32, index_t Heads = 4, index_t Batch = 8>
struct gpt_sizes {
  static constexpr index_t vocab = Vocab, context = Context, width = Width, heads = Heads, batch = Batch;
};

template <class Cfg, class Sizes = gpt_sizes<>>
struct gpt_model {
  static constexpr index_t vocab = Sizes::vocab, context = Sizes::context, width = Sizes::width,
                           heads = Sizes::heads, head_dim = width / heads, batch = Sizes::batch;
  static_assert(width % heads == 0, "spmd-train gpt: the heads must split the width evenly");
  static constexpr double ln_eps = 1e-5;
  using Tc = typename Cfg::compute;
  using col = typename Cfg::column;
  using row = typename Cfg::row;
  using rep = typename Cfg::replicated;
  template <class Role, index_t... E>
  using param = typename Cfg::template param<Role, E...>;
  using act = typename Cfg::batch_placements;
  static constexpr index_t static_tp = Cfg::mesh::static_shape()[1];  // spmd::dyn: given at run time
  static_assert(static_tp == spmd::dyn || heads % static_tp == 0, "spmd-train gpt: tp must divide the heads");
  /// Whether tensor parallelism over tp ranks can split the model (whole heads per rank).
  static constexpr bool tp_fits(index_t tp) { return tp >= 1 && heads % tp == 0; }

  struct block {
    param<rep, width> ln1_w, ln1_b;
    param<col, width, width> wq, wk, wv;
    param<row, width, width> wo;
    param<rep, width> ln2_w, ln2_b;
    param<col, 4 * width, width> w1;
    param<col, 4 * width> b1;
    param<row, width, 4 * width> w2;
    param<rep, width> b2;

    auto params() { return std::tie(ln1_w, ln1_b, wq, wk, wv, wo, ln2_w, ln2_b, w1, b1, w2, b2); }
    static block load(const inputs& in, int i) {
      static constexpr const char* names[] = {"ln1.weight", "ln1.bias", "attn.wq", "attn.wk", "attn.wv", "attn.wo",
                                              "ln2.weight", "ln2.bias", "mlp.w1",  "mlp.b1",  "mlp.w2",  "mlp.b2"};
      const std::string p = "blocks." + std::to_string(i) + ".";
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        using all = decltype(std::declval<block&>().params());
        return block{Cfg::template load<std::remove_cvref_t<std::tuple_element_t<I, all>>>(in, p + names[I])...};
      }(std::make_index_sequence<12>{});
    }
  };

  param<rep, vocab, width> wte;
  param<rep, context, width> wpe;
  std::array<block, 2> blocks;
  param<rep, width> lnf_w, lnf_b;
  param<col, vocab, width> lm_head;

  static gpt_model load(const inputs& in) {
    if (!tp_fits(Cfg::tp()))
      throw std::invalid_argument("spmd-train gpt: tensor parallel over " + std::to_string(Cfg::tp()) +
                                  " ranks does not divide the " + std::to_string(heads) + " heads");
    return {Cfg::template load<decltype(wte)>(in, "wte"), Cfg::template load<decltype(wpe)>(in, "wpe"),
            {block::load(in, 0), block::load(in, 1)},
            Cfg::template load<decltype(lnf_w)>(in, "ln_f.weight"), Cfg::template load<decltype(lnf_b)>(in, "ln_f.bias"),
            Cfg::template load<decltype(lm_head)>(in, "lm_head")};
  }
  /// Every parameter, in the spec's order (the optimizer's, --save's): one flat tuple.
  auto params() {
    block& a = blocks[0];
    block& b = blocks[1];
    return std::tie(wte, wpe,  //
                    a.ln1_w, a.ln1_b, a.wq, a.wk, a.wv, a.wo, a.ln2_w, a.ln2_b, a.w1, a.b1, a.w2, a.b2,
                    b.ln1_w, b.ln1_b, b.wq, b.wk, b.wv, b.wo, b.ln2_w, b.ln2_b, b.w1, b.b1, b.w2, b.b2,
                    lnf_w, lnf_b, lm_head);
  }

  template <class H, class... W>
  static auto block_forward(const H& h, const W&... w) {
    const auto& [ln1_w, ln1_b, wq, wk, wv, wo, ln2_w, ln2_b, w1, b1, w2, b2] = std::tie(w...);
    auto a = rt::layer_norm<1>(h, ln1_w, ln1_b, ln_eps);
    // heads of head_dim: softmax(q kᵀ / √head_dim + causal) v, one operator on host backends
    auto y = rt::causal_attention<head_dim>(rt::matmul_t(a, wq), rt::matmul_t(a, wk), rt::matmul_t(a, wv));
    auto h1 = rt::add<act>(h, rt::matmul_t(y, wo));  // row-parallel: one all_reduce over tp
    auto u = rt::gelu_tanh(rt::linear(rt::layer_norm<1>(h1, ln2_w, ln2_b, ln_eps), w1, b1));
    return rt::add<act>(h1, rt::matmul_t(u, w2)) + b2;
  }

  /// Step s: the forward of its batch, then finish(loss) (the backward) while the FSDP units
  /// or the DDP model live.
  template <class Finish>
  auto step(const inputs& in, std::int64_t s, Finish&& finish) {
    return forward<true>(in, s, std::forward<Finish>(finish));
  }
  /// The forward of batch s up to the logits (batch, context, vocabulary; the vocabulary split
  /// over tp), given to use(logits) while the units live: what the model predicts.
  template <class Use>
  auto predict(const inputs& in, std::int64_t s, Use&& use) {
    return forward<false>(in, s, std::forward<Use>(use));
  }

 private:
  template <bool Loss, class Finish>
  auto forward(const inputs& in, std::int64_t s, Finish&& finish) {
    const auto tokens = Cfg::template batch_of<std::int64_t, batch, context>(in, "tokens", in.tokens, s);
    const auto targets = Cfg::template batch_of<std::int64_t, batch, context>(in, "targets", in.targets, s);
    return Cfg::template with_params<2, 12, 12, 3>(
        params(),
        [&](auto&& embed, auto&& block0, auto&& block1, auto&& head) {
          auto h0 = embed([&](const auto& te, const auto& pe) { return rt::embedding(tokens, te) + pe; });
          auto h1 = block0([&](const auto&... w) { return block_forward(h0, w...); });
          auto h2 = block1([&](const auto&... w) { return block_forward(h1, w...); });
          auto logits = head([&](const auto& g, const auto& b, const auto& lm) {
            return rt::matmul_t(rt::layer_norm<1>(h2, g, b, ln_eps), lm);
          });
          if constexpr (!Loss) return logits;
          else if constexpr (std::is_same_v<Tc, float>) return rt::vocab_parallel_cross_entropy<vocab>(logits, targets);
          else return rt::vocab_parallel_cross_entropy<vocab>(rt::cast<float>(logits), targets);
        },
        finish);
  }
};

}  // namespace spmd_train
