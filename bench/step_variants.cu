// bench/step_variants.cu — the widened step kernel with other tuning choices (see
// step_variants.hpp): items in flight per thread (U), a reduction's loads batched (B), the
// rank pointers as a __grid_constant__ parameter or a plain one, and the grid (capped at 16
// blocks per SM with a grid-stride loop, or one item per thread).
#include <cuda_runtime.h>

#include <algorithm>

#include "spmd/backends/cuda/step_body.hpp"
#include "step_variants.hpp"

namespace {

using spmd::index_t;
using spmd::cuda::rank_ptrs;
using spmd::cuda::step_view;
using spmd::cuda::wide16;

template <int U, int B>
__global__ void __launch_bounds__(256) plain_kernel(step_view t, rank_ptrs<wide16> p) {
  spmd::cuda::wide_thread<float, U, B>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}
template <int U, int B>
__global__ void __launch_bounds__(256) constant_kernel(const step_view t, const __grid_constant__ rank_ptrs<wide16> p) {
  spmd::cuda::wide_thread<float, U, B>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

struct variant {
  const char* name;
  void (*kernel)(step_view, rank_ptrs<wide16>);
  void (*constant)(const step_view, const rank_ptrs<wide16>);
  bool capped;  // at 16 blocks per SM (grid-stride), or one item per thread
};

const variant variants[] = {
    {"plain U1 B1 capped", plain_kernel<1, 1>, nullptr, true},
    {"plain U1 B8 capped", plain_kernel<1, 8>, nullptr, true},
    {"plain U2 B8 capped", plain_kernel<2, 8>, nullptr, true},
    {"plain U4 B8 capped", plain_kernel<4, 8>, nullptr, true},
    {"plain U1 B8 1/thread", plain_kernel<1, 8>, nullptr, false},
    {"plain U1 B1 1/thread", plain_kernel<1, 1>, nullptr, false},
    {"const U1 B1 capped", nullptr, constant_kernel<1, 1>, true},
    {"const U1 B8 capped", nullptr, constant_kernel<1, 8>, true},
    {"const U4 B8 capped", nullptr, constant_kernel<4, 8>, true},
    {"const U1 B8 1/thread", nullptr, constant_kernel<1, 8>, false},
};

}  // namespace

namespace bench {

int step_variants() { return static_cast<int>(sizeof(variants) / sizeof(variants[0])); }
const char* step_variant_name(int v) { return variants[v].name; }

void launch_step_variant(int v, const step_view& t, const rank_ptrs<wide16>& p, int sms, cudaStream_t s) {
  const variant& x = variants[v];
  const index_t need = (t.items + 255) / 256;
  const auto blocks = static_cast<unsigned>(x.capped ? std::min<index_t>(need, index_t{sms} * 16) : need);
  if (x.kernel != nullptr) x.kernel<<<blocks, 256, 0, s>>>(t, p);
  else x.constant<<<blocks, 256, 0, s>>>(t, p);
}

}  // namespace bench
