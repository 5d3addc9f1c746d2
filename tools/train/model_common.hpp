// tools/train/model_common.hpp — what the two models share: the (dp, tp, cp) mesh, how the library's
// parallelisms place them (nn/parallelize.hpp: Megatron's plan on tp, FSDP or DDP on dp), the
// host model read from INIT, and a step's batch distributed.
//
// Placements, per parameter style (Megatron on tp; dp as FSDP2 / DDP hold it):
//              tp            dp (fsdp)                     dp (ddp)
//   colwise    Shard(0)      Shard(0), split after tp      Replicate
//              (out features) (DTensor's _StridedShard)
//   rowwise    Shard(1)      Shard(0)                      Replicate
//   replicated Replicate     Shard(0)                      Replicate
// so that gathering dp (FSDP's unshard) gives the TP layout; every parameter replicated on cp.
// Activations: the batch on dp, replicated on tp except between a column- and a row-parallel
// layer; a sequence model's positions on cp (context parallelism: attention gathers K and V,
// docs/context_parallel.md), a model without positions replicated there (cp = 1).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "spmd/autoshard/graph.hpp"
#include "spmd/nn/parallelize.hpp"
#include "spmd/nn/step_graph.hpp"
#include "spmd/nn/tree.hpp"
#include "spmd/nn/unit_choice.hpp"
#include "spmd/runtime/autograd.hpp"

#include "inputs.hpp"

namespace spmd_train {

using spmd::index_t;
namespace rt = spmd::runtime;
namespace nn = spmd::nn;

/// How the model is parallelised: Megatron's plan on tp with FSDP or DDP on dp, or nothing at
/// all (every parameter and the batch replicated: each rank computes the whole step, no
/// collective), a candidate of --parallel auto.
/// A model's training step as the automatic-sharding search sees it (--parallel auto): the
/// graph (nn/step_graph.hpp), its parameters' tensors (parameters(model)'s order) and its
/// data's (the batch's fields, each read in the configuration's batch layout).
struct step_graph {
  spmd::autoshard::graph g;
  nn::traced model;
  std::vector<int> data;
};

/// per_unit: FSDP or DDP chosen per FSDP unit when the model is built (--parallel auto's mixes,
/// nn/unit_choice.hpp).
enum class dp_kind { fsdp, ddp, replicate, per_unit };

/// The kind's name, as --dp and --parallel auto's report write it.
constexpr const char* name_of(dp_kind k) {
  return k == dp_kind::fsdp ? "fsdp" : k == dp_kind::ddp ? "ddp" : k == dp_kind::replicate ? "replicate" : "per-unit";
}

/// A model's configuration: a 3-d (dp, tp, cp) mesh (sizes static or spmd::dyn), backend B, how
/// dp holds parameters, the compute type.
template <class Mesh, class B, dp_kind Dp, class Compute>
struct config_on {
  static_assert(Mesh::ndim == 3, "spmd-train: the models' mesh is (dp, tp, cp)");
  static constexpr dp_kind dp_mode = Dp;
  using backend = B;
  using compute = Compute;  // float, or bfloat16 (FSDP's mixed precision: f32 parameters)
  using mesh = Mesh;
  /// The sizes of dp and tp (a dynamic mesh's as bound).
  static index_t dp() { return mesh::shape_vec()[0]; }
  static index_t tp() { return mesh::shape_vec()[1]; }
  static index_t cp() { return mesh::shape_vec()[2]; }
  using factories = rt::factories<B>;
  using policy = rt::mixed_precision<Compute, float>;

  /// Activations and data: the batch (dim 0) on dp, replicated on tp and cp (replicate: whole).
  using batch_placements =
      std::conditional_t<Dp == dp_kind::replicate, spmd::placements<spmd::replicate, spmd::replicate, spmd::replicate>,
                         spmd::placements<spmd::shard<0>, spmd::replicate, spmd::replicate>>;
  /// A sequence's data (batch, positions, ...): the batch on dp, the positions on cp.
  using sequence_placements =
      std::conditional_t<Dp == dp_kind::replicate, batch_placements,
                         spmd::placements<spmd::shard<0>, spmd::replicate, spmd::shard<1>>>;
  template <class U, class P, index_t... E>
  using data_tensor = rt::dtensor<U, spmd::layout<mesh, P, spmd::extents<E...>>, B>;
  template <class U, index_t... E>
  using batch_tensor = data_tensor<U, batch_placements, E...>;

  /// The host model H with INIT's parameters, found by their paths (read_inputs checked their
  /// names and shapes against the spec; a spec that lists other names is a bug, said here).
  template <class H>
  static H host_from(const inputs& in) {
    H host;
    nn::for_each_parameter(host, [&](std::string_view path, auto& t) {
      const auto it = in.params.find(std::string(path));
      if (it == in.params.end() || it->second.size() != t.data.size())
        throw std::logic_error("spmd-train: the spec does not give the model's parameter " + std::string(path));
      t.data.assign(it->second.begin(), it->second.end());
    });
    return host;
  }

  /// H on the mesh: Plan's tensor parallelism on tp, FSDP on dp (units Units, the compute
  /// type's mixed precision) or DDP; or (replicate) every parameter whole on every rank.
  /// (per_unit: each unit FSDP or DDP as `choose` says.)
  template <class Plan, class Units, class H>
  static auto parallelize(const H& host, const nn::unit_chooser* choose = nullptr) {
    if constexpr (Dp == dp_kind::per_unit) {
      static_assert(std::is_same_v<Compute, float>, "spmd-train: bf16 is FSDP's mixed precision");
      if (!choose) throw std::logic_error("spmd-train: a model of per-unit data parallelism needs its units' choice");
      return nn::parallelize_per_unit<mesh, B, nn::tensor_parallel<"tp", Plan>, nn::dp_per_unit<"dp", Units>>(host, *choose);
    } else if constexpr (Dp == dp_kind::fsdp) {
      return nn::parallelize<mesh, B, nn::tensor_parallel<"tp", Plan>, nn::fsdp<"dp", Units, policy>>(host);
    } else if constexpr (Dp == dp_kind::replicate) {
      static_assert(std::is_same_v<Compute, float>, "spmd-train: bf16 is FSDP's mixed precision");
      return nn::parallelize<mesh, B>(host);
    } else {
      static_assert(std::is_same_v<Compute, float>, "spmd-train: bf16 is FSDP's mixed precision");
      return nn::parallelize<mesh, B, nn::tensor_parallel<"tp", Plan>, nn::ddp<"dp">>(host);
    }
  }

  /// Step s's batch of field `name`, distributed in placements P (batch_placements, or
  /// sequence_placements), as U: from the loader (each rank reads its block), or without one
  /// step s's slice of `all`, a per-step tensor (steps, E...).
  template <class U, class P, index_t... E, class V>
  static data_tensor<U, P, E...> data_of(const inputs& in, const char* name, const std::vector<V>& all, std::int64_t s) {
    using L = typename data_tensor<U, P, E...>::layout_type;
    if (in.loader) return in.loader->template batch<U, L, B>(name, s);
    constexpr std::size_t n = (std::size_t{1} * ... * static_cast<std::size_t>(E));
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(s) * n);
    return factories::template distribute_tensor<L>(std::vector<U>(first, first + static_cast<std::ptrdiff_t>(n)));
  }
  template <class U, index_t... E, class V>
  static batch_tensor<U, E...> batch_of(const inputs& in, const char* name, const std::vector<V>& all, std::int64_t s) {
    return data_of<U, batch_placements, E...>(in, name, all, s);
  }
};

/// The configuration on the static mesh D×T×C.
template <int D, int T, class B, dp_kind Dp, class Compute, int C = 1>
using config = config_on<typename spmd::mesh<D, T, C>::template named<"dp", "tp", "cp">, B, Dp, Compute>;
/// The configuration on a (dp, tp, cp) mesh whose sizes are given at run time (bind_mesh).
template <class B, dp_kind Dp, class Compute>
using dyn_config =
    config_on<typename spmd::mesh<spmd::dyn, spmd::dyn, spmd::dyn>::template named<"dp", "tp", "cp">, B, Dp, Compute>;

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
