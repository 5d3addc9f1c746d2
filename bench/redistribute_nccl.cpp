// bench/redistribute_nccl — the NCCL backend's redistribute against raw NCCL on the same bytes.
//
//   build/bench/redistribute_nccl [--quick]                 world 1: one GPU, no MPI
//   mpirun -np N build/bench/redistribute_nccl --mpi        one GPU per process
//
// World N >= 2: the four transitions on a 1-d mesh of N ranks, f32, global tensors of size/256
// rows of 64 columns (size = the global tensor's bytes, nccl-tests' size), 4 KiB to 1 GiB:
//   S(0) -> R      vs ncclAllGather        busbw = algbw (N-1)/N
//   S(0) -> S(1)   vs grouped ncclSend/ncclRecv of the same blocks (alltoall)   (N-1)/N
//   P -> R         vs ncclAllReduce        busbw = algbw 2(N-1)/N
//   P -> S(0)      vs ncclReduceScatter    busbw = algbw (N-1)/N
// World 1 (NCCL refuses two ranks on one GPU): a one-rank mesh moves nothing, so what spmd adds
// is measured on the transport itself, the path a step of an N-rank mesh takes for rank 0's
// piece of a tensor split 8 ways, sent (to itself) through the NCCL transport:
//   contiguous   an S(0) piece: grouped ncclSend/ncclRecv straight from and into the locals
//   strided      an S(1) piece: pack kernel -> grouped ncclSend/ncclRecv -> unpack kernel
// each against a raw ncclAllGather of the same bytes on the one-rank communicator.
// Time: CUDA events around a loop after two warm-ups; the median of 5 rounds (~20 ms each).
// Last line: RESULT nccl_vs_raw=<worst spmd time / raw NCCL time at >= 1 MiB>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/backends/nccl/environment.hpp"
#include "spmd/backends/nccl/nccl.hpp"
#include "cuda_timing.hpp"

namespace {

using spmd::index_t;
namespace cu = spmd::cuda;
namespace nc = spmd::nccl;

constexpr index_t cols = 64;

/// The benchmarks' timer (cuda_timing.hpp) with the loop count agreed over MPI: every rank
/// must take the same decision.
struct event_timer {
  bench::event_timer t;
  template <class F>
  double us(F&& f) {
    return t.us(f, [](bool grow) {
      int g = grow;
      if (nc::size() > 1) MPI_Allreduce(MPI_IN_PLACE, &g, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      return g != 0;
    });
  }
};

double worst = 0;
void print(const char* name, index_t bytes, const char* redop, double us, double raw, double factor) {
  const double algbw = static_cast<double>(bytes) / (us * 1e3);
  if (nc::rank() == 0)
    std::printf("%14s %12lld %12lld float %5s %10.2f %8.2f %8.2f %10.2f %7.3f\n", name, static_cast<long long>(bytes),
                static_cast<long long>(bytes / 4), redop, us, algbw, algbw * factor, raw, us / raw);
  if (bytes >= (index_t{1} << 20)) worst = std::max(worst, us / raw);
}

/// World 1: rank 0's piece of an 8-way split through the transport vs ncclAllGather.
void world_one(index_t max_bytes) {
  ncclComm_t c = nc::communicator();
  event_timer t;
  for (index_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const index_t rows = bytes / 4 / cols, elems = rows * cols;
    cu::device_buffer<float> local(elems), out(elems), stage(elems);
    cu::check(cudaMemsetAsync(local.data(), 1, static_cast<std::size_t>(elems) * 4, cu::current_stream()), "cudaMemset");
    // contiguous: the S(0) piece (rows/8 full rows)
    const index_t piece = elems / 8;
    spmd::run_geom contiguous = spmd::whole_geom(piece);
    // strided: the S(1) piece (every row's cols/8 columns)
    spmd::run_geom strided{};
    strided.nd = 1;
    strided.run = cols / 8;
    strided.ext[0] = rows;
    strided.sstr[0] = cols;
    strided.dstr[0] = cols;
    const double raw = t.us([&] {
      nc::detail::check(ncclAllGather(local.data(), out.data(), static_cast<std::size_t>(piece), ncclFloat32, c,
                                      cu::current_stream()),
                        "ncclAllGather", c);
    });
    nc::detail::transport tr(c, spmd::mesh_shape_vec{{1}, 1}, {0});
    const double us_c = t.us([&] {
      tr.send(local.data() + contiguous.soff, piece, 0, c);
      tr.recv(out.data(), piece, 0, c);
      tr.wait();
    });
    print("contiguous", piece * 4, "none", us_c, raw, 1.0);
    const double us_s = t.us([&] {
      tr.copy(stage.data(), static_cast<const float*>(local.data()), spmd::process::packed(strided, false));
      tr.send(stage.data(), piece, 0, c);
      tr.recv(stage.data() + piece, piece, 0, c);
      tr.wait();
      tr.copy(out.data(), static_cast<const float*>(stage.data() + piece), spmd::process::packed(strided, true));
    });
    print("strided", piece * 4, "none", us_s, raw, 1.0);
  }
}

/// World N: the four transitions through nc::execute vs the raw collectives.
void world_n(index_t max_bytes) {
  const index_t n = nc::size();
  ncclComm_t c = nc::communicator();
  event_timer t;
  const spmd::mesh_shape_vec mesh{{n}, 1};
  auto one = [](spmd::placement p) {
    spmd::placement_vec v{};
    v.push_back(p);
    return v;
  };
  struct tc {
    const char* name;
    spmd::placement from, to;
    const char* redop;
    double factor;
  };
  const double f = static_cast<double>(n - 1) / static_cast<double>(n);
  const tc cases[] = {{"S(0)->R", spmd::make_shard(0), spmd::make_replicate(), "none", f},
                      {"S(0)->S(1)", spmd::make_shard(0), spmd::make_shard(1), "none", f},
                      {"P->R", spmd::make_partial(spmd::reduce_op::sum), spmd::make_replicate(), "sum", 2 * f},
                      {"P->S(0)", spmd::make_partial(spmd::reduce_op::sum), spmd::make_shard(0), "sum", f}};
  for (index_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const index_t rows = bytes / 4 / cols;
    const spmd::shape_vec global{{rows, cols}, 2};
    for (const tc& k : cases) {
      const auto fs = spmd::make_spec(mesh, one(k.from), 2), ts = spmd::make_spec(mesh, one(k.to), 2);
      const auto p = spmd::make_plan(fs.spec, ts.spec, double(bytes));
      spmd::host::local_set<float> h(n, {nc::rank(), nc::rank() + 1});
      h.assign(nc::rank(), spmd::box_at(fs.spec, global, spmd::unravel(mesh, nc::rank())).shape);
      for (index_t i = 0; i < h.size(nc::rank()); ++i) h.data(nc::rank())[i] = static_cast<float>(i % 13);
      const cu::device_set<float> in = cu::upload(h);
      const double us = t.us([&] { (void)nc::execute(p.value, global, in); });
      const index_t total = rows * cols, blk = total / n;
      cu::device_buffer<float> a(total), b(total);
      const double raw = t.us([&] {
        const cudaStream_t s = cu::current_stream();
        if (std::strcmp(k.name, "S(0)->R") == 0)
          nc::detail::check(ncclAllGather(a.data(), b.data(), static_cast<std::size_t>(blk), ncclFloat32, c, s), "ncclAllGather", c);
        else if (std::strcmp(k.name, "P->R") == 0)
          nc::detail::check(ncclAllReduce(a.data(), b.data(), static_cast<std::size_t>(total), ncclFloat32, ncclSum, c, s), "ncclAllReduce", c);
        else if (std::strcmp(k.name, "P->S(0)") == 0)
          nc::detail::check(ncclReduceScatter(a.data(), b.data(), static_cast<std::size_t>(blk), ncclFloat32, ncclSum, c, s), "ncclReduceScatter", c);
        else {
          const index_t m = blk / n;
          nc::detail::check(ncclGroupStart(), "ncclGroupStart", c);
          for (index_t j = 0; j < n; ++j) {
            nc::detail::check(ncclSend(a.data() + j * m, static_cast<std::size_t>(m), ncclFloat32, static_cast<int>(j), c, s), "ncclSend", c);
            nc::detail::check(ncclRecv(b.data() + j * m, static_cast<std::size_t>(m), ncclFloat32, static_cast<int>(j), c, s), "ncclRecv", c);
          }
          nc::detail::check(ncclGroupEnd(), "ncclGroupEnd", c);
        }
      });
      print(k.name, bytes, k.redop, us, raw, k.factor);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool mpi = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mpi") mpi = true;
    else if (a == "--quick") quick = true;
    else {
      std::fprintf(stderr, "usage: redistribute_nccl [--mpi] [--quick]\n");
      return 2;
    }
  }
  if (!cu::available()) {
    std::printf("SKIP redistribute_nccl: no CUDA device\n");
    return 77;
  }
  const index_t max_bytes = quick ? index_t{64} << 20 : index_t{1} << 30;
  auto header = [] {
    if (nc::rank() == 0)
      std::printf("# world %d\n# %12s %12s %12s  type redop   time(us)    algbw    busbw    raw(us) spmd/raw\n",
                  nc::size(), "case", "size", "count");
  };
  if (mpi) {
    nc::environment env(argc, argv);
    header();
    if (nc::size() == 1) world_one(max_bytes);
    else world_n(max_bytes);
    if (nc::rank() == 0) std::printf("RESULT nccl_vs_raw=%.3f\n", worst);
    return 0;
  }
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  nc::detail::check(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
  nc::detail::check(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank", nullptr);
  {
    nc::communicator_scope scope(comm);
    header();
    world_one(max_bytes);
  }
  ncclCommDestroy(comm);
  std::printf("RESULT nccl_vs_raw=%.3f\n", worst);
  return 0;
}
