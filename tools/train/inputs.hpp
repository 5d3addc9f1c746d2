// tools/train/inputs.hpp — the two safetensors files of `spmd-train`, read and checked before
// any training starts: INIT (the parameters, f32, names and shapes of the model) and DATA
// (one batch per step). Every problem is a usage_error naming the file, the tensor, what was
// expected and what was found; nothing is written before they are all checked.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "spmd/io/data_loader.hpp"

#include "options.hpp"

namespace spmd_train {

/// A parameter of a model: its name in INIT (and in --save, --checkpoint) and its shape.
struct param_spec {
  std::string name;
  std::vector<std::int64_t> shape;
};

/// The model's fixed sizes and parameters (docs/training.md has the definitions).
struct model_spec {
  std::string name;
  std::vector<param_spec> params;
  // mlp: x (steps, batch, d_in) f32 and labels (steps, batch) int64 in [0, classes);
  // gpt: tokens and targets (steps, batch, context) int64 in [0, vocab).
  std::int64_t batch = 0, d_in = 0, classes = 0, context = 0, vocab = 0, heads = 0;
  // Tensor parallelism splits units of the model: the gpt's heads, whole (tp must divide
  // them), the mlp's hidden features, in torch.chunk's blocks (tp at most their number).
  std::int64_t tp_units = 1;
  std::string tp_unit_name;
  bool tp_divides = true;
};

model_spec mlp_spec();
/// The gpt model's parameters; the defaults are spmd-train's sizes (bench/train_step widens them).
model_spec gpt_spec(std::int64_t vocab = 64, std::int64_t context = 16, std::int64_t width = 32, std::int64_t heads = 4,
                    std::int64_t batch = 8);
/// The spec of --model, or a usage_error.
model_spec spec_of(const std::string& model);

/// Everything training reads: the parameters by name, and the batches: from DATA through a
/// loader (its samples over epochs, each rank reading its rows), or made in the program (the
/// example, the benchmarks: one batch per step, step after step, in the vectors).
struct inputs {
  std::map<std::string, std::vector<float>> params;
  std::shared_ptr<const spmd::io::data_loader> loader;  // DATA's; null: the vectors below
  std::vector<float> x;                    // mlp
  std::vector<std::int64_t> labels;        // mlp
  std::vector<std::int64_t> tokens;        // gpt
  std::vector<std::int64_t> targets;       // gpt
  std::int64_t data_steps = 0;             // batches in the vectors
};

/// Reads INIT and checks INIT and DATA for `spec` (DATA: every sample's types, shapes and range).
inputs read_inputs(const train_options& o, const model_spec& spec);

/// DATA's loader for `spec` over the o.dp data-parallel ranks: batches of spec.batch samples,
/// epoch after epoch, shuffled when o.shuffle is given (a usage_error when DATA holds less
/// than one batch).
std::shared_ptr<const spmd::io::data_loader> make_loader(const train_options& o, const model_spec& spec);

}  // namespace spmd_train
