// tests/nn/parallelize.cpp — models as trees of modules, placed by path rules: the paths, the
// layouts the rules give (static_asserts), and training numbers on a 2x2 mesh (tensor parallel
// × FSDP, units per block) against one device and a host reference in double.
#include <array>
#include <cmath>
#include <random>
#include <string_view>
#include <vector>

#include <boost/hana/adapt_struct.hpp>
#include <catch2/catch.hpp>

#include "spmd/nn/modules.hpp"
#include "spmd/nn/parallelize.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/optim.hpp"
#include "spmd/sim/sim.hpp"

namespace rt = spmd::runtime;
namespace nn = spmd::nn;
using spmd::index_t;

namespace {

// [docs:nn-mlp3]
struct mlp3 {
  nn::linear<8, 16> fc1;
  nn::linear<16, 12> fc2;
  nn::linear<12, 5> fc3;
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    return get<"fc3">(m)(rt::relu(get<"fc2">(m)(rt::relu(get<"fc1">(m)(x)))));
  }
};
// [/docs:nn-mlp3]

/// Two mlp3 blocks side by side, summed, then a layer norm; and a bias-free projection.
struct deep {
  std::array<mlp3, 2> blocks;
  nn::layer_norm<5> norm;
  nn::linear<5, 5, false> head;
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    const auto& b = get<"blocks">(m);
    return get<"head">(m)(get<"norm">(m)(rt::add(b[0](x), b[1](x))));
  }
};

}  // namespace

// [docs:nn-adapt]
BOOST_HANA_ADAPT_STRUCT(mlp3, fc1, fc2, fc3);
// [/docs:nn-adapt]
BOOST_HANA_ADAPT_STRUCT(deep, blocks, norm, head);

namespace {

using M22 = spmd::mesh<2, 2>::named<"dp", "tp">;
using M11 = spmd::mesh<1, 1>::named<"dp", "tp">;
using B = spmd::sim::backend;
// [docs:nn-plan]
using tp = nn::tp_plan<nn::rule<"fc1.*", nn::colwise>, nn::rule<"fc2.*", nn::rowwise>>;
// [/docs:nn-plan]
using deep_tp = nn::tp_plan<nn::rule<"blocks.*.fc1.*", nn::colwise>, nn::rule<"blocks.*.fc2.*", nn::rowwise>>;

// ---- the layouts the rules give, as types
using both = decltype(nn::parallelize<M22, B, nn::tensor_parallel<"tp", tp>, nn::fsdp<"dp">>(std::declval<const mlp3&>()));
template <class Node, spmd::fixed_string Layer, spmd::fixed_string Param>
using param_t = std::remove_cvref_t<decltype(get<Param>(get<Layer>(std::declval<const Node&>())))>;
using spmd::placements;
using spmd::replicate;
using spmd::shard;
// [docs:nn-static]
// colwise beside FSDP: dp splits dim 0 after tp (FSDP's gather gives the tp layout)
static_assert(std::is_same_v<param_t<both, "fc1", "weight">::placements_type, placements<shard<0, 1>, shard<0, 0>>>);
static_assert(std::is_same_v<param_t<both, "fc1", "bias">::placements_type, placements<shard<0, 1>, shard<0, 0>>>);
// rowwise: the weight split by input features, its bias replicated on tp
static_assert(std::is_same_v<param_t<both, "fc2", "weight">::placements_type, placements<shard<0>, shard<1>>>);
static_assert(std::is_same_v<param_t<both, "fc2", "bias">::placements_type, placements<shard<0>, replicate>>);
// [/docs:nn-static]
// no rule: replicated on tp
static_assert(std::is_same_v<param_t<both, "fc3", "weight">::placements_type, placements<shard<0>, replicate>>);
// tensor parallel alone, FSDP alone
using tp_only = decltype(nn::parallelize<M22, B, nn::tensor_parallel<"tp", tp>>(std::declval<const mlp3&>()));
static_assert(std::is_same_v<param_t<tp_only, "fc1", "weight">::placements_type, placements<replicate, shard<0>>>);
static_assert(std::is_same_v<param_t<tp_only, "fc2", "weight">::placements_type, placements<replicate, shard<1>>>);
using fsdp_only = decltype(nn::parallelize<M22, B, nn::fsdp<"dp", nn::units<>>>(std::declval<const mlp3&>()));
static_assert(std::is_same_v<param_t<fsdp_only, "fc1", "weight">::placements_type, placements<shard<0>, replicate>>);
// a mesh dim by name, wherever it is: tp first
using MT = spmd::mesh<2, 2>::named<"tp", "dp">;
using swapped = decltype(nn::parallelize<MT, B, nn::tensor_parallel<"tp", tp>, nn::fsdp<"dp">>(std::declval<const mlp3&>()));
static_assert(std::is_same_v<param_t<swapped, "fc1", "weight">::placements_type, placements<shard<0, 0>, shard<0, 1>>>);
// the default units<"">: the model itself is one FSDP unit; units<> none
static_assert(nn::detail::is_unit_node_v<both>);
static_assert(!nn::detail::is_unit_node_v<fsdp_only>);
static_assert(nn::path_matches("blocks.*.fc1.*", "blocks.1.fc1.weight"));
static_assert(!nn::path_matches("blocks.*.fc1.*", "blocks.1.fc1"));
static_assert(!nn::path_matches("blocks.*", "blocks.1.fc1.weight"));
static_assert(nn::path_matches("", ""));
static_assert(nn::join<"blocks", nn::index_text<12>()>().view() == "blocks.12");

void fill(std::vector<float>& v, std::mt19937& r, float scale) {
  std::normal_distribution<float> n(0.f, scale);
  for (float& x : v) x = n(r);
}

mlp3 random_mlp3(unsigned seed) {
  mlp3 h;
  std::mt19937 r(seed);
  for (auto* t : {&h.fc1.weight.data, &h.fc1.bias.data, &h.fc2.weight.data, &h.fc2.bias.data, &h.fc3.weight.data,
                  &h.fc3.bias.data})
    fill(*t, r, 0.3f);
  return h;
}

std::vector<float> inputs() {
  std::vector<float> xs(32);
  for (int i = 0; i < 32; ++i) xs[static_cast<std::size_t>(i)] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  return xs;
}
const std::vector<std::int64_t> labels_of{1, 3, 0, 4};

/// mlp3's cross entropy on the host, in double, from its definition.
double host_loss(const mlp3& h) {
  const std::vector<float> x = inputs();
  auto lin = [](const std::vector<double>& in, index_t n_in, const auto& l, index_t n_out, bool relu) {
    std::vector<double> out(static_cast<std::size_t>(4 * n_out));
    for (index_t b = 0; b < 4; ++b)
      for (index_t o = 0; o < n_out; ++o) {
        double s = l.bias.data[static_cast<std::size_t>(o)];
        for (index_t i = 0; i < n_in; ++i)
          s += in[static_cast<std::size_t>(b * n_in + i)] * l.weight.data[static_cast<std::size_t>(o * n_in + i)];
        out[static_cast<std::size_t>(b * n_out + o)] = relu ? std::max(s, 0.0) : s;
      }
    return out;
  };
  const std::vector<double> h0(x.begin(), x.end());
  const auto z = lin(lin(lin(h0, 8, h.fc1, 16, true), 16, h.fc2, 12, true), 12, h.fc3, 5, false);
  double loss = 0;
  for (index_t b = 0; b < 4; ++b) {
    double mx = -1e300, s = 0;
    for (index_t c = 0; c < 5; ++c) mx = std::max(mx, z[static_cast<std::size_t>(b * 5 + c)]);
    for (index_t c = 0; c < 5; ++c) s += std::exp(z[static_cast<std::size_t>(b * 5 + c)] - mx);
    loss += mx + std::log(s) - z[static_cast<std::size_t>(b * 5 + labels_of[static_cast<std::size_t>(b)])];
  }
  return loss / 4;
}

struct trained {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;  // every parameter's gradient after the first step
  int reduce_scatters = 0;                // in the first step
  int all_reduces = 0;
};

/// Two AdamW steps of `host` on Mesh as the parallelisms Ps place it.
template <class Mesh, class... Ps, class H>
trained train(const H& host) {
  // [docs:nn-train]
  auto m = nn::parallelize<Mesh, B, Ps...>(host);  // the host model's values, placed
  auto opt = std::apply([](auto&... p) { return rt::adamw({.lr = 0.01}, p...); }, nn::parameters(m));
  using L = spmd::layout<Mesh, placements<shard<0>, replicate>, spmd::extents<4, 8>>;
  using LL = spmd::layout<Mesh, placements<shard<0>, replicate>, spmd::extents<4>>;
  const auto x = rt::as_variable(spmd::sim::distribute_tensor<L>(inputs()));
  const auto labels = spmd::sim::distribute_tensor<LL>(labels_of);
  // [/docs:nn-train]
  trained t;
  for (int step = 0; step < 2; ++step) {
    rt::comm_counter c;
    auto loss = rt::cross_entropy<5>(m(x), labels);  // mlp3::forward over the variables
    loss.backward();
    t.losses.push_back(static_cast<double>(loss.value().full_tensor()[0]));
    if (step == 0) {
      t.reduce_scatters = c.count(spmd::step_kind::reduce_scatter);
      t.all_reduces = c.count(spmd::step_kind::all_reduce);
      std::apply([&](auto&... p) { (t.grads.push_back(p.grad().full_tensor()), ...); }, nn::parameters(m));
    }
    opt.step();
    opt.zero_grad();
  }
  return t;
}

void check_close(const trained& a, const trained& b, double tol) {
  REQUIRE(a.losses.size() == b.losses.size());
  for (std::size_t s = 0; s < a.losses.size(); ++s) CHECK(std::abs(a.losses[s] - b.losses[s]) <= tol * std::abs(b.losses[s]));
  REQUIRE(a.grads.size() == b.grads.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.grads.size(); ++i) {
    REQUIRE(a.grads[i].size() == b.grads[i].size());
    for (std::size_t k = 0; k < a.grads[i].size(); ++k)
      worst = std::max(worst, static_cast<double>(std::abs(a.grads[i][k] - b.grads[i][k])));
  }
  CHECK(worst <= 1e-6);
}

}  // namespace

TEST_CASE("nn: parameter paths, depth first, arrays by index", "[nn]") {
  constexpr auto paths = nn::parameter_paths<deep>();
  const std::vector<std::string_view> want = {
      "blocks.0.fc1.weight", "blocks.0.fc1.bias", "blocks.0.fc2.weight", "blocks.0.fc2.bias",
      "blocks.0.fc3.weight", "blocks.0.fc3.bias", "blocks.1.fc1.weight", "blocks.1.fc1.bias",
      "blocks.1.fc2.weight", "blocks.1.fc2.bias", "blocks.1.fc3.weight", "blocks.1.fc3.bias",
      "norm.weight",         "norm.bias",         "head.weight"};
  CHECK(std::vector<std::string_view>(paths.begin(), paths.end()) == want);
  deep d;
  auto m = nn::parallelize<M22, B, nn::tensor_parallel<"tp", deep_tp>>(d);
  CHECK(std::tuple_size_v<decltype(nn::parameters(m))> == 15);
  // each variable is named by its path; the layer norm starts at ones
  CHECK(get<"weight">(get<"norm">(m)).name() == "norm.weight");
  CHECK(get<"weight">(get<"norm">(m)).value().full_tensor() == std::vector<float>(5, 1.f));
}

TEST_CASE("nn: mlp3 with colwise, rowwise and FSDP on 2x2 trains as one device", "[nn]") {
  const mlp3 h = random_mlp3(1);
  const trained one = train<M11, nn::tensor_parallel<"tp", tp>, nn::fsdp<"dp">>(h);
  CHECK(std::abs(one.losses[0] - host_loss(h)) <= 1e-6 * host_loss(h));  // the reference, in double
  CHECK(one.losses[1] < one.losses[0]);
  const trained both = train<M22, nn::tensor_parallel<"tp", tp>, nn::fsdp<"dp">>(h);
  check_close(both, one, 1e-6);
  const trained tp_only = train<M22, nn::tensor_parallel<"tp", tp>>(h);
  check_close(tp_only, one, 1e-6);
  // the model is one unit: its gradients in one reduce_scatter beyond tensor parallelism's own
  CHECK(both.reduce_scatters == tp_only.reduce_scatters + 1);
  check_close(train<M22, nn::fsdp<"dp", nn::units<>>>(h), one, 1e-6);  // sharded at rest, no unit
}

TEST_CASE("nn: units per block and the model, tensor parallel inside them", "[nn]") {
  deep d;
  std::mt19937 r(5);
  for (auto& b : d.blocks)
    for (auto* t : {&b.fc1.weight.data, &b.fc1.bias.data, &b.fc2.weight.data, &b.fc3.weight.data, &b.fc3.bias.data})
      fill(*t, r, 0.3f);
  fill(d.head.weight.data, r, 0.3f);
  // [docs:nn-units]
  using P = nn::fsdp<"dp", nn::units<"blocks.*", "">>;  // a unit per block, and the model's own
  // [/docs:nn-units]
  const trained one = train<M11, nn::tensor_parallel<"tp", deep_tp>, P>(d);
  const trained both = train<M22, nn::tensor_parallel<"tp", deep_tp>, P>(d);
  check_close(both, one, 1e-6);
  // one reduce_scatter per unit (two blocks, the model's own norm and head) beyond tensor
  // parallelism's own
  const trained tp_only = train<M22, nn::tensor_parallel<"tp", deep_tp>>(d);
  CHECK(both.reduce_scatters == tp_only.reduce_scatters + 3);
  CHECK(one.losses[1] < one.losses[0]);
}

TEST_CASE("nn: DDP on dp beside tensor parallel on tp, gradients all-reduced in buckets", "[nn]") {
  const mlp3 h = random_mlp3(2);
  const trained one = train<M11, nn::tensor_parallel<"tp", tp>, nn::ddp<"dp">>(h);
  const trained tp_only = train<M22, nn::tensor_parallel<"tp", tp>>(h);
  const trained both = train<M22, nn::tensor_parallel<"tp", tp>, nn::ddp<"dp">>(h);
  check_close(both, one, 1e-6);
  // Without DDP each replicated parameter's gradient is all-reduced over dp on its own; DDP
  // reduces them together, one bucket (25 MiB) holding every gradient here.
  CHECK(both.all_reduces < tp_only.all_reduces);
  // Buckets of 256 bytes a rank: the buckets the compiler assigned, one all_reduce each.
  using small = nn::ddp<"dp", 256>;
  using Model = decltype(nn::parallelize<M22, B, nn::tensor_parallel<"tp", tp>, small>(std::declval<const mlp3&>()));
  constexpr int buckets = decltype(std::declval<Model&>().ddp)::buckets;
  static_assert(buckets > 1);
  const trained bucketed = train<M22, nn::tensor_parallel<"tp", tp>, small>(h);
  check_close(bucketed, one, 1e-6);
  CHECK(bucketed.all_reduces == both.all_reduces - 1 + buckets);
  // DDP's parameters are replicated on dp
  using DW = std::remove_cvref_t<decltype(get<"weight">(get<"fc1">(std::declval<const Model&>())))>;
  static_assert(std::is_same_v<typename DW::placements_type, placements<replicate, shard<0>>>);
}

TEST_CASE("nn: a rowwise layer's Partial output reduced to Replicate before its bias, one all_reduce", "[nn]") {
  const mlp3 h = random_mlp3(3);
  auto m = nn::parallelize<M22, B, nn::tensor_parallel<"tp", tp>>(h);
  using L = spmd::layout<M22, placements<shard<0>, replicate>, spmd::extents<4, 8>>;
  const auto x = rt::as_variable(spmd::sim::distribute_tensor<L>(inputs()));
  const auto u = get<"fc1">(m)(x);  // colwise: the features split on tp
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(u)>::placements_type, placements<shard<0>, shard<1>>>);
  rt::comm_counter c;
  const auto y = get<"fc2">(m)(u);  // rowwise: Partial on tp, all-reduced (RowwiseParallel's default)
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>::placements_type, placements<shard<0>, replicate>>);
  CHECK(c.count(spmd::step_kind::all_reduce) == 1);
  CHECK(c.total() == 1);
  // the bias added once: y equals the host's fc2 on the gathered input
  const std::vector<float> uf = u.value().full_tensor(), yf = y.value().full_tensor();
  for (index_t b = 0; b < 4; ++b)
    for (index_t o = 0; o < 12; ++o) {
      double want = h.fc2.bias.data[static_cast<std::size_t>(o)];
      for (index_t i = 0; i < 16; ++i)
        want += static_cast<double>(uf[static_cast<std::size_t>(b * 16 + i)]) * h.fc2.weight.data[static_cast<std::size_t>(o * 16 + i)];
      CHECK(std::abs(yf[static_cast<std::size_t>(b * 12 + o)] - want) <= 1e-5);
    }
}

TEST_CASE("nn: for_each_parameter visits a host model's parameters by path, in parameter_paths' order", "[nn]") {
  deep d;
  std::vector<std::string_view> seen;
  float k = 0;
  nn::for_each_parameter(d, [&](std::string_view path, auto& t) {
    seen.push_back(path);
    for (float& v : t.data) v = k;
    k += 1;
  });
  constexpr auto paths = nn::parameter_paths<deep>();
  CHECK(seen == std::vector<std::string_view>(paths.begin(), paths.end()));
  CHECK(d.blocks[1].fc2.bias.data == std::vector<float>(12, 9.f));  // the tenth parameter
  CHECK(d.head.weight.data == std::vector<float>(25, 14.f));
  const deep& c = d;  // a const model is read the same way
  std::size_t n = 0;
  nn::for_each_parameter(c, [&](std::string_view, const auto& t) { n += t.data.size(); });
  CHECK(n == 2 * (8 * 16 + 16 + 16 * 12 + 12 + 12 * 5 + 5) + 5 + 5 + 25);
}

