// tests/backends/process_copy.cpp — process::copy_progressing, the gather step's copy of a
// rank's own pieces: in slices along the outermost dim with the transport's progress()
// between them (MPI), the same elements as one copy; one copy for a transport without
// progress() or a small piece.
#include <catch2/catch.hpp>

#include <vector>

#include "spmd/backends/process/execute.hpp"
#include "spmd/host/kernels.hpp"

namespace {

using spmd::index_t;
using spmd::run_geom;

struct counting_transport {
  int copies = 0;
  int progressed = 0;
  template <class T>
  void copy(T* out, const T* in, const run_geom& g) {
    ++copies;
    spmd::host::detail::copy_region(out, in, g);
  }
  void progress() { ++progressed; }
};
struct plain_transport {  // no progress(): one copy
  int copies = 0;
  template <class T>
  void copy(T* out, const T* in, const run_geom& g) {
    ++copies;
    spmd::host::detail::copy_region(out, in, g);
  }
};

/// Rows 0 .. outer - 1 of a [outer x 5 x 300] source, columns 40 .. 239, into a
/// [outer x 5 x 200] destination: runs of 200 floats at strided outer dims, offsets off zero.
run_geom piece(index_t outer) {
  run_geom g;
  g.nd = 2;
  g.run = 200;
  g.ext[0] = outer;
  g.ext[1] = 5;
  g.sstr[0] = 5 * 300;
  g.sstr[1] = 300;
  g.dstr[0] = 5 * 200;
  g.dstr[1] = 200;
  g.soff = 40;
  g.doff = 0;
  return g;
}

/// The destination after copy_progressing moved piece(outer) through `tr`.
template <class Tr>
std::vector<float> copied(Tr& tr, index_t outer) {
  const run_geom g = piece(outer);
  std::vector<float> in(static_cast<std::size_t>(outer * 5 * 300));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  std::vector<float> out(static_cast<std::size_t>(outer * 5 * 200), -1.0f);
  spmd::process::copy_progressing(tr, out.data(), in.data(), g);
  return out;
}

/// Element k of the destination: what the piece puts there.
float expected(index_t k) {
  const index_t r = k / 1000, j = (k / 200) % 5, c = k % 200;
  return static_cast<float>(r * 1500 + j * 300 + 40 + c);
}

/// Destination elements that differ from expected().
index_t mismatches(const std::vector<float>& out) {
  index_t bad = 0;
  for (index_t k = 0; k < static_cast<index_t>(out.size()); ++k)
    bad += out[static_cast<std::size_t>(k)] == expected(k) ? 0 : 1;
  return bad;
}

}  // namespace

TEST_CASE("copy_progressing: slices with progress between, the same elements", "[process]") {
  // 37 x 5 x 200 floats = 148,000 bytes: slices of 16 outer rows (64,000 bytes), then 5
  const index_t outer = 37;
  counting_transport tr;
  const std::vector<float> out = copied(tr, outer);
  CHECK(tr.copies == 3);
  CHECK(tr.progressed == 3);
  CHECK(mismatches(out) == 0);
}

TEST_CASE("copy_progressing: one copy for a small piece or a transport without progress", "[process]") {
  counting_transport small;
  const std::vector<float> a = copied(small, 4);  // 16,000 bytes
  CHECK(small.copies == 1);
  CHECK(small.progressed == 0);
  CHECK(mismatches(a) == 0);
  plain_transport plain;
  const std::vector<float> b = copied(plain, 37);
  CHECK(plain.copies == 1);
  CHECK(mismatches(b) == 0);
}
