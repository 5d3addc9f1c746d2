// Layout arithmetic inside a CUDA kernel: the constexpr core compiled for the device.
//
// Built whenever nvcc is found (so the device compile is checked on every machine);
// run against the host results when a GPU is present, skipped (exit 77) otherwise.
#include <cuda_runtime.h>

#include <cstdio>

#include "spmd/spmd.hpp"

namespace {

using spmd::index_t;
// Names spelled as axis types: nvcc 13 cannot take string literals as template arguments.
using Mesh = spmd::mesh<2, 4>::named_axes<spmd::axis<'d', 'p'>, spmd::axis<'t', 'p'>>;
using Ragged = spmd::layout<Mesh, spmd::placements<spmd::shard<0>, spmd::shard<0>>,
                            spmd::extents<spmd::dyn, 5>>;
using Ordered = spmd::layout<spmd::mesh<2, 2, 2>::with_ranks<8, 9, 10, 11, 12, 13, 14, 15>,
                             spmd::placements<spmd::shard<1, 1>, spmd::shard<1, 2>, spmd::shard<1, 0>>,
                             spmd::extents<3, 7>>;

constexpr int kFields = 5;  // shape[0], shape[1], offset[0], offset[1], coord along "tp"

template <class L>
__device__ void write_block(const L& layout, index_t rank, index_t* out) {
  const auto b = layout.block_of(rank);
  out[0] = b.shape[0];
  out[1] = b.shape[1];
  out[2] = b.offset[0];
  out[3] = b.offset[1];
}

__global__ void blocks(Ragged ragged, index_t* out_ragged, index_t* out_ordered) {
  const int i = threadIdx.x;
  write_block(ragged, i, out_ragged + kFields * i);
  out_ragged[kFields * i + 4] = Mesh::coord_of(i).value[Mesh::dim<spmd::axis<'t', 'p'>>()];
  write_block(Ordered{}, Ordered::mesh_type::rank_at(i), out_ordered + kFields * i);
  // A static answer is available in device code too.
  static_assert(Ordered{}.local_shape(8) == spmd::dims<2>{3, 1});
}

template <class L>
int compare(const char* what, const L& layout, const index_t* got, bool with_coord) {
  int bad = 0;
  for (index_t i = 0; i < L::mesh_type::size; ++i) {
    const index_t rank = L::mesh_type::rank_at(i);
    const auto b = layout.block_of(rank);
    const index_t want[kFields] = {b.shape[0], b.shape[1], b.offset[0], b.offset[1],
                                   with_coord ? L::mesh_type::coord_of(rank).value[1] : 0};
    for (int f = 0; f < (with_coord ? kFields : 4); ++f)
      if (got[kFields * i + f] != want[f]) {
        std::printf("FAIL %s rank %lld field %d: device %lld, host %lld\n", what,
                    static_cast<long long>(rank), f, static_cast<long long>(got[kFields * i + f]),
                    static_cast<long long>(want[f]));
        ++bad;
      }
  }
  return bad;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device on this machine; the kernel compiled, it was not run\n");
    return 77;
  }
  constexpr int n = 8;
  index_t *d_ragged = nullptr, *d_ordered = nullptr;
  if (cudaMalloc(&d_ragged, sizeof(index_t) * kFields * n) != cudaSuccess ||
      cudaMalloc(&d_ordered, sizeof(index_t) * kFields * n) != cudaSuccess) {
    std::printf("FAIL: cudaMalloc\n");
    return 1;
  }
  const Ragged ragged{spmd::extents<spmd::dyn, 5>{10}};
  blocks<<<1, n>>>(ragged, d_ragged, d_ordered);
  index_t h_ragged[kFields * n], h_ordered[kFields * n];
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("FAIL: kernel: %s\n", cudaGetErrorString(err));
    return 1;
  }
  cudaMemcpy(h_ragged, d_ragged, sizeof h_ragged, cudaMemcpyDeviceToHost);
  cudaMemcpy(h_ordered, d_ordered, sizeof h_ordered, cudaMemcpyDeviceToHost);
  cudaFree(d_ragged);
  cudaFree(d_ordered);
  const int bad = compare("ragged", ragged, h_ragged, true) + compare("ordered", Ordered{}, h_ordered, false);
  std::printf("%s: device layouts %s the host's\n", bad ? "FAIL" : "PASS", bad ? "differ from" : "match");
  return bad ? 1 : 0;
}
