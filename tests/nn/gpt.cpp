// tests/nn/gpt.cpp — the library's gpt (nn/gpt.hpp): its parameters as GPT-2 and spmd-train name
// them, and the layouts Megatron's plan and torchtitan's units give them beside FSDP or DDP
// (as types). Its training numbers are spmd-train's (tests/training/test_train.py: the first
// loss against numpy from the definition, every mesh against one device).
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/nn/gpt.hpp"
#include "spmd/sim/sim.hpp"

namespace nn = spmd::nn;
using spmd::placements;
using spmd::replicate;
using spmd::shard;

namespace {

using G = nn::gpt<64, 16, 32, 4, 2>;
using Mesh = spmd::mesh<2, 4>::named<"dp", "tp">;
using B = spmd::sim::backend;
using fsdp_tp = decltype(nn::parallelize<Mesh, B, nn::tensor_parallel<"tp", nn::gpt_megatron>,
                                         nn::fsdp<"dp", nn::gpt_fsdp_units>>(std::declval<const G&>()));
using ddp_tp = decltype(nn::parallelize<Mesh, B, nn::tensor_parallel<"tp", nn::gpt_megatron>, nn::ddp<"dp">>(
    std::declval<const G&>()));

template <class M>
const M& model();
template <class X>
using placements_of = typename std::remove_cvref_t<X>::placements_type;

// Megatron on tp beside FSDP on dp: a colwise weight Shard(0) on tp, dp splitting after it
using wq = decltype(get<"wq">(get<"attn">(get<"blocks">(model<fsdp_tp>())[0])));
static_assert(std::is_same_v<placements_of<wq>, placements<shard<0, 1>, shard<0, 0>>>);
using wo = decltype(get<"wo">(get<"attn">(get<"blocks">(model<fsdp_tp>())[1])));
static_assert(std::is_same_v<placements_of<wo>, placements<shard<0>, shard<1>>>);
using b1 = decltype(get<"b1">(get<"mlp">(get<"blocks">(model<fsdp_tp>())[0])));
static_assert(std::is_same_v<placements_of<b1>, placements<shard<0, 1>, shard<0, 0>>>);
using b2 = decltype(get<"b2">(get<"mlp">(get<"blocks">(model<fsdp_tp>())[0])));
static_assert(std::is_same_v<placements_of<b2>, placements<shard<0>, replicate>>);
using lm_head = decltype(get<"lm_head">(model<fsdp_tp>()));  // split by vocabulary
static_assert(std::is_same_v<placements_of<lm_head>, placements<shard<0, 1>, shard<0, 0>>>);
using wte = decltype(get<"wte">(model<fsdp_tp>()));
static_assert(std::is_same_v<placements_of<wte>, placements<shard<0>, replicate>>);
// torchtitan's units: each block, and the model (embeddings, ln_f, lm_head)
static_assert(nn::detail::is_unit_node_v<fsdp_tp>);
static_assert(nn::detail::is_unit_node_v<std::remove_cvref_t<decltype(get<"blocks">(model<fsdp_tp>())[0])>>);
static_assert(!nn::detail::is_unit_node_v<std::remove_cvref_t<decltype(get<"ln_f">(model<fsdp_tp>()))>>);
// DDP: replicated on dp
using wq_ddp = decltype(get<"wq">(get<"attn">(get<"blocks">(model<ddp_tp>())[0])));
static_assert(std::is_same_v<placements_of<wq_ddp>, placements<replicate, shard<0>>>);

}  // namespace

TEST_CASE("nn::gpt: parameters named as GPT-2 and spmd-train name them, in its order", "[nn]") {
  constexpr auto paths = nn::parameter_paths<G>();
  std::vector<std::string> want = {"wte", "wpe"};
  for (const std::string b : {"blocks.0.", "blocks.1."})
    for (const char* p : {"ln1.weight", "ln1.bias", "attn.wq", "attn.wk", "attn.wv", "attn.wo", "ln2.weight",
                          "ln2.bias", "mlp.w1", "mlp.b1", "mlp.w2", "mlp.b2"})
      want.push_back(b + p);
  for (const char* p : {"ln_f.weight", "ln_f.bias", "lm_head"}) want.push_back(p);
  CHECK(std::vector<std::string>(paths.begin(), paths.end()) == want);
  // the shapes: GPT-2's, the MLP 4 × the width
  G g;
  CHECK(g.wte.data.size() == 64 * 32);
  CHECK(g.wpe.data.size() == 16 * 32);
  CHECK(g.blocks[1].mlp.w1.data.size() == 128 * 32);
  CHECK(g.lm_head.data.size() == 64 * 32);
  CHECK(g.ln_f.weight.data == std::vector<float>(32, 1.f));  // LayerNorm starts at ones
}
