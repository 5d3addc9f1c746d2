// bench/launch_floor.cu — the kernels that measure the launch floor for redistribute_cuda: an
// empty kernel, and an empty kernel taking the step kernel's parameters (a step table view
// and every rank's pointers, 2 KiB), and empty kernels taking 6 and 16 KiB, so the benchmark can say how much of a small
// redistribute is the launch itself.
#include <cuda_runtime.h>

#include "launch_floor.hpp"

namespace {
__global__ void empty_kernel() {}
__global__ void empty_with_step_params(spmd::cuda::step_view, spmd::cuda::rank_ptrs<spmd::cuda::wide16>) {}
template <int Bytes>
__global__ void empty_with_bytes(bench::param_bytes<Bytes>) {}
}  // namespace

namespace bench {
void launch_empty(cudaStream_t s) { empty_kernel<<<1, 32, 0, s>>>(); }
void launch_empty_step_params(const spmd::cuda::step_view& v, const spmd::cuda::rank_ptrs<spmd::cuda::wide16>& p,
                              cudaStream_t s) {
  empty_with_step_params<<<1, 32, 0, s>>>(v, p);
}
template <int Bytes>
void launch_empty_bytes(const param_bytes<Bytes>& p, cudaStream_t s) {
  empty_with_bytes<Bytes><<<1, 32, 0, s>>>(p);
}
template void launch_empty_bytes<6144>(const param_bytes<6144>&, cudaStream_t);
template void launch_empty_bytes<16384>(const param_bytes<16384>&, cudaStream_t);
}  // namespace bench
