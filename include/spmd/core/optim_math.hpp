// spmd/core/optim_math.hpp — one element of the optimizers' updates (runtime/optim.hpp), for
// the host loop and the CUDA kernel alike: host-and-device functions, no allocation.
//
// Each line is one of torch's single-tensor operations, rounded to T as the elementwise
// operator would round it (element_math's binary_elem: the 16-bit floats compute in float and
// round once per operation), so a fused update has the bits of the operation-by-operation one.
// The coefficients are T values: torch multiplies a tensor by a Python float, which the
// operator converts to the tensor's type first.
#pragma once

#include <type_traits>

#include "spmd/core/config.hpp"
#include "spmd/core/element_math.hpp"

namespace spmd::optim_math {

/// AdamW's coefficients of one parameter at one step (t its step count).
template <class T>
struct adamw_coeffs {
  bool decays = false;  // weight_decay != 0
  T decay{};            // 1 − lr·weight_decay
  T one_minus_beta1{};  // lerp's weight
  T beta2{}, one_minus_beta2{};
  T bc2_sqrt{};         // √(1 − β2^t)
  T eps{};
  T step_size{};        // lr / (1 − β1^t)
};

/// AdamW's step in its three stages (the host runs each over a block of elements, so that the
/// stages without a square root vectorise; adamw_elem runs them in turn on one element).
/// Stage 1: decoupled weight decay, then the moments.
template <class T>
SPMD_HD constexpr void adamw_moments(T& p, T g, T& m, T& v, const adamw_coeffs<T>& c) {
  using element_math::binary_elem;
  if (c.decays) p = binary_elem<binary_fn::mul>(p, c.decay);  // p.mul_(1 − lr·wd)
  // m.lerp_(g, 1 − β1): m + w·(g − m) for a weight below 0.5.
  m = binary_elem<binary_fn::add>(m, binary_elem<binary_fn::mul>(binary_elem<binary_fn::sub>(g, m), c.one_minus_beta1));
  // v.mul_(β2).addcmul_(g, g, value = 1 − β2): (value·g)·g.
  v = binary_elem<binary_fn::add>(binary_elem<binary_fn::mul>(v, c.beta2),
                                  binary_elem<binary_fn::mul>(binary_elem<binary_fn::mul>(g, c.one_minus_beta2), g));
}
/// Stage 2: v.sqrt().
template <class T>
SPMD_HD constexpr T adamw_root(T v) {
  return element_math::unary_elem<unary_fn::sqrt>(v);
}
/// Stage 3: denom = root / √(1 − β2^t) + eps; p.addcdiv_(m, denom, value = −step_size).
template <class T>
SPMD_HD constexpr void adamw_apply(T& p, T m, T root, const adamw_coeffs<T>& c) {
  using element_math::binary_elem;
  const T denom = binary_elem<binary_fn::add>(binary_elem<binary_fn::div>(root, c.bc2_sqrt), c.eps);
  p = binary_elem<binary_fn::sub>(p, binary_elem<binary_fn::mul>(binary_elem<binary_fn::div>(m, denom), c.step_size));
}

/// torch.optim.AdamW's single-tensor step on one element: p, its gradient g, exp_avg m and
/// exp_avg_sq v.
template <class T>
SPMD_HD constexpr void adamw_elem(T& p, T g, T& m, T& v, const adamw_coeffs<T>& c) {
  adamw_moments(p, g, m, v, c);
  adamw_apply(p, m, adamw_root(v), c);
}

/// SGD's coefficients of one parameter at one step.
template <class T>
struct sgd_coeffs {
  bool decays = false;    // weight_decay != 0
  T weight_decay{};
  bool has_momentum = false;
  bool first = false;     // the buffer starts as the gradient
  T momentum{};
  bool dampened = false;  // dampening != 0
  T one_minus_dampening{};
  bool nesterov = false;
  T lr{};
};

/// torch.optim.SGD's single-tensor step on one element: p, its gradient g, the momentum
/// buffer buf (unused without momentum).
template <class T>
SPMD_HD constexpr void sgd_elem(T& p, T g, T& buf, const sgd_coeffs<T>& c) {
  using element_math::binary_elem;
  T d = g;
  if (c.decays) d = binary_elem<binary_fn::add>(d, binary_elem<binary_fn::mul>(p, c.weight_decay));
  if (c.has_momentum) {
    if (c.first) {
      buf = d;
    } else {
      const T scaled = binary_elem<binary_fn::mul>(buf, c.momentum);
      buf = binary_elem<binary_fn::add>(scaled, c.dampened ? binary_elem<binary_fn::mul>(d, c.one_minus_dampening) : d);
    }
    d = c.nesterov ? binary_elem<binary_fn::add>(d, binary_elem<binary_fn::mul>(buf, c.momentum)) : buf;
  }
  p = binary_elem<binary_fn::sub>(p, binary_elem<binary_fn::mul>(d, c.lr));
}

/// One parameter's block of a fused update: every pointer addresses `n` elements; its
/// coefficients are entry `k` of the update's coefficient array. The array is apart from the
/// blocks so that a captured step (backends/cuda/graph.hpp) rewrites only the coefficients
/// before each replay: the blocks' addresses stay, the step counts and bias corrections move.
template <class T, class Coeffs>
struct segment {
  T* p;
  const T* g;
  T* a;  // AdamW: exp_avg; SGD: the momentum buffer (null without momentum)
  T* b;  // AdamW: exp_avg_sq
  index_t n;
  index_t k;  // its coefficients: coeffs[k]
};

/// The grid's share of a fused update: block row y takes segments y, y + rows, ...; within a
/// segment the threads stride over its elements (the CUDA kernel's body; the CPU tests run it
/// through the grid emulation).
template <class T, class Coeffs>
SPMD_HD inline void update_thread(const segment<T, Coeffs>* table, index_t segments, const Coeffs* coeffs, index_t block,
                                  index_t thread, index_t blocks, index_t threads, index_t row, index_t rows) {
  for (index_t s = row; s < segments; s += rows) {
    const segment<T, Coeffs>& seg = table[s];
    const Coeffs c = coeffs[seg.k];
    for (index_t i = block * threads + thread; i < seg.n; i += blocks * threads) {
      if constexpr (std::is_same_v<Coeffs, adamw_coeffs<T>>) {
        adamw_elem(seg.p[i], seg.g[i], seg.a[i], seg.b[i], c);
      } else {
        T unused{};
        sgd_elem(seg.p[i], seg.g[i], seg.a ? seg.a[i] : unused, c);
      }
    }
  }
}

}  // namespace spmd::optim_math
