// spmd/nn/gpt_stages.hpp — nn::gpt cut into pieces for pipeline parallelism: the embedding,
// each block, and the head (ln_f and lm_head), each a module of its own that parallelize
// places (Megatron's plan on tp, FSDP or DDP on dp) and a pipeline stage runs.
//
//   using G = spmd::nn::gpt<64, 16, 32, 4, 2>;
//   G host;                                            // its parameters
//   auto emb  = parallelize<Mesh, B, ...>(spmd::nn::embedding_of(host));
//   auto blk0 = parallelize<Mesh, B, tensor_parallel<"tp", gpt_block_megatron>, ...>(host.blocks[0]);
//   auto head = parallelize<Mesh, B, tensor_parallel<"tp", gpt_head_megatron>, ...>(spmd::nn::head_of(host));
//   h = emb(tokens); h = blk0(h); ...; logits = head(h)      // gpt::forward, piece by piece
//
// The pieces are gpt's Layers + 2 in this order (gpt_pieces). A pipeline of S stages takes
// them in S equal runs, so S must divide Layers + 2 (piece_range; spmd-train's gpt of 2 blocks:
// 1, 2 or 4 stages). The parameters keep gpt's names under the piece's path (wte, wpe;
// blocks.{i}.*; ln_f.*, lm_head): piece_path(i) is the prefix.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include <boost/hana/define_struct.hpp>

#include "spmd/core/extents.hpp"
#include "spmd/nn/gpt.hpp"
#include "spmd/nn/modules.hpp"
#include "spmd/nn/parallelize.hpp"

namespace spmd::nn {

/// gpt's first piece: h = wte[tokens] + wpe.
template <index_t Vocab, index_t Context, index_t Dim, class T = float>
struct gpt_embedding {
  BOOST_HANA_DEFINE_STRUCT(gpt_embedding, (tensor<T, extents<Vocab, Dim>>, wte), (tensor<T, extents<Context, Dim>>, wpe));
  template <class M, class Tokens>
  static auto forward(const M& m, const Tokens& tokens) {
    return runtime::embedding(tokens, get<"wte">(m)) + get<"wpe">(m);
  }
};

/// gpt's last piece: logits = ln_f(h) · lm_headᵀ.
template <index_t Vocab, index_t Dim, class T = float>
struct gpt_head {
  BOOST_HANA_DEFINE_STRUCT(gpt_head, (layer_norm<Dim, T>, ln_f), (tensor<T, extents<Vocab, Dim>>, lm_head));
  template <class M, class H>
  static auto forward(const M& m, const H& h) {
    return runtime::matmul_t(get<"ln_f">(m)(h), get<"lm_head">(m));
  }
};

/// gpt_megatron for one block and for the head: the same styles, the paths within the piece.
using gpt_block_megatron = tp_plan<rule<"attn.wq", colwise>, rule<"attn.wk", colwise>, rule<"attn.wv", colwise>,
                                   rule<"attn.wo", rowwise>, rule<"mlp.w1", colwise>, rule<"mlp.b1", colwise>,
                                   rule<"mlp.w2", rowwise>>;
using gpt_head_megatron = tp_plan<rule<"lm_head", colwise>>;

/// The pieces of a gpt host, holding copies of its parameters.
template <index_t V, index_t C, index_t D, index_t H, std::size_t L, class T>
gpt_embedding<V, C, D, T> embedding_of(const gpt<V, C, D, H, L, T>& g) {
  gpt_embedding<V, C, D, T> e;
  e.wte = g.wte;
  e.wpe = g.wpe;
  return e;
}
template <index_t V, index_t C, index_t D, index_t H, std::size_t L, class T>
gpt_head<V, D, T> head_of(const gpt<V, C, D, H, L, T>& g) {
  gpt_head<V, D, T> h;
  h.ln_f = g.ln_f;
  h.lm_head = g.lm_head;
  return h;
}

/// Pieces of a gpt of `layers` blocks: the embedding, the blocks, the head.
constexpr int gpt_pieces(std::size_t layers) { return static_cast<int>(layers) + 2; }

/// The pieces [first, last) of stage s of a pipeline of `stages` over `pieces` pieces;
/// std::invalid_argument naming the numbers when `stages` does not divide `pieces`.
struct piece_run {
  int first, last;
};
inline piece_run piece_range(int pieces, int stages, int s) {
  if (stages < 1 || pieces % stages != 0)
    throw std::invalid_argument("a model of " + std::to_string(pieces) + " pieces (the embedding, " +
                                std::to_string(pieces - 2) + " blocks, the head) cannot be cut into " +
                                std::to_string(stages) + " equal pipeline stages");
  const int per = pieces / stages;
  return {s * per, (s + 1) * per};
}

/// The path prefix of piece i's parameters in the whole model ("" for the embedding and the
/// head, whose names are gpt's; "blocks.{i-1}." for a block).
inline std::string piece_path(int pieces, int i) {
  return i == 0 || i == pieces - 1 ? std::string() : "blocks." + std::to_string(i - 1) + ".";
}

}  // namespace spmd::nn
