// bench/step_variants.cu — the widened step kernel launched two ways (see step_variants.hpp):
// the library's launch (kernels::step_wide: one item per thread), and the same per-thread
// bodies over a grid capped at 16 blocks per SM with a grid-stride loop (the step kernels'
// launch before bench/step_kernels measured both).
#include <cuda_runtime.h>

#include <algorithm>

#include "spmd/backends/cuda/kernels/step.cuh"
#include "step_variants.hpp"

namespace {

using spmd::index_t;
using spmd::cuda::rank_ptrs;
using spmd::cuda::step_view;
using spmd::cuda::wide16;

template <int K>
__global__ void __launch_bounds__(256) capped_kernel(const step_view t, const __grid_constant__ rank_ptrs<wide16> p) {
  if constexpr (K == 1)
    spmd::cuda::wide_thread<float>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
  else
    spmd::cuda::copy_units_thread<K>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

}  // namespace

namespace bench {

int step_variants() { return 2; }
const char* step_variant_name(int v) { return v == 0 ? "one item per thread" : "grid-stride, 16 blocks/SM"; }

void launch_step_variant(int v, const step_view& t, const rank_ptrs<wide16>& p, int sms, cudaStream_t s) {
  if (v == 0) {
    spmd::cuda::kernels::step_wide<float>(t, p, s);
    return;
  }
  const auto blocks = static_cast<unsigned>(std::min<index_t>((t.items + 255) / 256, index_t{sms} * 16));
  switch (t.units) {
    case 4: capped_kernel<4><<<blocks, 256, 0, s>>>(t, p); break;
    case 2: capped_kernel<2><<<blocks, 256, 0, s>>>(t, p); break;
    default: capped_kernel<1><<<blocks, 256, 0, s>>>(t, p); break;
  }
}

}  // namespace bench
