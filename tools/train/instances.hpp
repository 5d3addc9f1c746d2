// tools/train/instances.hpp — one training function per (model, mesh, backend), each compiled
// in its own translation unit (instance.cpp, built once per triple by meson) so that the
// builds run in parallel. The list comes from the build (train_built.hpp, written by meson
// from the options train_meshes and train_gpu):
//   SPMD_TRAIN_BUILT(X)       X(model, D, T, backend) for every instance
//   SPMD_TRAIN_MESH_NAMES     "1, 2, 3, 4, 8, 2x2, 2x4, 4x2, 1x4"
//   SPMD_TRAIN_BACKEND_NAMES  "sim, mpi"
#pragma once

#include <string>

#include "inputs.hpp"
#include "options.hpp"
#include "result.hpp"
#include "train_built.hpp"

namespace spmd_train {

using train_fn = train_result (*)(const train_options&, const inputs&, const model_spec&);

#define SPMD_TRAIN_DECLARE(model, D, T, backend) \
  train_result train_##model##_##D##x##T##_##backend(const train_options&, const inputs&, const model_spec&);
SPMD_TRAIN_BUILT(SPMD_TRAIN_DECLARE)
#undef SPMD_TRAIN_DECLARE

/// The meshes and backends built, for messages.
inline std::string meshes_built() { return SPMD_TRAIN_MESH_NAMES; }
inline std::string backends_built() { return SPMD_TRAIN_BACKEND_NAMES; }
inline bool backend_built(const std::string& b) {
#define SPMD_TRAIN_HAS(model, D, T, backend) \
  if (b == #backend) return true;
  SPMD_TRAIN_BUILT(SPMD_TRAIN_HAS)
#undef SPMD_TRAIN_HAS
  return false;
}

/// The training function of `model` on mesh D×T and `backend`, or nullptr when not built.
inline train_fn find_instance(const std::string& m, const std::string& b, int d, int t) {
#define SPMD_TRAIN_FIND(model, D, T, backend) \
  if (m == #model && b == #backend && d == D && t == T) return &train_##model##_##D##x##T##_##backend;
  SPMD_TRAIN_BUILT(SPMD_TRAIN_FIND)
#undef SPMD_TRAIN_FIND
  return nullptr;
}

}  // namespace spmd_train
