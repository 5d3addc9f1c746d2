// spmd/backends/cuda/cuda.hpp — the CUDA backend: every rank's local on one GPU. The host
// code builds with the host compiler; link the spmd_cuda library (nvcc-compiled kernels) and
// cudart. Without a GPU, the first call that needs one throws spmd::cuda::no_device.
//
//   device.hpp      the current device and stream, stream_scope, synchronize
//   device_set.hpp  every rank's local in device memory; device_view
//   api.hpp         spmd::cuda::dtensor, distribute_tensor, from_local, factories
//   backend.hpp     spmd::cuda::backend: what the runtime needs from the GPU
//   execute.hpp     a plan's steps, one launch each
//   collectives.hpp all_reduce, broadcast, all_gather, reduce_scatter, all_to_all on locals
//   step_table.hpp  a step as a table of box operations; step_body.hpp: one thread's work
//   ops/            the operators' device kernels (device_op), op_bodies.hpp per thread
//   launch.hpp      the kernels' declarations; kernels/*.cuh their definitions (nvcc)
#pragma once

#include "spmd/backends/cuda/api.hpp"
#include "spmd/backends/cuda/backend.hpp"
#include "spmd/backends/cuda/collectives.hpp"
#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/execute.hpp"
#include "spmd/backends/cuda/ops/elementwise.hpp"
#include "spmd/backends/cuda/ops/matmul.hpp"
#include "spmd/backends/cuda/ops/nn.hpp"
#include "spmd/backends/cuda/ops/reduction.hpp"
#include "spmd/backends/cuda/ops/views.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/dtensor.hpp"
