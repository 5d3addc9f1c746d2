// tests/nn/transformer.cpp — a small gpt of the library's modules (embedding, transformer blocks
// of causal attention and MLP, layer norm, a vocabulary-parallel head), Megatron's plan on tp
// and an FSDP unit per block on dp: on 2x2 it trains as on one device.
#include <array>
#include <bit>
#include <functional>
#include <memory>
#include <map>
#include <string>
#include <cmath>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include <boost/hana/adapt_struct.hpp>
#include <catch2/catch.hpp>

#include "spmd/nn/modules.hpp"
#include "spmd/nn/parallelize.hpp"
#include "spmd/nn/unit_choice.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/optim.hpp"
#include "spmd/sim/sim.hpp"

namespace rt = spmd::runtime;
namespace nn = spmd::nn;
using spmd::index_t;

namespace {

constexpr index_t vocab = 16, context = 6, width = 8, heads = 2, batch = 4;

// [docs:nn-gpt]
struct tiny_gpt {
  nn::embedding<vocab, width> wte;
  spmd::tensor<float, spmd::extents<context, width>> wpe;  // a parameter of the model itself
  std::array<nn::transformer_block<width, heads>, 2> blocks;
  nn::layer_norm<width> ln_f;
  nn::linear<width, vocab, false> lm_head;

  template <class M, class Tokens>
  static auto forward(const M& m, const Tokens& tokens) {
    const auto h0 = get<"wte">(m)(tokens) + get<"wpe">(m);
    const auto& b = get<"blocks">(m);
    const auto h2 = b[1](b[0](h0));
    return get<"lm_head">(m)(get<"ln_f">(m)(h2));  // logits, the vocabulary split on tp
  }
};
// [/docs:nn-gpt]

}  // namespace

BOOST_HANA_ADAPT_STRUCT(tiny_gpt, wte, wpe, blocks, ln_f, lm_head);

namespace {

using B = spmd::sim::backend;
// [docs:nn-megatron]
using megatron = nn::tp_plan<nn::rule<"blocks.*.attn.wq", nn::colwise>, nn::rule<"blocks.*.attn.wk", nn::colwise>,
                             nn::rule<"blocks.*.attn.wv", nn::colwise>, nn::rule<"blocks.*.attn.wo", nn::rowwise>,
                             nn::rule<"blocks.*.mlp.w1", nn::colwise>, nn::rule<"blocks.*.mlp.b1", nn::colwise>,
                             nn::rule<"blocks.*.mlp.w2", nn::rowwise>, nn::rule<"lm_head.weight", nn::colwise>>;
using torchtitan = nn::fsdp<"dp", nn::units<"blocks.*", "">>;
// [/docs:nn-megatron]

// [docs:nn-sp]
// Megatron's sequence parallelism: the residual stream and the norms split by position on tp;
// attention and the MLP gather the positions first, their rowwise outputs reduce-scattered back.
using sp_modules = nn::tp_plan<nn::rule<"blocks.*", nn::sequence_parallel<1>>,
                               nn::rule<"blocks.*.ln1", nn::sequence_parallel<1>>,
                               nn::rule<"blocks.*.ln2", nn::sequence_parallel<1>>,
                               nn::rule<"blocks.*.attn", nn::prepare_io<spmd::replicate, spmd::shard<1>>>,
                               nn::rule<"blocks.*.mlp", nn::prepare_io<spmd::replicate, spmd::shard<1>>>,
                               nn::rule<"ln_f", nn::sequence_parallel<1>>,
                               nn::rule<"lm_head", nn::prepare_input<spmd::replicate>>>;
// [/docs:nn-sp]
template <class... A, class... B>
auto cat_plans(nn::tp_plan<A...>*, nn::tp_plan<B...>*) -> nn::tp_plan<A..., B...>;
using megatron_sp = decltype(cat_plans(static_cast<sp_modules*>(nullptr), static_cast<megatron*>(nullptr)));

tiny_gpt random_gpt() {
  tiny_gpt g;
  std::mt19937 r(3);
  std::normal_distribution<float> n(0.f, 0.2f);
  const auto fill = [&](std::vector<float>& v) {
    for (float& x : v) x = n(r);
  };
  fill(g.wte.weight.data);
  fill(g.wpe.data);
  for (auto& b : g.blocks) {
    for (auto* t : {&b.attn.wq.data, &b.attn.wk.data, &b.attn.wv.data, &b.attn.wo.data, &b.mlp.w1.data,
                    &b.mlp.b1.data, &b.mlp.w2.data, &b.mlp.b2.data})
      fill(*t);
  }
  fill(g.lm_head.weight.data);
  return g;
}

struct run_result {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;  // after the first step, every parameter
  std::array<int, 4> forward{};  // the first step's forward: all_gather, all_reduce, reduce_scatter, all_to_all
};

/// Three steps of model m on a counting sequence's batch (split on dp): the losses, the first
/// forward's collectives, the first step's gradients (grads(out) appends them in
/// parameter_paths' order); step() runs the optimizers.
template <class Mesh, class M, class Grads, class Step>
run_result run_steps(const M& m, Grads&& grads, Step&& step) {
  using LT = spmd::layout<Mesh, spmd::placements<spmd::shard<0>, spmd::replicate>, spmd::extents<batch, context>>;
  std::vector<std::int64_t> tok(batch * context), next(batch * context);
  for (index_t i = 0; i < batch * context; ++i) {
    tok[static_cast<std::size_t>(i)] = (3 * i + 1) % vocab;
    next[static_cast<std::size_t>(i)] = (3 * i + 4) % vocab;  // the next token of a counting sequence
  }
  const auto tokens = spmd::sim::distribute_tensor<LT>(tok);
  const auto targets = spmd::sim::distribute_tensor<LT>(next);
  run_result r;
  for (int s = 0; s < 3; ++s) {
    std::optional<rt::comm_counter> c(std::in_place);
    auto loss = rt::vocab_parallel_cross_entropy<vocab>(m(tokens), targets);
    if (s == 0)
      r.forward = {c->count(spmd::step_kind::all_gather), c->count(spmd::step_kind::all_reduce),
                   c->count(spmd::step_kind::reduce_scatter), c->count(spmd::step_kind::all_to_all)};
    c.reset();
    loss.backward();
    r.losses.push_back(static_cast<double>(loss.value().full_tensor()[0]));
    if (s == 0) grads(r.grads);
    step();
  }
  return r;
}

template <class Mesh, class... Ps>
run_result train(const tiny_gpt& host) {
  auto m = nn::parallelize<Mesh, B, Ps...>(host);
  auto opt = std::apply([](auto&... p) { return rt::adamw({.lr = 0.02}, p...); }, nn::parameters(m));
  return run_steps<Mesh>(
      m,
      [&](std::vector<std::vector<float>>& out) {
        std::apply([&](auto&... p) { (out.push_back(p.grad().full_tensor()), ...); }, nn::parameters(m));
      },
      [&] {
        opt.step();
        opt.zero_grad();
      });
}

/// train's run with each unit held as `hold` says (nn::parallelize_per_unit): an AdamW per unit,
/// the gradients by path.
template <class Mesh>
run_result train_per_unit(const tiny_gpt& host, const nn::unit_chooser& hold, std::vector<std::string>* order = nullptr) {
  auto m = nn::parallelize_per_unit<Mesh, B, nn::tensor_parallel<"tp", megatron>, nn::dp_per_unit<"dp", nn::units<"blocks.*", "">>>(
      host, hold);
  std::vector<std::function<void()>> steps;
  nn::for_each_unit(m, [&](std::string_view unit, nn::dp_hold how, auto params) {
    if (order) order->push_back(std::string(unit) + ":" + nn::name_of(how));
    auto opt = std::apply([](auto&... p) { return std::make_shared<decltype(rt::adamw({}, p...))>(rt::adamw({.lr = 0.02}, p...)); },
                          params);
    steps.push_back([opt] {
      opt->step();
      opt->zero_grad();
    });
  });
  return run_steps<Mesh>(
      m,
      [&](std::vector<std::vector<float>>& out) {
        std::map<std::string, std::vector<float>> by_path;
        nn::for_each_unit(m, [&](std::string_view, nn::dp_hold, auto params) {
          std::apply([&](auto&... p) { ((by_path[p.name()] = p.grad().full_tensor()), ...); }, params);
        });
        for (const std::string_view path : nn::parameter_paths<tiny_gpt>()) out.push_back(by_path.at(std::string(path)));
      },
      [&] {
        for (auto& s : steps) s();
      });
}

}  // namespace

TEST_CASE("nn: FSDP or DDP chosen per unit at run time trains as one device, in every mix", "[nn]") {
  using M11 = spmd::mesh<1, 1>::named<"dp", "tp">;
  using D = spmd::mesh<spmd::dyn, spmd::dyn>::named<"dp", "tp">;
  const tiny_gpt host = random_gpt();
  const run_result one = train<M11, nn::tensor_parallel<"tp", megatron>, torchtitan>(host);
  const std::vector<std::string_view> units = nn::unit_paths<tiny_gpt, nn::units<"blocks.*", "">>();
  REQUIRE(units == std::vector<std::string_view>{"", "blocks.0", "blocks.1"});
  CHECK(nn::owning_unit("wte.weight", units) == 0);
  CHECK(nn::owning_unit("blocks.1.mlp.w1", units) == 2);
  CHECK(nn::owning_unit("lm_head.weight", units) == 0);
  spmd::bind_mesh<D>(spmd::dims<2>{2, 2});
  int all_ddp_gathers = -1;
  for (unsigned mix = 0; mix < 8; ++mix) {  // bit u: unit u under FSDP
    const auto hold = [&](std::string_view u) {
      for (std::size_t i = 0; i < units.size(); ++i)
        if (units[i] == u) return (mix >> i) & 1u ? nn::dp_hold::fsdp : nn::dp_hold::ddp;
      FAIL("not a unit: " << u);
      return nn::dp_hold::ddp;
    };
    std::vector<std::string> order;
    const run_result r = train_per_unit<D>(host, hold, &order);
    INFO("mix " << mix);
    REQUIRE(order.size() == 3);
    for (std::size_t i = 0; i < 3; ++i)
      CHECK(order[i] == std::string(units[i]) + ":" + nn::name_of(hold(units[i])));
    for (std::size_t s = 0; s < one.losses.size(); ++s)
      CHECK(std::abs(r.losses[s] - one.losses[s]) <= 1e-5 * std::abs(one.losses[s]));
    double worst = 0;
    REQUIRE(r.grads.size() == one.grads.size());
    for (std::size_t i = 0; i < one.grads.size(); ++i)
      for (std::size_t k = 0; k < one.grads[i].size(); ++k)
        worst = std::max(worst, static_cast<double>(std::abs(r.grads[i][k] - one.grads[i][k])));
    CHECK(worst <= 1e-5);
    // each FSDP unit gathers its parameters in one all_gather before its forward; DDP gathers none
    if (mix == 0) all_ddp_gathers = r.forward[0];
    CHECK(r.forward[0] == all_ddp_gathers + std::popcount(mix));
  }
}

TEST_CASE("nn: a gpt of the library's modules, Megatron × FSDP on 2x2, trains as one device", "[nn]") {
  using M22 = spmd::mesh<2, 2>::named<"dp", "tp">;
  using M11 = spmd::mesh<1, 1>::named<"dp", "tp">;
  using Model = decltype(nn::parallelize<M22, B, nn::tensor_parallel<"tp", megatron>, torchtitan>(std::declval<const tiny_gpt&>()));
  using WQ = std::remove_cvref_t<decltype(get<"wq">(get<"attn">(get<"blocks">(std::declval<const Model&>())[0])))>;
  static_assert(std::is_same_v<typename WQ::placements_type, spmd::placements<spmd::shard<0, 1>, spmd::shard<0, 0>>>);
  using WO = std::remove_cvref_t<decltype(get<"wo">(get<"attn">(get<"blocks">(std::declval<const Model&>())[0])))>;
  static_assert(std::is_same_v<typename WO::placements_type, spmd::placements<spmd::shard<0>, spmd::shard<1>>>);

  const tiny_gpt host = random_gpt();
  constexpr auto paths = nn::parameter_paths<tiny_gpt>();
  CHECK(paths.size() == 2 + 2 * 12 + 3);  // the names spmd-train's gpt has (docs/training.md)
  CHECK(paths[2] == std::string_view("blocks.0.ln1.weight"));
  CHECK(paths[4] == std::string_view("blocks.0.attn.wq"));
  CHECK(paths[10] == std::string_view("blocks.0.mlp.w1"));
  CHECK(paths[28] == std::string_view("lm_head.weight"));

  const run_result one = train<M11, nn::tensor_parallel<"tp", megatron>, torchtitan>(host);
  const run_result both = train<M22, nn::tensor_parallel<"tp", megatron>, torchtitan>(host);
  CHECK(one.losses[2] < one.losses[0]);
  for (std::size_t s = 0; s < one.losses.size(); ++s)
    CHECK(std::abs(both.losses[s] - one.losses[s]) <= 1e-5 * std::abs(one.losses[s]));
  double worst = 0;
  REQUIRE(both.grads.size() == one.grads.size());
  for (std::size_t i = 0; i < one.grads.size(); ++i)
    for (std::size_t k = 0; k < one.grads[i].size(); ++k)
      worst = std::max(worst, static_cast<double>(std::abs(both.grads[i][k] - one.grads[i][k])));
  CHECK(worst <= 1e-5);

  // The same model over a mesh whose sizes are given at run time: the 2x2 run's numbers, bit for
  // bit; and 1x2 (tensor parallel only) as one device's.
  using D = spmd::mesh<spmd::dyn, spmd::dyn>::named<"dp", "tp">;
  spmd::bind_mesh<D>(spmd::dims<2>{2, 2});
  const run_result dyn22 = train<D, nn::tensor_parallel<"tp", megatron>, torchtitan>(host);
  CHECK(dyn22.losses == both.losses);
  CHECK(dyn22.grads == both.grads);
  spmd::bind_mesh<D>(spmd::dims<2>{1, 2});
  const run_result dyn12 = train<D, nn::tensor_parallel<"tp", megatron>, torchtitan>(host);
  for (std::size_t s = 0; s < one.losses.size(); ++s)
    CHECK(std::abs(dyn12.losses[s] - one.losses[s]) <= 1e-5 * std::abs(one.losses[s]));
}

TEST_CASE("nn: sequence parallelism by module styles trains as one device", "[nn]") {
  using M12 = spmd::mesh<1, 2>::named<"dp", "tp">;
  using M11 = spmd::mesh<1, 1>::named<"dp", "tp">;
  const tiny_gpt host = random_gpt();
  const run_result one = train<M11, nn::tensor_parallel<"tp", megatron>>(host);
  const run_result tp = train<M12, nn::tensor_parallel<"tp", megatron>>(host);
  const run_result sp = train<M12, nn::tensor_parallel<"tp", megatron_sp>>(host);
  for (std::size_t s = 0; s < one.losses.size(); ++s) {
    CHECK(std::abs(sp.losses[s] - one.losses[s]) <= 1e-5 * std::abs(one.losses[s]));
    CHECK(std::abs(tp.losses[s] - one.losses[s]) <= 1e-5 * std::abs(one.losses[s]));
  }
  double worst = 0;
  for (std::size_t i = 0; i < one.grads.size(); ++i)
    for (std::size_t k = 0; k < one.grads[i].size(); ++k)
      worst = std::max(worst, static_cast<double>(std::abs(sp.grads[i][k] - one.grads[i][k])));
  CHECK(worst <= 1e-5);
  // The rowwise outputs of attention and the MLP (two blocks) reduce-scattered to the positions'
  // split (the MLP's bias added to the slice after), not all-reduced; the positions gathered
  // before attention and the MLP.
  INFO("forward, tp: " << tp.forward[0] << " " << tp.forward[1] << " " << tp.forward[2] << "; sp: " << sp.forward[0]
                        << " " << sp.forward[1] << " " << sp.forward[2]);
  // (SPMD_LOG=redistribute shows them: four P(sum) -> S(1) reduce_scatters a forward; the
  // model without sequence parallelism all-reduces those four instead.)
  CHECK(sp.forward[2] >= 4);
  CHECK(sp.forward[1] < tp.forward[1]);
  CHECK(sp.forward[0] >= tp.forward[0] + 2);
}
