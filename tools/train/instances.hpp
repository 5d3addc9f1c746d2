// tools/train/instances.hpp — one training function per (model, mesh, backend), each compiled
// in its own translation unit (instance.cpp, built once per triple by meson) so that the
// builds run in parallel. The list comes from the build (train_built.hpp, written by meson
// from the options train_meshes and train_gpu):
//   SPMD_TRAIN_BUILT(X)       X(model, D, T, backend) for every instance
// (MPI's meshes may be fewer: train_mpi_meshes).
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

/// The backends built and the meshes built for one of them ("1, 3, 2x4": a 1-d mesh as N),
/// in the build's order, for messages.
inline std::string backends_built() {
  std::string out;
  auto add = [&](const char* b) {
    if ((", " + out + ", ").find(std::string(", ") + b + ", ") == std::string::npos) out += (out.empty() ? "" : ", ") + std::string(b);
  };
#define SPMD_TRAIN_ADD(model, D, T, backend) add(#backend);
  SPMD_TRAIN_BUILT(SPMD_TRAIN_ADD)
#undef SPMD_TRAIN_ADD
  return out;
}
inline std::string meshes_built(const std::string& b) {
  std::string out;
  auto add = [&](const char* backend, int d, int t) {
    if (b != backend) return;
    const std::string m = t == 1 ? std::to_string(d) : std::to_string(d) + "x" + std::to_string(t);
    if ((", " + out + ", ").find(", " + m + ", ") == std::string::npos) out += (out.empty() ? "" : ", ") + m;
  };
#define SPMD_TRAIN_ADD(model, D, T, backend) add(#backend, D, T);
  SPMD_TRAIN_BUILT(SPMD_TRAIN_ADD)
#undef SPMD_TRAIN_ADD
  return out;
}
inline bool backend_built(const std::string& b) { return !meshes_built(b).empty(); }

/// The training function of `model` on mesh D×T and `backend`, or nullptr when not built.
inline train_fn find_instance(const std::string& m, const std::string& b, int d, int t) {
#define SPMD_TRAIN_FIND(model, D, T, backend) \
  if (m == #model && b == #backend && d == D && t == T) return &train_##model##_##D##x##T##_##backend;
  SPMD_TRAIN_BUILT(SPMD_TRAIN_FIND)
#undef SPMD_TRAIN_FIND
  return nullptr;
}

}  // namespace spmd_train
