// tools/train/instances.hpp — one training function per (model, backend), each compiled in
// its own translation unit (instance.cpp, built once per pair by meson) so that the builds
// run in parallel; the mesh is a run-time value (its sizes bound when training starts). The
// list comes from the build (train_built.hpp, written by meson from the backends built):
//   SPMD_TRAIN_BUILT(X)       X(model, backend) for every instance
#pragma once

#include <string>

#include "inputs.hpp"
#include "options.hpp"
#include "result.hpp"
#include "train_built.hpp"

namespace spmd_train {

using train_fn = train_result (*)(const train_options&, const inputs&, const model_spec&);

#define SPMD_TRAIN_DECLARE(model, backend) \
  train_result train_##model##_##backend(const train_options&, const inputs&, const model_spec&);
SPMD_TRAIN_BUILT(SPMD_TRAIN_DECLARE)
#undef SPMD_TRAIN_DECLARE

/// The backends built, in the build's order, for messages ("sim, mpi").
inline std::string backends_built() {
  std::string out;
  auto add = [&](const char* b) {
    if ((", " + out + ", ").find(std::string(", ") + b + ", ") == std::string::npos) out += (out.empty() ? "" : ", ") + std::string(b);
  };
#define SPMD_TRAIN_ADD(model, backend) add(#backend);
  SPMD_TRAIN_BUILT(SPMD_TRAIN_ADD)
#undef SPMD_TRAIN_ADD
  return out;
}

/// The training function of `model` on `backend`, or nullptr when that backend is not built.
inline train_fn find_instance(const std::string& m, const std::string& b) {
#define SPMD_TRAIN_FIND(model, backend) \
  if (m == #model && b == #backend) return &train_##model##_##backend;
  SPMD_TRAIN_BUILT(SPMD_TRAIN_FIND)
#undef SPMD_TRAIN_FIND
  return nullptr;
}

}  // namespace spmd_train
