// spmd/host/random.hpp — random operators on host locals: each rank computes the
// elements of its own block, by their global index (spmd/random/draw.hpp), never the rest.
//
//   random_locals<T>(spec, global, d, held)    every held rank's local of a uniform, normal
//                                              or bernoulli draw, with the factories' rule on
//                                              Partial placements
//   fill_draw<T>(d, box, global, out)          one block, into `out` (contiguous)
//   dropout_block<T>(d, box, global, in, out)  dropout of one block
//   fill_run<T>(d, g, n, out)                  elements g .. g + n of the global tensor
//
// A box is walked as runs along its last dim (contiguous in the local and in the global
// tensor); a run computes each Philox block once for all the elements it gives, sixteen
// blocks per AVX-512 register or eight per AVX2 register where the CPU has them
// (host/random_isa.hpp), else sixteen in lock step in scalar code that the compiler
// vectorises as far as the baseline ISA allows.
#pragma once

#include <algorithm>
#include <cstdint>

#include "spmd/core/box_runs.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/host/distribute.hpp"
#include "spmd/host/thread_pool.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/random_isa.hpp"
#include "spmd/random/draw.hpp"

namespace spmd::host {

namespace detail {

/// The `per` values of one whole block: draw_in_block's, with a normal pair computed once
/// for both its lanes.
template <class T, random::distribution Dist>
inline void block_values(const random::draw& d, const random::philox_block& w, T* SPMD_RESTRICT out) {
  constexpr int per = 4 / random::words_per_element(Dist, sizeof(T));
  if constexpr (Dist == random::distribution::normal) {
    using C = random::detail::compute_t<T>;
    for (int p = 0; p < per; p += 2) {
      random::detail::cos_sin<C> z;
      if constexpr (std::is_same_v<C, double>)
        z = random::detail::box_muller<C>(random::detail::low_bits53(w[0], w[1]),
                                          random::detail::low_bits53(w[2], w[3]));
      else
        z = random::detail::box_muller<C>(random::detail::low_bits(w[p], 24),
                                          random::detail::low_bits(w[p + 1], 24));
      out[p] = random::detail::normal_value<T>(d, z.c);
      out[p + 1] = random::detail::normal_value<T>(d, z.s);
    }
  } else {
    for (int l = 0; l < per; ++l) out[l] = random::draw_in_block<T>(d, w, l);
  }
}

/// Draws the AVX2 path computes: uniform and normal of f32, bf16, f16.
template <class T, random::distribution Dist>
inline constexpr bool avx2_draws = !std::is_same_v<T, double> &&
                                   (Dist == random::distribution::uniform || Dist == random::distribution::normal);

/// Elements [g, g + n) of one distribution: block by block, every value of a block from one
/// Philox call (a normal pair from one Box-Muller).
template <class T, random::distribution Dist>
void fill_run_as(const random::draw& d, std::uint64_t g, index_t n, T* SPMD_RESTRICT out) {
  constexpr int per = 4 / random::words_per_element(Dist, sizeof(T));
  random::draw dd = d;
  dd.dist = Dist;  // a constant for draw_in_block's branches
  index_t k = 0;
  // Batches of whole blocks: the Philox rounds vectorised across `batch` blocks.
  constexpr int batch = 16;
  if (n >= per * (batch + 1)) {
    while ((g + static_cast<std::uint64_t>(k)) % per != 0) {  // up to the first block edge
      const std::uint64_t i = g + static_cast<std::uint64_t>(k);
      out[k] = random::draw_in_block<T>(dd, random::philox_stream_block(dd.seed, dd.offset / 4 + i / per),
                                        static_cast<int>(i % per));
      ++k;
    }
#if SPMD_HOST_AVX2
    if constexpr (avx2_draws<T, Dist>) {
      const random_isa isa = draw_isa();
      if (isa == random_isa::avx512) {  // sixteen blocks per register (host/random_avx512.hpp)
        const index_t blocks = (n - k) / per / 16 * 16;
        avx512::fill_blocks<T, Dist>(dd, dd.offset / 4 + (g + static_cast<std::uint64_t>(k)) / per, blocks, out + k);
        k += blocks * per;
      }
      if (isa >= random_isa::avx2) {  // eight blocks per register (host/random_avx2.hpp)
        const index_t blocks = (n - k) / per / 8 * 8;
        avx2::fill_blocks<T, Dist>(dd, dd.offset / 4 + (g + static_cast<std::uint64_t>(k)) / per, blocks, out + k);
        k += blocks * per;
      }
    }
#endif
    std::uint32_t w[4][batch];
    while (n - k >= per * batch) {
      const std::uint64_t b0 = dd.offset / 4 + (g + static_cast<std::uint64_t>(k)) / per;
      random::philox_stream_blocks<batch>(dd.seed, b0, w);
      for (int b = 0; b < batch; ++b)
        block_values<T, Dist>(dd, random::philox_block{{w[0][b], w[1][b], w[2][b], w[3][b]}}, out + k + b * per);
      k += per * batch;
    }
  }
  while (k < n) {
    const std::uint64_t i = g + static_cast<std::uint64_t>(k);
    int lane = static_cast<int>(i % per);
    const random::philox_block w = random::philox_stream_block(dd.seed, dd.offset / 4 + i / per);
    if (lane == 0 && n - k >= per) {  // a whole block
      block_values<T, Dist>(dd, w, out + k);
      k += per;
      continue;
    }
    for (; lane < per && k < n; ++lane, ++k) out[k] = random::draw_in_block<T>(dd, w, lane);
  }
}

}  // namespace detail

/// Elements [g, g + n) of the global tensor of a uniform, normal or bernoulli draw.
template <class T>
void fill_run(const random::draw& d, std::uint64_t g, index_t n, T* out) {
  switch (d.dist) {
    case random::distribution::uniform:
      return detail::fill_run_as<T, random::distribution::uniform>(d, g, n, out);
    case random::distribution::normal:
      return detail::fill_run_as<T, random::distribution::normal>(d, g, n, out);
    default:
      return detail::fill_run_as<T, random::distribution::bernoulli>(d, g, n, out);
  }
}

/// The block `box` of the draw's global tensor, into `out` (the box's row-major local).
template <class T>
void fill_draw(const random::draw& d, const local_box& box, const shape_vec& global, T* out) {
  for_each_box_run(box, global, [&](index_t g, index_t at, index_t n) {
    fill_run<T>(d, static_cast<std::uint64_t>(g), n, out + at);
  });
}

/// Dropout of the block `box`: out[k] = dropout_at(d, g, in[k]) for each element.
template <class T>
void dropout_block(const random::draw& d, const local_box& box, const shape_vec& global,
                   const T* in, T* out) {
  for_each_box_run(box, global, [&](index_t g, index_t at, index_t n) {
    for (index_t k = 0; k < n; ++k)
      out[at + k] = random::dropout_at<T>(d, static_cast<std::uint64_t>(g + k), in[at + k]);
  });
}

/// Fills the held locals of `out` (already shaped by the layout) with the draw: each
/// distinct block once, on the simulation's threads; ranks whose blocks are equal by
/// construction (replicas) then share the first one's buffer.
template <class T>
void fill_locals(local_set<T>& out, const layout_spec& spec, const shape_vec& global,
                 const random::draw& d) {
  const reduce_op op = detail::partial_of(spec).op;
  const std::vector<index_t> twins = generated_twins(spec, global, out.held_ranks());
  std::vector<index_t> todo;
  for (const index_t r : out.held())
    if (twins[static_cast<std::size_t>(r)] < 0) todo.push_back(r);
  // a buffer of its own for each rank that is written (a shared one is not copied first: every
  // element is drawn anew)
  for (const index_t r : todo) out.assign(r, out.shape(r));
  parallel_for(static_cast<index_t>(todo.size()), [&](index_t k) {
    const index_t r = todo[static_cast<std::size_t>(k)];
    if (holds_identity(spec, r))
      std::fill_n(out.data(r), out.size(r), identity<T>(op));
    else
      fill_draw<T>(d, box_at(spec, global, unravel(spec.mesh, r)), global, out.data(r));
  });
  for (const index_t r : out.held())
    if (const index_t t = twins[static_cast<std::size_t>(r)]; t >= 0) out.share(r, t);
}

/// Every held rank's local of a draw over the global shape.
template <class T>
local_set<T> random_locals(const layout_spec& spec, const shape_vec& global, const random::draw& d,
                           held_range held) {
  local_set<T> out(spec.mesh_size(), held);
  for (const index_t r : held.indices()) out.assign(r, box_at(spec, global, unravel(spec.mesh, r)).shape);
  fill_locals<T>(out, spec, global, d);
  return out;
}

}  // namespace spmd::host
