// tools/train/model_common.hpp — what the two models share: the (dp, tp) mesh, how each
// parameter is placed (its tensor-parallel role, and FSDP or DDP on dp), and how a step's
// batch and the parameters are distributed.
//
// Placements, per parameter role (Megatron on tp; dp as FSDP2 / DDP hold it):
//              tp            dp (fsdp)                     dp (ddp)
//   column     Shard(0)      Shard(0), split after tp      Replicate
//              (out features) (DTensor's _StridedShard)
//   row        Shard(1)      Shard(0)                      Replicate
//   replicated Replicate     Shard(0)                      Replicate
// so that gathering dp (FSDP's unshard) gives the TP layout. Activations: the batch on dp,
// replicated on tp except between a column- and a row-parallel layer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/data_parallel/ddp.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"

#include "inputs.hpp"

namespace spmd_train {

using spmd::index_t;
namespace rt = spmd::runtime;

enum class dp_kind { fsdp, ddp };

/// A model's configuration: a 2-d (dp, tp) mesh (sizes static or spmd::dyn), backend B, how dp
/// holds parameters, the compute type.
template <class Mesh, class B, dp_kind Dp, class Compute>
struct config_on {
  static_assert(Mesh::ndim == 2, "spmd-train: the models' mesh is (dp, tp)");
  static constexpr dp_kind dp_mode = Dp;
  using backend = B;
  using compute = Compute;  // float, or bfloat16 (FSDP's mixed precision: f32 parameters)
  using mesh = Mesh;
  /// The sizes of dp and tp (a dynamic mesh's as bound).
  static index_t dp() { return mesh::shape_vec()[0]; }
  static index_t tp() { return mesh::shape_vec()[1]; }
  using factories = rt::factories<B>;
  using policy = rt::mixed_precision<Compute, float>;

  struct column {};
  struct row {};
  struct replicated {};
  template <class Role>
  using tp_placement = std::conditional_t<std::is_same_v<Role, column>,
                                          std::conditional_t<Dp == dp_kind::fsdp, spmd::shard<0, 0>, spmd::shard<0>>,
                                          std::conditional_t<std::is_same_v<Role, row>, spmd::shard<1>, spmd::replicate>>;
  template <class Role>
  using dp_placement = std::conditional_t<Dp == dp_kind::ddp, spmd::replicate,
                                          std::conditional_t<std::is_same_v<Role, column>, spmd::shard<0, 1>, spmd::shard<0>>>;
  template <class Role, index_t... E>
  using param = rt::variable<float, spmd::layout<mesh, spmd::placements<dp_placement<Role>, tp_placement<Role>>,
                                                 spmd::extents<E...>>, B>;

  /// Activations and data: the batch (dim 0) on dp, replicated on tp.
  using batch_placements = spmd::placements<spmd::shard<0>, spmd::replicate>;
  template <class U, index_t... E>
  using batch_tensor = rt::dtensor<U, spmd::layout<mesh, batch_placements, spmd::extents<E...>>, B>;

  /// Parameter `name` from INIT, distributed into its layout and marked trainable.
  template <class P>
  static P load(const inputs& in, const std::string& name) {
    using L = typename P::layout_type;
    return rt::requires_grad(factories::template distribute_tensor<L>(in.params.at(name)), name);
  }

  /// Step s's batch of field `name`, distributed, as U: from the loader (each rank reads its
  /// rows), or without one step s's slice of `all`, a per-step tensor (steps, E...).
  template <class U, index_t... E, class V>
  static batch_tensor<U, E...> batch_of(const inputs& in, const char* name, const std::vector<V>& all, std::int64_t s) {
    if (in.loader) return in.loader->template batch<U, typename batch_tensor<U, E...>::layout_type, B>(name, s);
    constexpr std::size_t n = (std::size_t{1} * ... * static_cast<std::size_t>(E));
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(s) * n);
    return factories::template distribute_tensor<typename batch_tensor<U, E...>::layout_type>(
        std::vector<U>(first, first + static_cast<std::ptrdiff_t>(n)));
  }

  /// finish(f(unit...)): the parameters (a flat tuple, `Sizes` of them per unit, in order) as
  /// FSDP units or as DDP's views — the one place the two dp modes differ. f receives one
  /// callable per unit, unit(g) = g(the unit's parameters as this step computes with them...)
  /// (FSDP: the unit's forward, gathered), and returns the loss; finish(loss) runs the
  /// backward while the units (or the DDP model) are alive. The parameters stay one flat
  /// tuple (no tuple_cat of units: big tuples are what costs compile time here).
  template <std::size_t... Sizes, class Params, class F, class Finish>
  static auto with_params(const Params& params, F&& f, Finish&& finish) {
    static_assert((Sizes + ...) == std::tuple_size_v<Params>, "spmd-train: the units must cover the parameters");
    static constexpr std::array<std::size_t, sizeof...(Sizes)> size{Sizes...};
    static constexpr auto start = [] {
      std::array<std::size_t, sizeof...(Sizes)> s{};
      for (std::size_t i = 1; i < s.size(); ++i) s[i] = s[i - 1] + size[i - 1];
      return s;
    }();
    return [&]<std::size_t... U>(std::index_sequence<U...>) {
      if constexpr (Dp == dp_kind::fsdp) {
        auto make_unit = [&]<std::size_t First, std::size_t... I>(std::index_sequence<I...>) {
          return rt::fully_shard<0, policy>(rt::fsdp_options{}, std::get<First + I>(params)...);
        };
        auto units = std::make_tuple(make_unit.template operator()<start[U]>(std::make_index_sequence<size[U]>{})...);
        auto call = [&units]<std::size_t K>(std::integral_constant<std::size_t, K>) {
          return [&u = std::get<K>(units)](auto&& g) { return u.forward(g); };
        };
        return finish(f(call(std::integral_constant<std::size_t, U>{})...));
      } else {
        static_assert(std::is_same_v<Compute, float>, "spmd-train: bf16 is FSDP's mixed precision");
        auto model = std::apply([](const auto&... p) { return rt::ddp<0>(p...); }, params);
        const auto views = model.params();
        auto slice = [&views]<std::size_t First, std::size_t... I>(std::index_sequence<I...>) {
          return [&views](auto&& g) { return g(std::get<First + I>(views)...); };
        };
        return finish(f(slice.template operator()<start[U]>(std::make_index_sequence<size[U]>{})...));
      }
    }(std::make_index_sequence<sizeof...(Sizes)>{});
  }
};

/// The configuration on the static mesh D×T.
template <int D, int T, class B, dp_kind Dp, class Compute>
using config = config_on<typename spmd::mesh<D, T>::template named<"dp", "tp">, B, Dp, Compute>;
/// The configuration on a (dp, tp) mesh whose sizes are given at run time (bind_mesh).
template <class B, dp_kind Dp, class Compute>
using dyn_config = config_on<typename spmd::mesh<spmd::dyn, spmd::dyn>::template named<"dp", "tp">, B, Dp, Compute>;

/// One training step of `model` with `opt`: step s's forward and backward, the optimizer's
/// step, zero_grad; returns the loss (bench/train_step, tests/training/train_cuda.cpp; the
/// example writes the loop out, spmd-train adds the norm and clipping between).
template <class Model, class Opt>
double train_step(Model& model, Opt& opt, const inputs& in, std::int64_t s) {
  double loss = 0;
  model.step(in, s, [&](auto&& l) {
    loss = static_cast<double>(l.full_tensor()[0]);
    l.backward();
    return 0;
  });
  opt.step();
  opt.zero_grad();
  return loss;
}

}  // namespace spmd_train
