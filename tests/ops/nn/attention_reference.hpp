// tests/ops/nn/attention_reference.hpp — attention written out per head in double, causal or
// not, with the gradients of sum(y * g): what the attention tests compare with.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "spmd/core/config.hpp"

namespace attention_test {

using spmd::index_t;

struct reference {
  std::vector<double> y, dq, dk, dv;
};

/// q (nb, c, w), k and v (nb, ck, w), g (nb, c, w), heads of d; causal: query i sees keys j <= i.
inline reference attend(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                        const std::vector<double>& g, index_t nb, index_t c, index_t ck, index_t w, index_t d,
                        bool causal, double scale) {
  const auto qsize = static_cast<std::size_t>(nb * c * w), ksize = static_cast<std::size_t>(nb * ck * w);
  reference r{std::vector<double>(qsize), std::vector<double>(qsize), std::vector<double>(ksize), std::vector<double>(ksize)};
  auto at = [&](index_t b, index_t n, index_t i, index_t h, index_t e) {
    return static_cast<std::size_t>((b * n + i) * w + h * d + e);
  };
  std::vector<double> p(static_cast<std::size_t>(c * ck)), dp(p.size());
  auto P = [&](index_t i, index_t j) -> double& { return p[static_cast<std::size_t>(i * ck + j)]; };
  auto DP = [&](index_t i, index_t j) -> double& { return dp[static_cast<std::size_t>(i * ck + j)]; };
  for (index_t b = 0; b < nb; ++b)
    for (index_t h = 0; h < w / d; ++h) {
      std::fill(p.begin(), p.end(), 0.0);
      std::fill(dp.begin(), dp.end(), 0.0);
      for (index_t i = 0; i < c; ++i) {
        const index_t seen = causal ? std::min(ck, i + 1) : ck;
        double m = -INFINITY, s = 0;
        for (index_t j = 0; j < seen; ++j) {
          double dot = 0;
          for (index_t e = 0; e < d; ++e) dot += q[at(b, c, i, h, e)] * k[at(b, ck, j, h, e)];
          P(i, j) = dot * scale;
          m = std::max(m, P(i, j));
        }
        for (index_t j = 0; j < seen; ++j) s += (P(i, j) = std::exp(P(i, j) - m));
        for (index_t j = 0; j < seen; ++j) P(i, j) /= s;
      }
      for (index_t i = 0; i < c; ++i)
        for (index_t e = 0; e < d; ++e)
          for (index_t j = 0; j < ck; ++j) r.y[at(b, c, i, h, e)] += P(i, j) * v[at(b, ck, j, h, e)];
      // backward: dP = g vᵀ, dv = Pᵀ g, dS = P (dP - Σ dP P) scale, dq = dS k, dk = dSᵀ q
      for (index_t i = 0; i < c; ++i)
        for (index_t j = 0; j < ck; ++j)
          for (index_t e = 0; e < d; ++e) DP(i, j) += g[at(b, c, i, h, e)] * v[at(b, ck, j, h, e)];
      for (index_t j = 0; j < ck; ++j)
        for (index_t e = 0; e < d; ++e)
          for (index_t i = 0; i < c; ++i) r.dv[at(b, ck, j, h, e)] += P(i, j) * g[at(b, c, i, h, e)];
      for (index_t i = 0; i < c; ++i) {
        double dot = 0;
        for (index_t j = 0; j < ck; ++j) dot += DP(i, j) * P(i, j);
        for (index_t j = 0; j < ck; ++j) DP(i, j) = P(i, j) * (DP(i, j) - dot) * scale;
      }
      for (index_t i = 0; i < c; ++i)
        for (index_t j = 0; j < ck; ++j)
          for (index_t e = 0; e < d; ++e) {
            r.dq[at(b, c, i, h, e)] += DP(i, j) * k[at(b, ck, j, h, e)];
            r.dk[at(b, ck, j, h, e)] += DP(i, j) * q[at(b, c, i, h, e)];
          }
    }
  return r;
}

}  // namespace attention_test
