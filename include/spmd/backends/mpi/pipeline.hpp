// spmd/backends/mpi/pipeline.hpp — a pipeline over MPI processes: the world cut into one
// group of processes per pipeline rank, and the link that runs a slot's transfers between
// them (runtime/pipeline.hpp runs the table).
//
//   spmd::mpi::pipeline_world world(4);                       // 4 pipeline ranks
//   spmd::mpi::communicator_scope in_group(world.group());    // meshes name the group's ranks
//   spmd::mpi::pipeline_link link{world};
//   runtime::pipeline::run(table, dims, stages, link, {world.pipeline_rank()});
//
// World rank w is mesh index w mod g of pipeline rank w / g, g = world size / ranks: the
// groups are consecutive, as torchtitan's mesh puts pp outermost. A transfer goes from a
// process to the process of the same mesh index in the peer's group (both hold the same
// block of the activation's layout), over a communicator of those processes. A slot's sends
// and receives are posted together and finished before the next slot, which is what makes a
// checked table free of deadlock (plan/pipeline_schedule.hpp).
#pragma once

#include "spmd/backends/mpi/mpi_c.hpp"

#include <array>
#include <span>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/mpi/backend.hpp"
#include "spmd/backends/mpi/environment.hpp"
#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/pipeline.hpp"

namespace spmd::mpi {

/// The world split into `ranks` pipeline ranks: the group of this process (what its meshes
/// name) and the communicator across the groups (one process of each).
class pipeline_world {
 public:
  explicit pipeline_world(int ranks) {
    int size = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (ranks < 1 || size % ranks != 0)
      throw std::invalid_argument("spmd::mpi::pipeline_world: " + std::to_string(size) +
                                  " processes cannot be cut into " + std::to_string(ranks) +
                                  " pipeline ranks of equal groups");
    group_size_ = size / ranks;
    pipeline_rank_ = rank / group_size_;
    detail::check(MPI_Comm_split(MPI_COMM_WORLD, pipeline_rank_, rank % group_size_, &group_), "MPI_Comm_split");
    detail::check(MPI_Comm_split(MPI_COMM_WORLD, rank % group_size_, pipeline_rank_, &across_), "MPI_Comm_split");
    MPI_Comm_set_errhandler(across_, MPI_ERRORS_RETURN);
  }
  pipeline_world(const pipeline_world&) = delete;
  pipeline_world& operator=(const pipeline_world&) = delete;
  ~pipeline_world() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    if (group_ != MPI_COMM_NULL) MPI_Comm_free(&group_);
    if (across_ != MPI_COMM_NULL) MPI_Comm_free(&across_);
  }

  int pipeline_rank() const { return pipeline_rank_; }
  int group_size() const { return group_size_; }
  /// This process's pipeline rank's processes: install it with communicator_scope.
  MPI_Comm group() const { return group_; }
  /// One process per pipeline rank (this one's mesh index in each group), ranked by pipeline rank.
  MPI_Comm across() const { return across_; }
  /// This process's rank in the world (every group's processes).
  int world_rank() const {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }
  /// Waits for every process of every group.
  void world_barrier() const { detail::check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  /// Each pipeline rank's `text`, in pipeline-rank order (this process and its peers of the same
  /// mesh index in the other groups): what each group says of itself, to every group (a file
  /// the groups write together, io/file_team.hpp).
  std::vector<std::string> gather_across(const std::string& text) const {
    int ranks = 0;
    MPI_Comm_size(across_, &ranks);
    const int mine = detail::count_of(static_cast<index_t>(text.size()), "a pipeline rank's text");
    std::vector<int> sizes(static_cast<std::size_t>(ranks)), at(static_cast<std::size_t>(ranks));
    detail::check(MPI_Allgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, across_), "MPI_Allgather");
    long long total = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      at[i] = static_cast<int>(total);
      total += sizes[i];
    }
    const int all_count = detail::count_of(static_cast<index_t>(total), "the pipeline ranks' texts");
    std::string all(static_cast<std::size_t>(all_count), '\0');
    detail::check(MPI_Allgatherv(text.data(), mine, MPI_CHAR, all.data(), sizes.data(), at.data(), MPI_CHAR, across_),
                  "MPI_Allgatherv");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < sizes.size(); ++i) out.push_back(all.substr(static_cast<std::size_t>(at[i]), static_cast<std::size_t>(sizes[i])));
    return out;
  }

 private:
  int group_size_ = 1, pipeline_rank_ = 0;
  MPI_Comm group_ = MPI_COMM_NULL, across_ = MPI_COMM_NULL;
};

/// runtime::pipeline's link over MPI: a slot's send and receives as non-blocking calls on
/// the communicator across the groups, then one wait for all of them.
struct pipeline_link {
  const pipeline_world& world;
  static constexpr int tag = 11;

  template <class Table, class Act>
  void exchange(const Table& t, int slot, std::span<const int> mine,
                std::vector<runtime::pipeline::store<Act>>& stores) const {
    using T = typename Act::value_type;
    for (const int r : mine) {
      const pp::cell& c = t(slot, r);
      if (c.send.peer < 0 && c.recv[0].peer < 0 && c.recv[1].peer < 0) continue;
      runtime::pipeline::slot_transfers<Act, backend> x(c, stores[static_cast<std::size_t>(r)], "spmd::mpi::pipeline_link");
      std::array<MPI_Request, 3> req{MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      int n = 0;
      const MPI_Datatype type = detail::element_type(sizeof(T));
      if (x.sending)
        if (const auto [p, count] = x.block(*x.sending); count > 0)
          detail::check(MPI_Isend(p, detail::count_of(count, "a stage's activation"), type, c.send.peer, tag,
                                  world.across(), &req[static_cast<std::size_t>(n++)]),
                        "MPI_Isend");
      for (auto& a : x.receiving)
        if (const auto [p, count] = x.block(a.value); count > 0)
          detail::check(MPI_Irecv(p, detail::count_of(count, "a stage's activation"), type, a.peer, tag,
                                  world.across(), &req[static_cast<std::size_t>(n++)]),
                        "MPI_Irecv");
      detail::check(MPI_Waitall(n, req.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
      x.arrived();
    }
  }
};

}  // namespace spmd::mpi
