// tools/train/result.hpp — what one run of `spmd-train` measured, for the table or the JSON.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spmd_train {

/// What --parallel auto chose at start-up (auto_choice.hpp), modelled by the search.
struct parallel_choice {
  struct candidate {
    std::string name;
    double step_s = 0;     // modelled; NaN: cannot run this graph
    int collectives = 0;   // modelled, forward and backward
  };
  std::string choice;               // fsdp, ddp, replicate, per-unit
  int kind_index = 0;               // its dp_kind
  double step_s = 0;                // its modelled step
  double unrestricted_step_s = 0;   // the search's best step over every placement
  bool optimal = false;             // step_s is unrestricted_step_s
  std::vector<candidate> candidates;
  double search_ms = 0;             // graph, pins and searches, at start-up
  // Each FSDP unit of the model and how the choice holds it ("fsdp", "ddp", "replicate"), in
  // the model's order (nn::unit_paths); per-unit: the mix that runs.
  std::vector<std::pair<std::string, std::string>> units;
  long mixes = 0;                   // per-unit mixes searched (0: none, the model has one unit or dp is 1)
  bool exhaustive = true;           // every mix was searched
};

/// A pipeline-parallel run's schedule (--mesh pp=P, --schedule, --microbatches) and its
/// table's figures (plan/pipeline_schedule.hpp).
struct pipeline_report {
  std::string schedule;        // gpipe, 1f1b, interleaved, zb
  int stages = 1;              // pipeline ranks (pp)
  int virtual_stages = 1;      // stages per rank
  int microbatches = 1;
  double bubble = 0;           // the table's idle share of ranks x slots
  int slots = 0;               // the table's length
};

struct train_result {
  std::int64_t first_step = 0;          // 0, or the step a resumed run continued from
  std::vector<double> losses;           // one per step run, from that step's forward
  std::vector<double> grad_norms;       // global 2-norm of the gradients before clipping
  std::vector<double> step_ms;          // wall time of each step (this process)
  std::int64_t bytes_per_rank = 0;      // parameters + gradients + optimizer state, the most any rank holds
  // Collectives of one step by kind (spmd-plan plan's names), as the last step ran them.
  std::array<int, 4> collectives{};     // all_gather, all_reduce, reduce_scatter, all_to_all
  bool prints = true;                   // this process reports (the first process of a job)
  std::int64_t steps_per_epoch = 0;     // DATA's batches per epoch (0: no loader)
  std::int64_t epoch = 0;               // the last step's epoch, from 0
  std::optional<parallel_choice> parallel;  // --parallel auto's choice
  std::optional<pipeline_report> pipeline;  // the pipeline's schedule (spmd-train --mesh pp=P)
};

}  // namespace spmd_train
