// tools/train/synthetic.hpp — inputs made in the program, for the example and the benchmark:
// initial parameters as GPT-2 initialises them (weights normal(0, 0.02), biases 0, norm
// weights 1) and batches of a counting language (each sequence counts up from a random
// start with a stride of 1, 2 or 3, modulo the vocabulary; the targets are the next tokens).
// tools/train/make_inputs.py writes files of the same kind for spmd-train.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "inputs.hpp"

namespace spmd_train {

inline inputs counting_inputs(const model_spec& spec, std::int64_t steps, unsigned seed = 2024) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.02f);
  inputs in;
  for (const param_spec& p : spec.params) {
    std::size_t n = 1;
    for (const std::int64_t e : p.shape) n *= static_cast<std::size_t>(e);
    const bool norm_weight = p.name.find("ln") != std::string::npos && p.name.ends_with("weight");
    const bool bias = p.shape.size() == 1 && !norm_weight;
    std::vector<float> v(n, norm_weight ? 1.f : 0.f);
    if (!norm_weight && !bias)
      for (float& x : v) x = normal(rng);
    in.params[p.name] = std::move(v);
  }
  std::uniform_int_distribution<std::int64_t> start(0, spec.vocab - 1), stride(1, 3);
  for (std::int64_t s = 0; s < steps; ++s)
    for (std::int64_t b = 0; b < spec.batch; ++b) {
      const std::int64_t a = start(rng), d = stride(rng);
      for (std::int64_t t = 0; t < spec.context; ++t) {
        in.tokens.push_back((a + d * t) % spec.vocab);
        in.targets.push_back((a + d * (t + 1)) % spec.vocab);
      }
    }
  in.data_steps = steps;
  return in;
}

}  // namespace spmd_train
