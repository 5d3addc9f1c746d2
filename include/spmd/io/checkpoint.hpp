// spmd/io/checkpoint.hpp — sharded state dicts as safetensors files: save a distributed module
// (or named dtensors) under one layout, load it under another; every rank reads only its block.
//
//   spmd::io::save("mlp.safetensors", d);                                     // d: distributed_module
//   auto e = spmd::io::load_module<tp_plan_4x2, Mesh4x2, spmd::sim::backend, mlp>("mlp.safetensors");
//   auto w = spmd::io::load<float, L, spmd::sim::backend>("mlp.safetensors", "w1");
//
// The file (docs/modules.md): one safetensors file per checkpoint holding every tensor's
// *global* value, row-major, so the Python package (and PyTorch, numpy, Hugging Face) reads it
// as it is, and any layout can be loaded from it. Saving: every process computes the same
// header; the first process creates `path + ".tmp"` at its final size; every block is written
// once, by the rank holding it at coordinate 0 of its Replicate dims (Partial placements are
// reduced first, by the redistribute plan to Replicate); every process syncs; the first renames
// the file over `path` and syncs its folder. A crash before the rename leaves the previous
// checkpoint whole; a failed write removes the temporary file; a `path` that exists and is not
// a regular file (a device, a FIFO, a directory) is refused before anything is written
// (host/output_file.hpp, docs/files.md).
// Loading: the file is memory-mapped and each rank copies only its box's runs.
//
// Errors are spmd::io::checkpoint_error naming the file, the tensor and the problem: a missing
// tensor, another dtype or shape, a truncated file, a corrupt header; a file that cannot be
// written is host::file_error (checkpoint_error's base) naming it and the reason.
#pragma once

#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/host/distribute.hpp"
#include "spmd/core/box_runs.hpp"
#include "spmd/io/file_team.hpp"
#include "spmd/io/safetensors.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/module.hpp"

namespace spmd::io {

/// What save takes besides the tensors.
struct save_options {
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
  /// Called after each tensor's blocks are written (by this process), before the file is
  /// committed: progress, or a test's way to stop a save half-way.
  std::function<void(std::string_view name)> after_tensor;
  /// The processes writing the file when each holds only some of its tensors (a pipeline's
  /// groups, io/file_team.hpp); without one, every process of the backend holds every tensor.
  std::optional<file_team> team;
};

namespace detail {

/// Process coordination for a backend with a process per rank (MPI, NCCL: B::process_rank()
/// and B::barrier()); one process otherwise.
template <class B>
int process_rank() {
  if constexpr (requires { B::process_rank(); }) return B::process_rank();
  else return 0;
}
template <class B>
void barrier() {
  if constexpr (requires { B::barrier(); }) B::barrier();
}

template <class P>
struct without_partial_one {
  using type = P;
};
template <reduce_op Op>
struct without_partial_one<partial<Op>> {
  using type = replicate;
};
template <class Placements>
struct without_partial;
template <class... P>
struct without_partial<placements<P...>> {
  using type = placements<typename without_partial_one<P>::type...>;
};

/// The rank at mesh index i writes its block: coordinate 0 on every Replicate dim.
inline bool writes_block(const layout_spec& spec, index_t i) {
  const coord_vec c = unravel(spec.mesh, i);
  for (int m = 0; m < spec.placements.size(); ++m)
    if (spec.placements[m].is_replicate() && c[m] != 0) return false;
  return true;
}

template <class T>
tensor_entry entry_of(std::string_view name, const shape_vec& global) {
  tensor_entry e;
  e.name = std::string(name);
  e.type = dtype_of<T>();
  e.shape.assign(global.begin(), global.end());
  return e;
}

/// Writes this process's blocks of x (no Partial placements) into f.
template <class T, class L, class B>
void write_blocks(atomic_file& f, const safetensors_layout& lay, std::string_view name,
                  const runtime::dtensor<T, L, B>& x) {
  const tensor_entry& e = lay.at(std::string(name));
  const shape_vec global = x.layout().extents().to_vec();
  for (const index_t i : x.locals().held()) {
    if (!writes_block(L::spec(), i)) continue;
    const host::host_tensor<T> local = x.to_local(L::mesh_type::rank_at(i));
    for_each_box_run(box_at(L::spec(), global, unravel(L::spec().mesh, i)), global,
                     [&](index_t g, index_t at, index_t n) {
                       f.write(local.data.data() + at, static_cast<std::size_t>(n) * sizeof(T),
                               lay.data_start() + e.begin + g * static_cast<index_t>(sizeof(T)));
                     });
  }
}

template <class T, class L, class B>
void save_one(atomic_file& f, const safetensors_layout& lay, std::string_view name,
              const runtime::dtensor<T, L, B>& x) {
  using P = typename L::placements_type;
  using Q = typename without_partial<P>::type;
  if constexpr (std::is_same_v<P, Q>) write_blocks(f, lay, name, x);
  else write_blocks(f, lay, name, runtime::redistribute<Q>(x));  // reduce in group order
}

/// Loads tensor `name` of layout L on backend B from an open file.
template <class T, class L, class B>
runtime::dtensor<T, L, B> load_from(const safetensors_file& file, const std::string& name, const L& layout) {
  using M = typename L::mesh_type;
  const shape_vec global = layout.extents().to_vec();
  const std::vector<index_t> shape(global.begin(), global.end());
  file.expect<T>(name, shape);
  const host::held_range held = B::template held<M>();
  host::local_set<T> locals(M::size, held);
  const reduce_op op = host::detail::partial_of(L::spec()).op;
  for (const index_t i : held.indices()) {
    const local_box box = box_at(L::spec(), global, unravel(L::spec().mesh, i));
    locals.assign(i, box.shape);
    if (host::holds_identity(L::spec(), i)) std::fill_n(locals.data(i), locals.size(i), host::identity<T>(op));
    else file.read_box<T>(name, shape, box, locals.data(i));
  }
  return runtime::dtensor<T, L, B>(runtime::detail::internal_t{}, layout, runtime::to_storage<B>(std::move(locals)));
}

}  // namespace detail

/// A dtensor to save, its type set aside: its name, its entry in the file, and how this process
/// writes its blocks. It refers to the dtensor, which must outlive the save.
struct saved_tensor {
  tensor_entry entry;
  std::function<void(atomic_file&, const safetensors_layout&)> write;
};

/// x, named `name`, to save with save_tensors(path, options, list): for tensors whose types a
/// program knows only one at a time (an optimizer per unit whose holding was chosen at run time).
template <class T, class L, class B>
saved_tensor to_save(std::string_view name, const runtime::dtensor<T, L, B>& x) {
  return {detail::entry_of<T>(name, x.layout().extents().to_vec()),
          [&x, n = std::string(name)](atomic_file& f, const safetensors_layout& lay) { detail::save_one(f, lay, n, x); }};
}
/// x, held by the saved_tensor itself (a value made for the save: an optimizer's zero state).
template <class T, class L, class B>
saved_tensor to_save(std::string_view name, runtime::dtensor<T, L, B>&& x) {
  auto held = std::make_shared<const runtime::dtensor<T, L, B>>(std::move(x));
  return {detail::entry_of<T>(name, held->layout().extents().to_vec()),
          [held, n = std::string(name)](atomic_file& f, const safetensors_layout& lay) { detail::save_one(f, lay, n, *held); }};
}

/// Saves `tensors` (to_save's) as one safetensors file at `path`, every process of backend B
/// writing its blocks (or, with options.team, every process of the team its tensors' blocks).
template <class B>
void save_tensors(const std::string& path, const save_options& options, const std::vector<saved_tensor>& tensors) {
  std::vector<tensor_entry> entries;
  for (const saved_tensor& t : tensors) entries.push_back(t.entry);
  std::map<std::string, std::string> metadata = options.metadata;
  if (options.team) std::tie(entries, metadata) = detail::merge_headers(options.team->exchange(detail::describe_header(entries, metadata)));
  const safetensors_layout lay(std::move(entries), metadata);
  const bool first = options.team ? options.team->first : detail::process_rank<B>() == 0;
  const auto barrier = [&] {
    if (options.team) options.team->barrier();
    else detail::barrier<B>();
  };
  std::optional<atomic_file> f;
  if (first) {
    f.emplace(atomic_file::create(path, lay.file_bytes()));
    f->write(lay.header_bytes().data(), lay.header_bytes().size(), 0);
  }
  barrier();
  if (!first) f.emplace(atomic_file::open_existing(path));
  for (const saved_tensor& t : tensors) {
    t.write(*f, lay);
    if (options.after_tensor) options.after_tensor(t.entry.name);
  }
  f->sync();
  barrier();
  if (first) f->commit();  // durable when it returns: the file and its folder synced
  barrier();
  if (!first) f->release();
}

/// Saves named dtensors (pairs of a name and a dtensor) as one safetensors file at `path`.
template <class B, class... D>
void save_tensors(const std::string& path, const save_options& options, const std::pair<std::string_view, const D&>&... named) {
  save_tensors<B>(path, options, std::vector<saved_tensor>{to_save(named.first, named.second)...});
}

namespace detail {
template <class DM, std::size_t... I>
void save_module(const std::string& path, const DM& module, const save_options& options,
                 std::index_sequence<I...>) {
  using Members = typename DM::member_types;
  using Tuple = typename DM::tuple_type;
  save_tensors<typename DM::backend_type>(
      path, options,
      std::pair<std::string_view, const std::tuple_element_t<I, Tuple>&>(
          std::tuple_element_t<I, Members>::name, std::get<I>(module.members_tuple()))...);
}
}  // namespace detail

/// Saves every member of a distributed module, under its member name.
template <class S, template <fixed_string, class> class Partition, class Mesh, class B>
void save(const std::string& path, const runtime::distributed_module<S, Partition, Mesh, B>& module,
          const save_options& options = {}) {
  using DM = runtime::distributed_module<S, Partition, Mesh, B>;
  detail::save_module(path, module, options,
                      std::make_index_sequence<std::tuple_size_v<typename DM::member_types>>{});
}

/// Tensor `name` of `path` as a dtensor of layout L on backend B: each rank reads its block.
template <class T, class L, class B>
runtime::dtensor<T, L, B> load(const std::string& path, const std::string& name, const L& layout = L{}) {
  const safetensors_file file(path);
  return detail::load_from<T, L, B>(file, name, layout);
}

/// Every member of struct S from `path`, distributed by Partition on Mesh (the layouts may
/// differ from the ones it was saved under).
template <template <fixed_string, class> class Partition, class Mesh, class B, class S>
runtime::distributed_module<S, Partition, Mesh, B> load_module(const std::string& path) {
  using DM = runtime::distributed_module<S, Partition, Mesh, B>;
  using Members = typename DM::member_types;
  const safetensors_file file(path);
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return DM(typename DM::tuple_type(
        detail::load_from<typename std::tuple_element_t<I, Members>::value_type,
                          typename std::tuple_element_t<I, Members>::layout_type, B>(
            file, std::string(std::tuple_element_t<I, Members>::name),
            typename std::tuple_element_t<I, Members>::layout_type{})...));
  }(std::make_index_sequence<std::tuple_size_v<Members>>{});
}

}  // namespace spmd::io
