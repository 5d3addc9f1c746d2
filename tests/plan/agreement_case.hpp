// tests/plan/agreement_case.hpp — one typed pair whose plan the compiler computed
// (spmd::plan_of), to be compared with the run-time planner on the same layouts.
// The generated translation units (gen_agreement.py) register their cases here.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

#include <spmd/plan.hpp>
#include <spmd/spmd.hpp>

namespace agreement {

struct typed_case {
  const spmd::plan_result* typed;  // plan_of<Src, Dst, T>::result, a constant
  spmd::layout_spec src, dst;
  double bytes;                    // plan_of<Src, Dst, T>::global_bytes
  const char* name;
};

inline std::vector<typed_case>& registry() {
  static std::vector<typed_case> cases;
  return cases;
}

template <class Src, class Dst, class T>
typed_case make(const char* name) {
  using P = spmd::plan_of<Src, Dst, T>;
  return {&P::result, Src::spec(), Dst::spec(), P::global_bytes, name};
}

struct registrar {
  registrar(std::initializer_list<typed_case> cases) {
    registry().insert(registry().end(), cases.begin(), cases.end());
  }
};

}  // namespace agreement
