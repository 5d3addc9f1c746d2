// tests/nccl/backend.cpp — the NCCL backend's promises beyond the typed suite, in world 1 (a
// one-rank communicator, no MPI): NCCL's own calls through the transport (a grouped send to
// and receive from itself, the native all-reduce), errors that name the call, the rank and
// NCCL's words, the mesh/communicator checks, and redistribute_async. Without a GPU it says
// so and exits 77.
#include <nccl.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/nccl/nccl.hpp"

namespace {
int checks = 0, failed = 0;
void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failed;
    std::printf("FAILED: %s\n", what.c_str());
  }
}
template <class E, class F>
void expect_throw(F&& f, const std::vector<std::string>& words, const std::string& what) {
  try {
    f();
    expect(false, what + ": no exception");
  } catch (const E& e) {
    bool all = true;
    for (const std::string& w : words) all = all && std::string(e.what()).find(w) != std::string::npos;
    expect(all, what + ": message was: " + e.what());
  }
}
template <class T>
std::vector<T> down(const T* p, std::size_t n) {
  std::vector<T> h(n);
  spmd::cuda::check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return h;
}
}  // namespace

int main() {
  using namespace spmd;
  if (!cuda::available()) {
    std::printf("SKIP nccl backend: no CUDA device on this machine\n");
    return 77;
  }
  // No communicator yet: a sentence.
  expect_throw<std::logic_error>([] { (void)nccl::backend::held<mesh<1>>(); },
                                 {"no NCCL communicator", "communicator_scope"}, "no communicator");
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  nccl::detail::check(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
  nccl::detail::check(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank", nullptr);
  {
    nccl::communicator_scope scope(comm);
    expect(nccl::rank() == 0 && nccl::size() == 1, "rank 0 of 1");

    // The transport's messages: a grouped ncclSend/ncclRecv to itself.
    cuda::device_buffer<float> a(1000), b(1000);
    std::vector<float> h(1000);
    for (int i = 0; i < 1000; ++i) h[static_cast<std::size_t>(i)] = static_cast<float>(i) * 0.5f - 7;
    cuda::check(cudaMemcpy(a.data(), h.data(), 4000, cudaMemcpyHostToDevice), "cudaMemcpy");
    {
      nccl::detail::transport tr(comm, mesh_shape_vec{{1}, 1}, {0});
      tr.send(a.data(), 1000, 0, comm);
      tr.recv(b.data(), 1000, 0, comm);
      tr.wait();
      expect(down(b.data(), 1000) == h, "grouped ncclSend/ncclRecv to itself");
      // Native all-reduce for integers; floating sums stay in group order (false).
      cuda::device_buffer<std::int32_t> x(3);
      const std::vector<std::int32_t> xi = {2147483647, -5, 9};
      cuda::check(cudaMemcpy(x.data(), xi.data(), 12, cudaMemcpyHostToDevice), "cudaMemcpy");
      expect(tr.all_reduce(reduce_op::sum, x.data(), x.data(), 3, comm), "integer sum through ncclAllReduce");
      expect(down(x.data(), 3) == xi, "ncclAllReduce over one rank keeps the values");
      expect(!tr.all_reduce(reduce_op::sum, a.data(), b.data(), 1000, comm), "float sum: group order");
      expect(!tr.all_reduce(reduce_op::max, a.data(), b.data(), 1000, comm), "float max: group order");
      nccl::set_float_reductions(nccl::float_reductions::nccl);
      expect(tr.all_reduce(reduce_op::avg, a.data(), b.data(), 1000, comm), "float avg: NCCL's order when chosen");
      expect(down(b.data(), 1000) == h, "avg over one rank is the value");
      nccl::set_float_reductions(nccl::float_reductions::group);
      // An error names the call, the rank and NCCL's words.
      expect_throw<nccl::error>(
          [&] {
            tr.send(a.data(), 10, 3, comm);  // no rank 3
            tr.wait();
          },
          {"spmd::nccl:", "rank 0 of 1", "invalid"}, "send to a rank that does not exist");
    }
    // A mesh larger than the communicator, or smaller: std::invalid_argument with the sizes.
    expect_throw<std::invalid_argument>([] { (void)nccl::backend::held<mesh<2>>(); },
                                        {"names rank 1", "has 1 ranks", "mpirun -np 2"}, "mesh of 2 on 1 rank");

    // DTensor on it, and redistribute_async overlapping a compute kernel.
    using L = layout<mesh<1, 1>, placements<shard<0>, replicate>, extents<64, 32>>;
    std::vector<float> g(64 * 32);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 97) - 40.f;
    auto x = nccl::distribute_tensor<L>(g);
    using Pend = placements<partial<reduce_op::sum>, shard<1>>;
    auto want = nccl::redistribute<Pend>(x);
    auto pending = nccl::redistribute_async<Pend>(x);
    auto z = nccl::relu(x);  // compute stream, meanwhile
    auto y = pending.wait();
    expect(y.full_tensor() == want.full_tensor(), "redistribute_async equals redistribute");
    expect(z.full_tensor().size() == g.size(), "compute beside it");
    expect(y.to_local().data == down(y.local().data(), static_cast<std::size_t>(y.local().size())),
           "to_local reads the GPU's local");
  }
  nccl::detail::check(ncclCommDestroy(comm), "ncclCommDestroy", nullptr);
  std::printf("nccl backend: %d checks, %d failed\n", checks, failed);
  return failed == 0 ? 0 : 1;
}
