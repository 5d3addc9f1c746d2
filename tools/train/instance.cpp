// tools/train/instance.cpp — the training function of one (model, backend) pair, over a
// (dp, tp, cp) mesh whose sizes are given at run time (spmd::dyn; docs/design.md, "Static and
// dynamic mesh sizes"): meson compiles this file once per pair (tools/meson.build), with
//   SPMD_TRAIN_MODEL    mlp or gpt            SPMD_TRAIN_BACKEND_TYPE    its backend type
//   SPMD_TRAIN_BACKEND  sim, mpi, cuda, nccl  SPMD_TRAIN_BACKEND_HEADER  the header that declares it
// Variants: FSDP in f32 or bf16 (mixed precision), DDP in f32; the optimizer is AdamW or SGD.
// Not instances.hpp: it reads the build's list of instances, and a change to that list should
// not recompile every instance (the declaration there and this definition must agree; the
// linker says so when they do not).
#include "inputs.hpp"
#include "options.hpp"
#include "result.hpp"

#include "auto_choice.hpp"
#include "gpt.hpp"
#include "mlp.hpp"
#include "trainer.hpp"

#include SPMD_TRAIN_BACKEND_HEADER

#define SPMD_TRAIN_JOIN(model, backend) train_##model##_##backend
#define SPMD_TRAIN_FN(model, backend) SPMD_TRAIN_JOIN(model, backend)
#define SPMD_TRAIN_MODEL_JOIN(model) model##_model
#define SPMD_TRAIN_MODEL_T(model) SPMD_TRAIN_MODEL_JOIN(model)

namespace spmd_train {

namespace {

using backend_t = SPMD_TRAIN_BACKEND_TYPE;
template <dp_kind Dp, class Compute>
using model_t = SPMD_TRAIN_MODEL_T(SPMD_TRAIN_MODEL)<dyn_config<backend_t, Dp, Compute>>;

template <dp_kind Dp>
using f32_model_t = model_t<Dp, float>;

}  // namespace

train_result SPMD_TRAIN_FN(SPMD_TRAIN_MODEL, SPMD_TRAIN_BACKEND)(const train_options& o, const inputs& in,
                                                                 const model_spec& spec) {
  // Every variant shares the one mesh type: its sizes are this run's.
  spmd::bind_mesh<typename dyn_config<backend_t, dp_kind::fsdp, float>::mesh>(spmd::dims<3>{o.dp, o.tp, o.cp});
  // --cp-method: how the gpt's attention reaches the keys of other ranks (the models read it)
  const spmd::runtime::context_method_scope cp_method(o.cp_method == "ring" ? spmd::runtime::context_method::ring
                                                                             : spmd::runtime::context_method::all_gather);
  if (o.parallel == "auto") {
    using fsdp_t = f32_model_t<dp_kind::fsdp>;
    constexpr bool mixes = spmd::nn::unit_count<typename fsdp_t::host_type, typename fsdp_t::units>() > 1;
    const parallel_choice c = choose_parallel<fsdp_t, f32_model_t<dp_kind::ddp>, f32_model_t<dp_kind::replicate>>(
        o.cost_model, spmd::mesh_shape_vec{{o.dp, o.tp, o.cp}, 3}, mixes);
    train_result r;
    if (c.kind_index == static_cast<int>(dp_kind::per_unit)) {
      if constexpr (mixes) {
        const spmd::nn::unit_chooser hold = [&](std::string_view unit) {
          for (const auto& [path, how] : c.units)
            if (path == unit) return how == "fsdp" ? spmd::nn::dp_hold::fsdp : spmd::nn::dp_hold::ddp;
          throw std::logic_error("spmd-train: the choice names no unit " + std::string(unit));
        };
        r = train_per_unit<f32_model_t<dp_kind::per_unit>>(o, in, spec, hold);
      }
    } else if (c.kind_index == static_cast<int>(dp_kind::replicate)) {
      // every rank reads the whole batch: DATA's loader over one replica
      inputs whole = in;
      if (in.loader) {
        train_options one = o;
        one.dp = 1;
        whole.loader = make_loader(one, spec);
      }
      r = train<f32_model_t<dp_kind::replicate>>(o, whole, spec);
    } else {
      r = c.kind_index == static_cast<int>(dp_kind::ddp) ? train<f32_model_t<dp_kind::ddp>>(o, in, spec)
                                                         : train<f32_model_t<dp_kind::fsdp>>(o, in, spec);
    }
    r.parallel = c;
    return r;
  }
  // With dp = 1 there is no data parallelism: DDP and FSDP over one rank are the same program
  // (no dp collective, every parameter whole), and FSDP's runs.
  if (o.dp > 1 && o.dp_mode == "ddp") return train<model_t<dp_kind::ddp, float>>(o, in, spec);
  if (o.dtype == "bf16") return train<model_t<dp_kind::fsdp, spmd::bfloat16>>(o, in, spec);
  return train<model_t<dp_kind::fsdp, float>>(o, in, spec);
}

}  // namespace spmd_train
