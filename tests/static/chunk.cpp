// tests/static/chunk.cpp — spmd::chunk is torch.chunk, checked at compile time.
#include <spmd/spmd.hpp>

namespace {

using spmd::index_t;

// sizes[r] == chunk(size, n, r).size for every r, and the pieces tile [0, size).
template <std::size_t N>
constexpr bool sizes_are(index_t size, const index_t (&sizes)[N]) {
  const auto n = static_cast<index_t>(N);
  index_t next = 0;  // where the next non-empty piece must start
  for (index_t r = 0; r < n; ++r) {
    const spmd::chunk_piece p = spmd::chunk(size, n, r);
    if (p.size != sizes[r]) return false;
    if (p.size == 0) {
      if (p.start != size) return false;  // empty pieces report start = size
    } else {
      if (p.start != next) return false;
      next += p.size;
    }
  }
  return next == size;
}

// ---------------------------------------------------------------------------
// The values the reference lists (torch.chunk, DTensor's uneven sharding)
// ---------------------------------------------------------------------------
static_assert(sizes_are(5, {2, 2, 1, 0}));
static_assert(sizes_are(6, {2, 2, 2, 0}));  // not 2, 2, 1, 1
static_assert(sizes_are(3, {1, 1, 1, 0}));
static_assert(sizes_are(10, {4, 4, 2}));
static_assert(sizes_are(8, {2, 2, 2, 2}));
static_assert(sizes_are(7, {7}));
static_assert(sizes_are(1, {1, 0, 0, 0, 0}));
static_assert(sizes_are(9, {3, 3, 3}));
static_assert(sizes_are(7, {2, 2, 2, 1}));
static_assert(sizes_are(13, {4, 4, 4, 1}));

// Size 0: every piece is empty, at start 0 (= the size).
static_assert(sizes_are(0, {0}));
static_assert(sizes_are(0, {0, 0, 0}));
static_assert(spmd::chunk(0, 4, 3).start == 0);

// Starts are multiples of ceil(size / n).
static_assert(spmd::chunk(10, 3, 1).start == 4);
static_assert(spmd::chunk(10, 3, 2).start == 8);
static_assert(spmd::chunk(5, 4, 2).start == 4);
static_assert(spmd::chunk(5, 4, 3).start == 5);  // past the end: start = size
static_assert(spmd::chunk(6, 4, 3).start == 6);

// ---------------------------------------------------------------------------
// Every size 0..40 over 1..9 ranks: pieces are ceil(size/n) long, then at most one
// shorter piece, then empty ones; together they tile [0, size) in rank order.
// ---------------------------------------------------------------------------
constexpr bool all_small_splits() {
  for (index_t size = 0; size <= 40; ++size)
    for (index_t n = 1; n <= 9; ++n) {
      const index_t full = (size + n - 1) / n;
      index_t next = 0;
      int shorter = 0;
      for (index_t r = 0; r < n; ++r) {
        const spmd::chunk_piece p = spmd::chunk(size, n, r);
        if (p.size < 0 || p.size > full) return false;
        if (p.size > 0 && p.size < full) ++shorter;
        if (p.size > 0 && p.start != next) return false;
        if (p.size == 0 && p.start != size) return false;
        if (p.size > 0 && next != full * r) return false;
        next += p.size;
      }
      if (next != size || shorter > 1) return false;
      if (n == 1 && spmd::chunk(size, 1, 0).size != size) return false;
    }
  return true;
}
static_assert(all_small_splits());

}  // namespace

int main() { return 0; }
