// spmd/nn/gpt.hpp — GPT-2's architecture as a host model of the library's modules, with the
// plans that parallelise it as Megatron and torchtitan do (spmd-train's gpt, docs/models.md).
//
//   using G = spmd::nn::gpt<64, 16, 32, 4, 2>;   // vocabulary, context, width, heads, blocks
//   G host;                                      // parameters: load or fill them
//   auto m = spmd::nn::parallelize<Mesh, B, spmd::nn::tensor_parallel<"tp", spmd::nn::gpt_megatron>,
//                                  spmd::nn::fsdp<"dp", spmd::nn::gpt_fsdp_units>>(host);
//   auto logits = m(tokens);   // (batch, context, vocabulary), the vocabulary split on tp
//   auto loss = spmd::runtime::vocab_parallel_cross_entropy<64>(logits, targets);
//
//   h = wte[tokens] + wpe
//   per block:  h = h + attn(ln1(h));  h = h + mlp(ln2(h))        (nn::transformer_block)
//   logits = ln_f(h) · lm_headᵀ
//
// Parameters as GPT-2 names them, lm_head untied: wte (Vocab, Dim), wpe (Context, Dim),
// blocks.{i}.{ln1, attn, ln2, mlp}.*, ln_f.{weight, bias}, lm_head (Vocab, Dim).
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

#include <boost/hana/define_struct.hpp>

#include "spmd/core/extents.hpp"
#include "spmd/nn/modules.hpp"
#include "spmd/nn/parallelize.hpp"
#include "spmd/runtime/autograd/elementwise.hpp"
#include "spmd/runtime/autograd/matmul.hpp"
#include "spmd/runtime/autograd/nn.hpp"

namespace spmd::nn {

/// GPT-2 (pre-norm blocks, learned positions, an untied head) over token ids (batch, Context).
template <index_t Vocab, index_t Context, index_t Dim, index_t Heads, std::size_t Layers, class T = float>
struct gpt {
  static_assert(Layers >= 1, "spmd::nn::gpt: give at least one block.");
  static constexpr index_t vocab = Vocab, context = Context, dim = Dim, heads = Heads;
  static constexpr std::size_t layers = Layers;
  BOOST_HANA_DEFINE_STRUCT(gpt, (tensor<T, extents<Vocab, Dim>>, wte), (tensor<T, extents<Context, Dim>>, wpe),
                           (std::array<transformer_block<Dim, Heads, 4 * Dim, T>, Layers>, blocks),
                           (layer_norm<Dim, T>, ln_f), (tensor<T, extents<Vocab, Dim>>, lm_head));

  template <class M, class Tokens>
  static auto forward(const M& m, const Tokens& tokens) {
    auto h = runtime::embedding(tokens, get<"wte">(m)) + get<"wpe">(m);
    for (const auto& block : get<"blocks">(m)) {
      static_assert(std::is_same_v<decltype(block(h)), decltype(h)>,
                    "spmd::nn::gpt: a block's output should keep its input's layout (the residual sums do).");
      h = block(h);
    }
    return runtime::matmul_t(get<"ln_f">(m)(h), get<"lm_head">(m));
  }
};

/// Megatron's tensor parallelism for gpt: attention's q, k, v colwise (whole heads per rank:
/// the ranks must divide Heads) and its output rowwise; the MLP's first layer colwise and its
/// second rowwise; lm_head split by vocabulary (colwise: the logits stay split, for
/// runtime::vocab_parallel_cross_entropy). The embeddings and norms are replicated.
using gpt_megatron = tp_plan<rule<"blocks.*.attn.wq", colwise>, rule<"blocks.*.attn.wk", colwise>,
                             rule<"blocks.*.attn.wv", colwise>, rule<"blocks.*.attn.wo", rowwise>,
                             rule<"blocks.*.mlp.w1", colwise>, rule<"blocks.*.mlp.b1", colwise>,
                             rule<"blocks.*.mlp.w2", rowwise>, rule<"lm_head", colwise>>;

/// FSDP units as torchtitan wraps a transformer: each block, and the model (the embeddings,
/// ln_f and lm_head, gathered for the whole forward).
using gpt_fsdp_units = units<"blocks.*", "">;

}  // namespace spmd::nn
