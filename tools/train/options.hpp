// tools/train/options.hpp — what `spmd-train` is asked to do.
//
// Every model is compiled once per backend over a (dp, tp, cp) mesh whose sizes are run-time
// values (instances.hpp lists what this build has). A 1-d mesh N runs as N×1×1 (a dim of size 1
// costs nothing: a plan over a dim of one rank has no steps), so every mesh has one code path.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "spmd/autoshard/cost.hpp"

namespace spmd_train {

/// Bad input: the program exits 2 with this message, having written nothing.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct train_options {
  std::string model;               // mlp, gpt
  std::string mesh;                // as given: "8", "2x4", "dp=2,cp=4" (under mpirun, empty: the world size)
  int dp = 1, tp = 1, cp = 1;      // its sizes (cp: context parallel, the gpt's positions split)
  int pp = 1;                      // pipeline ranks: the gpt's pieces in stages (docs/pipeline.md)
  std::string schedule = "1f1b";   // gpipe, 1f1b, interleaved, zb: the pipeline's schedule
  int microbatches = 1;            // a step's batch cut into these, one after another through the stages
  bool pipelined = false;          // pp > 1, or --schedule or --microbatches given: the pipeline trains
  std::string cp_method = "all_gather";  // all_gather, ring: how attention reaches other ranks' keys
  std::string backend = "sim";     // sim, mpi, cuda, nccl
  std::string dp_mode = "fsdp";    // fsdp, ddp
  bool dp_given = false;           // --dp was given
  std::string parallel;            // "auto": the search chooses (train/auto_choice.hpp); empty: --dp
  std::string cost;                // --cost: the search's cost model, measured (bench/auto_calibrate)
  spmd::autoshard::cost_model cost_model{};  // read from --cost, or docs/auto.md's defaults
  std::optional<double> memory;    // --memory: the bytes a rank may hold, for --parallel auto's search
  std::string init, data;          // safetensors files
  std::int64_t steps = 0;
  std::string optimizer = "adamw"; // adamw, sgd
  double lr = 0.01;
  std::string dtype = "f32";       // f32, bf16 (FSDP's mixed precision)
  std::optional<double> clip;      // max global 2-norm
  std::string save;                // final parameters
  std::string checkpoint;          // training state after checkpoint_at steps
  std::optional<std::int64_t> checkpoint_at;  // given or not (0 is a value, refused)
  std::string resume;              // training state to continue from
  std::optional<std::int64_t> shuffle;  // the samples shuffled each epoch, seeded with this + the epoch (>= 0)
  bool graph = false;              // --graph: each step after the first replays one CUDA graph (--backend cuda)
  bool json = false;
};

}  // namespace spmd_train
