// tools/train/pipeline_trainer.hpp — spmd-train's gpt with pipeline parallelism
// (--mesh pp=P, --schedule, --microbatches; docs/pipeline.md):
//
//   the gpt cut into its pieces (nn/gpt_stages.hpp: embedding, 2 blocks, head), the pieces in
//   P·V equal stages, stage s on pipeline rank s mod P; each piece placed on the (dp, tp, cp)
//   mesh of its pipeline rank as the whole gpt is (Megatron on tp, FSDP or DDP on dp, one
//   FSDP unit per piece), with an optimizer of its own
//   per step: the batch in M microbatches; the schedule's table (plan/pipeline_schedule.hpp)
//   run by runtime::pipeline (each microbatch's loss 1/M of its mean: the full batch's mean);
//   the gradients' norm over every piece of every pipeline rank, --clip, each piece's step
//   --save, --checkpoint and --resume in the whole gpt's files (any parallelisation reads them)
//
// Place says where the pipeline ranks are: every one in this process (the simulation:
// in_process), or one per group of processes (MPI: pipeline_instance.cpp's mpi_place). The
// norm's sums of squares are added per pipeline rank, then over the pipeline ranks in their
// order, so that both give the same bits. A place's team() says who writes the files.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/io/checkpoint.hpp"
#include "spmd/nn/gpt_stages.hpp"
#include "spmd/nn/unit_choice.hpp"
#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/clip_grad.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/optim.hpp"
#include "spmd/runtime/pipeline.hpp"

#include "gpt.hpp"
#include "inputs.hpp"
#include "options.hpp"
#include "result.hpp"
#include "trainer.hpp"

namespace spmd_train {

/// The schedule's kind and shape for `o` (check() in spmd_train.cpp has refused the rest):
/// interleaved gives each pipeline rank pieces / pp stages, the others one.
inline spmd::pp::shape pipeline_shape(const train_options& o, int pieces) {
  spmd::pp::schedule_kind k{};
  spmd::pp::parse_schedule(o.schedule, k);
  const int v = k == spmd::pp::schedule_kind::interleaved ? pieces / o.pp : 1;
  return {o.pp, v, o.microbatches};
}

template <class Cfg, int Mb>
struct gpt_pipeline {
  using model = gpt_model<Cfg>;
  using host_type = typename model::host_type;
  using B = typename Cfg::backend;
  static constexpr index_t rows = model::batch / Mb, context = model::context, vocab = model::vocab;
  static constexpr int pieces = spmd::nn::gpt_pieces(host_type::layers);
  using seq = typename Cfg::sequence_placements;
  template <class U>
  using micro = typename Cfg::template data_tensor<U, seq, rows, context>;

  using embed_t = decltype(Cfg::template parallelize<spmd::nn::tp_plan<>, spmd::nn::units<"">>(
      spmd::nn::embedding_of(std::declval<const host_type&>())));
  using block_t = decltype(Cfg::template parallelize<spmd::nn::gpt_block_megatron, spmd::nn::units<"">>(
      std::declval<const host_type&>().blocks[0]));
  using head_t = decltype(Cfg::template parallelize<spmd::nn::gpt_head_megatron, spmd::nn::units<"">>(
      spmd::nn::head_of(std::declval<const host_type&>())));
  using act = typename decltype(std::declval<embed_t&>()(std::declval<const micro<std::int64_t>&>()))::value_type;

  /// The pieces held here (by piece index; the others empty).
  std::optional<embed_t> embed;
  std::vector<std::optional<block_t>> blocks = std::vector<std::optional<block_t>>(host_type::layers);
  std::optional<head_t> head;
  spmd::pp::shape dims;
  // this step's microbatches
  std::vector<micro<std::int64_t>> tokens, targets;

  /// runtime::pipeline's stages: the pieces of stage s in order.
  struct stages {
    using activation = act;
    gpt_pipeline& g;
    template <class In>
    auto forward(int s, int m, const In* in) {
      const spmd::nn::piece_run run = spmd::nn::piece_range(pieces, g.dims.stages(), s);
      auto h = [&] {
        if (run.first == 0) return (*g.embed)(g.tokens[std::size_t(m)]);
        return (*g.blocks[std::size_t(run.first - 1)])(*in);
      }();
      for (int p = run.first + 1; p < run.last; ++p) h = (*g.blocks[std::size_t(p - 1)])(h);
      return h;
    }
    template <class In>
    auto loss(int s, int m, const In* in) {
      const spmd::nn::piece_run run = spmd::nn::piece_range(pieces, g.dims.stages(), s);
      auto through = [&](auto h) {
        for (int p = std::max(run.first, 1); p < run.last - 1; ++p) h = (*g.blocks[std::size_t(p - 1)])(h);
        return rt::vocab_parallel_cross_entropy<vocab>((*g.head)(h), g.targets[std::size_t(m)]) *
               (1.0f / static_cast<float>(Mb));
      };
      if (run.first == 0) return through((*g.embed)(g.tokens[std::size_t(m)]));
      return through(*in);
    }
  };

  /// Step s's batch in Mb microbatches of `rows` samples: read as the whole model reads it
  /// (the batch on dp, the positions on cp), gathered, then cut.
  void load_batch(const inputs& in, std::int64_t s) {
    tokens.clear();
    targets.clear();
    for (const bool is_tokens : {true, false}) {
      const char* name = is_tokens ? "tokens" : "targets";
      const std::vector<std::int64_t> v =
          Cfg::template data_of<std::int64_t, seq, model::batch, context>(in, name, is_tokens ? in.tokens : in.targets, s)
              .full_tensor();
      for (int m = 0; m < Mb; ++m) {
        const auto first = v.begin() + m * rows * context;
        (is_tokens ? tokens : targets)
            .push_back(Cfg::factories::template distribute_tensor<typename micro<std::int64_t>::layout_type>(
                std::vector<std::int64_t>(first, first + rows * context)));
      }
    }
  }
};

/// A piece's parameters with their optimizer, behind functions of one type (as unit_parts).
template <class Cfg>
struct piece_part {
  using partial_type = typename trainer_detail::unit_parts<gpt_model<Cfg>>::partial_type;
  using norm_type = typename trainer_detail::unit_parts<gpt_model<Cfg>>::norm_type;
  int rank;  // the pipeline rank holding it
  std::function<partial_type()> square_sum;
  std::function<void(double, const norm_type&)> clip;
  std::function<void()> step;
  std::function<std::size_t(spmd::index_t)> bytes_of_rank;
  std::function<void(std::vector<spmd::io::saved_tensor>&)> to_save;
  spmd::io::state_part state;  // its share of a checkpoint, under the whole gpt's names
};

template <class Cfg, class Params>
piece_part<Cfg> make_part(const train_options& o, int rank, Params params, std::string prefix) {
  piece_part<Cfg> part{rank, {}, {}, {}, {}, {}, {}};
  trainer_detail::with_optimizer(o, params, [&](auto made) {
    auto opt = std::make_shared<decltype(made)>(std::move(made));
    part.square_sum = [params] { return std::apply([](auto&... p) { return rt::grad_square_sum(p...); }, params); };
    part.clip = [params](double c, const auto& n) { std::apply([&](auto&... p) { rt::clip_grads_with_norm_(c, n, p...); }, params); };
    part.step = [opt] {
      opt->step();
      opt->zero_grad();
    };
    part.bytes_of_rank = [opt](spmd::index_t r) { return opt->bytes_of_rank(r).total(); };
    part.to_save = [params, prefix](std::vector<spmd::io::saved_tensor>& out) {
      std::apply([&](auto&... p) { (out.push_back(spmd::io::to_save(prefix + p.name(), p.value())), ...); }, params);
    };
    part.state = spmd::io::state_part_of(*opt, prefix);
    return 0;
  });
  return part;
}

/// Trains the gpt with pipeline parallelism, Mb microbatches a step, the pipeline ranks where
/// Place puts them.
template <class Cfg, int Mb, class Place>
train_result train_gpt_pipeline(const train_options& o, const inputs& in, const model_spec& spec, Place& place) {
  using G = gpt_pipeline<Cfg, Mb>;
  using B = typename Cfg::backend;
  using host_type = typename G::host_type;
  G g;
  g.dims = pipeline_shape(o, G::pieces);
  const spmd::pp::schedule_kind kind = [&] {
    spmd::pp::schedule_kind k{};
    spmd::pp::parse_schedule(o.schedule, k);
    return k;
  }();
  const spmd::pp::built table = spmd::pp::build(kind, g.dims);
  if (table.info.failed.what != spmd::pp::fault::none)
    throw std::logic_error(std::string("spmd-train: the schedule cannot run: ") + spmd::pp::describe(table.info.failed.what));
  const std::vector<int> mine = place.mine();
  const host_type host = Cfg::template host_from<host_type>(in);
  std::vector<piece_part<Cfg>> parts;
  for (const int r : mine)
    for (int s = r; s < g.dims.stages(); s += g.dims.ranks) {
      const spmd::nn::piece_run run = spmd::nn::piece_range(G::pieces, g.dims.stages(), s);
      for (int p = run.first; p < run.last; ++p) {
        const std::string prefix = spmd::nn::piece_path(G::pieces, p);
        if (p == 0) {
          g.embed.emplace(Cfg::template parallelize<spmd::nn::tp_plan<>, spmd::nn::units<"">>(spmd::nn::embedding_of(host)));
          parts.push_back(make_part<Cfg>(o, r, spmd::nn::parameters(*g.embed), prefix));
        } else if (p == G::pieces - 1) {
          g.head.emplace(Cfg::template parallelize<spmd::nn::gpt_head_megatron, spmd::nn::units<"">>(spmd::nn::head_of(host)));
          parts.push_back(make_part<Cfg>(o, r, spmd::nn::parameters(*g.head), prefix));
        } else {
          auto& b = g.blocks[std::size_t(p - 1)];
          b.emplace(Cfg::template parallelize<spmd::nn::gpt_block_megatron, spmd::nn::units<"">>(host.blocks[std::size_t(p - 1)]));
          parts.push_back(make_part<Cfg>(o, r, spmd::nn::parameters(*b), prefix));
        }
      }
    }

  // the training state: each piece's parameters and optimizer under the whole gpt's names, so
  // that any parallelisation resumes it (with or without a pipeline); under MPI each group
  // reads its pieces' and writes them into one file with the others (the place's file team)
  std::vector<spmd::io::state_part> states;
  for (piece_part<Cfg>& p : parts) states.push_back(p.state);
  spmd::io::save_options together;
  together.team = place.team();

  train_result r;
  r.prints = place.prints();
  if (!o.resume.empty()) {
    const std::int64_t step = spmd::io::load_training_state(o.resume, states).step;
    if (step > o.steps)
      throw usage_error("--resume " + o.resume + ": the checkpoint is at step " + std::to_string(step) +
                        ", past --steps " + std::to_string(o.steps));
    r.first_step = step;
  }
  if (in.loader) {
    r.steps_per_epoch = in.loader->steps_per_epoch();
    r.epoch = in.loader->epoch_of(o.steps - 1);
  }
  const bool table_out = r.prints && !o.json;
  if (table_out) std::printf("%13s %14s %14s %10s\n", "step", "loss", "grad_norm", "ms");
  typename G::stages st{g};
  for (std::int64_t s = r.first_step; s < o.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    rt::comm_counter comm;
    g.load_batch(in, s);
    double loss = rt::pipeline::run(table.table, g.dims, st, place.link(), mine);
    auto counts = [&] {
      return std::array<int, 4>{comm.count(spmd::step_kind::all_gather), comm.count(spmd::step_kind::all_reduce),
                                comm.count(spmd::step_kind::reduce_scatter), comm.count(spmd::step_kind::all_to_all)};
    };
    const std::array<int, 4> in_stages = counts();  // each pipeline rank's own (summed below)
    loss = place.loss_from_last(loss);
    // the norm: each pipeline rank's sum of squares, then the ranks' in their order
    using partial_type = typename piece_part<Cfg>::partial_type;
    std::vector<std::optional<partial_type>> per_rank(static_cast<std::size_t>(g.dims.ranks));
    for (piece_part<Cfg>& p : parts) {
      auto& acc = per_rank[std::size_t(p.rank)];
      if (!acc) acc = p.square_sum();
      else acc = rt::add<typename partial_type::placements_type>(*acc, p.square_sum());
    }
    const partial_type total = place.sum_over_ranks(per_rank);
    const auto norm = rt::grad_norm_of(total);
    if (o.clip)
      for (piece_part<Cfg>& p : parts) p.clip(*o.clip, norm);
    for (piece_part<Cfg>& p : parts) p.step();
    const double n = trainer_detail::scalar(norm);
    r.losses.push_back(loss);
    r.grad_norms.push_back(n);
    // the stages' collectives of every pipeline rank (each runs its own on its mesh), then the
    // norm's, which the simulation runs once over every rank's sum and MPI once per group:
    // counted once (this process's)
    const std::array<int, 4> all = counts(), stages_all = place.sum_counts(in_stages);
    for (std::size_t k = 0; k < 4; ++k) r.collectives[k] = stages_all[k] + all[k] - in_stages[k];
    r.step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (table_out) trainer_detail::progress(s + 1, o.steps, loss, n, r.step_ms.back());
    if (!o.checkpoint.empty() && o.checkpoint_at && s + 1 == *o.checkpoint_at)
      spmd::io::save_training_state<B>(o.checkpoint, states, {.step = s + 1, .generator = {}}, together);
  }
  if (!o.save.empty()) {  // the file is the whole gpt's: every piece's parameters, written by the groups holding them
    std::vector<spmd::io::saved_tensor> all;
    for (piece_part<Cfg>& p : parts) p.to_save(all);
    std::size_t held = 0;
    for (const spmd::io::saved_tensor& t : all)
      for (const auto& want : spec.params) held += t.entry.name == want.name;
    if (held != all.size() || (!together.team && all.size() != spec.params.size()))
      throw std::logic_error("spmd-train: the pipeline's pieces hold other parameters than the spec lists");
    spmd::io::save_tensors<B>(o.save, together, all);
  }
  // the most any rank holds: a mesh rank of a pipeline rank holds that pipeline rank's pieces
  using M = typename Cfg::mesh;
  for (const int pr : mine)
    for (spmd::index_t rank = 0; rank < M::size; ++rank) {
      std::size_t b = 0;
      for (piece_part<Cfg>& p : parts)
        if (p.rank == pr) b += p.bytes_of_rank(rank);
      r.bytes_per_rank = std::max<std::int64_t>(r.bytes_per_rank, static_cast<std::int64_t>(b));
    }
  r.bytes_per_rank = place.max_over_ranks(r.bytes_per_rank);
  r.pipeline = pipeline_report{o.schedule, g.dims.ranks, g.dims.virtual_stages, g.dims.microbatches,
                               1.0 - double(spmd::pp::busy_slots(table.table)) / double(table.table.slots * table.table.ranks),
                               table.table.slots};
  return r;
}

/// Every pipeline rank in this process (the simulation).
struct in_process_place {
  explicit in_process_place(int pipeline_ranks) : ranks(pipeline_ranks) {}
  int ranks;
  rt::pipeline::in_process link_;
  std::optional<spmd::io::file_team> team() const { return std::nullopt; }  // every piece is here
  std::vector<int> mine() const {
    std::vector<int> v;
    for (int r = 0; r < ranks; ++r) v.push_back(r);
    return v;
  }
  bool prints() const { return true; }
  rt::pipeline::in_process& link() { return link_; }
  double loss_from_last(double loss) const { return loss; }
  std::int64_t max_over_ranks(std::int64_t v) const { return v; }
  std::array<int, 4> sum_counts(std::array<int, 4> c) const { return c; }
  template <class Partial>
  Partial sum_over_ranks(std::vector<std::optional<Partial>>& per_rank) const {
    Partial total = *per_rank[0];
    for (std::size_t i = 1; i < per_rank.size(); ++i)
      total = rt::add<typename Partial::placements_type>(total, *per_rank[i]);
    return total;
  }
};

}  // namespace spmd_train
