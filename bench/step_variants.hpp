// bench/step_variants.hpp — the widened step kernel three ways (step_variants.cu) for
// bench/step_kernels: the library's, the same body compiled in the benchmark, an earlier
// body, so one run on a GPU compares them on the same tables.
#pragma once

#include <cuda_runtime_api.h>

#include "spmd/backends/cuda/launch.hpp"

namespace bench {
/// How many variants there are, and variant v's name.
int step_variants();
const char* step_variant_name(int v);
/// Launches variant v of the widened f32 step kernel over `t` (grid: what the variant picks).
void launch_step_variant(int v, const spmd::cuda::step_view& t, const spmd::cuda::rank_ptrs<spmd::cuda::wide16>& p,
                         int sms, cudaStream_t s);
}  // namespace bench
