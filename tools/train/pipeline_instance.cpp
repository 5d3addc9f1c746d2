// tools/train/pipeline_instance.cpp — the gpt trained with pipeline parallelism on one backend
// (pipeline_trainer.hpp): meson compiles it once per host backend, with
//   SPMD_TRAIN_BACKEND  sim or mpi     SPMD_TRAIN_BACKEND_TYPE, SPMD_TRAIN_BACKEND_HEADER as instance.cpp's
// over the (dp, tp, cp) mesh of run-time sizes, FSDP or DDP in f32, and 1, 2, 4 or 8
// microbatches (a microbatch's samples are a compile-time size: the gpt's batch of 8 cut).
// Under MPI the world is cut into pp groups of dp·tp·cp processes (spmd::mpi::pipeline_world),
// each group's meshes naming its processes.
#include "inputs.hpp"
#include "options.hpp"
#include "pipeline_trainer.hpp"
#include "result.hpp"

#include SPMD_TRAIN_BACKEND_HEADER
#ifdef SPMD_TRAIN_PIPELINE_MPI
#include "spmd/backends/mpi/pipeline.hpp"
#endif

#define SPMD_TRAIN_PIPELINE_JOIN(backend) train_gpt_pipeline_##backend
#define SPMD_TRAIN_PIPELINE_FN(backend) SPMD_TRAIN_PIPELINE_JOIN(backend)

namespace spmd_train {

namespace {

using backend_t = SPMD_TRAIN_BACKEND_TYPE;

#ifdef SPMD_TRAIN_PIPELINE_MPI
/// One pipeline rank per group of processes: this process's group, the link across the
/// groups; the loss from the last stage's group, the norm's sums of squares gathered and
/// added in the pipeline ranks' order (as in_process_place adds them).
struct mpi_place {
  spmd::mpi::pipeline_world world;
  spmd::mpi::communicator_scope in_group{world.group()};
  spmd::mpi::pipeline_link link_{world};
  explicit mpi_place(int ranks) : world(ranks) {}
  std::vector<int> mine() const { return {world.pipeline_rank()}; }
  bool prints() const {  // the first process of the job (not of each group)
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == 0;
  }
  std::array<int, 4> sum_counts(std::array<int, 4> c) const {
    std::array<int, 4> out{};
    MPI_Allreduce(c.data(), out.data(), 4, MPI_INT, MPI_SUM, world.across());
    return out;
  }
  std::int64_t max_over_ranks(std::int64_t v) const {
    long long in = v, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_MAX, world.across());
    return out;
  }
  spmd::mpi::pipeline_link& link() { return link_; }
  /// The world writes one file: each group its pieces' tensors, the first process the header.
  std::optional<spmd::io::file_team> team() const {
    return spmd::io::file_team{world.world_rank() == 0, [this] { world.world_barrier(); },
                               [this](const std::string& mine) { return world.gather_across(mine); }};
  }
  double loss_from_last(double loss) const {
    int ranks = 0;
    MPI_Comm_size(world.across(), &ranks);
    MPI_Bcast(&loss, 1, MPI_DOUBLE, ranks - 1, world.across());
    return loss;
  }
  template <class Partial>
  Partial sum_over_ranks(std::vector<std::optional<Partial>>& per_rank) const {
    using T = typename Partial::value_type;
    static_assert(sizeof(T) == sizeof(float), "spmd-train: the pipeline's norm is summed in f32");
    Partial mine_sum = std::move(*per_rank[std::size_t(world.pipeline_rank())]);
    auto& ls = mine_sum.locals(spmd::runtime::detail::internal_t{});
    if (ls.held_ranks().count() == 0) return mine_sum;
    const spmd::index_t me = ls.held_ranks().lo;
    if (ls.size(me) != 1) throw std::logic_error("spmd-train: a sum of squares of more than one element");
    int ranks = 0;
    MPI_Comm_size(world.across(), &ranks);
    std::vector<float> all(static_cast<std::size_t>(ranks));
    const float v = ls.data(me)[0];
    MPI_Allgather(&v, 1, MPI_FLOAT, all.data(), 1, MPI_FLOAT, world.across());
    float total = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) total = total + all[i];
    ls.data(me)[0] = total;
    return mine_sum;
  }
};
using place_t = mpi_place;
#else
using place_t = in_process_place;
#endif

template <dp_kind Dp, int Mb>
train_result go(const train_options& o, const inputs& in, const model_spec& spec) {
  place_t place(o.pp);
  return train_gpt_pipeline<dyn_config<backend_t, Dp, float>, Mb>(o, in, spec, place);
}

template <dp_kind Dp>
train_result by_microbatches(const train_options& o, const inputs& in, const model_spec& spec) {
  switch (o.microbatches) {
    case 1: return go<Dp, 1>(o, in, spec);
    case 2: return go<Dp, 2>(o, in, spec);
    case 4: return go<Dp, 4>(o, in, spec);
    case 8: return go<Dp, 8>(o, in, spec);
  }
  throw usage_error("--microbatches " + std::to_string(o.microbatches) + " does not divide the gpt's batch of 8");
}

}  // namespace

train_result SPMD_TRAIN_PIPELINE_FN(SPMD_TRAIN_BACKEND)(const train_options& o, const inputs& in, const model_spec& spec) {
  spmd::bind_mesh<typename dyn_config<backend_t, dp_kind::fsdp, float>::mesh>(spmd::dims<3>{o.dp, o.tp, o.cp});
  const spmd::runtime::context_method_scope cp_method(o.cp_method == "ring" ? spmd::runtime::context_method::ring
                                                                             : spmd::runtime::context_method::all_gather);
  if (o.dp > 1 && o.dp_mode == "ddp") return by_microbatches<dp_kind::ddp>(o, in, spec);
  return by_microbatches<dp_kind::fsdp>(o, in, spec);
}

}  // namespace spmd_train
