// spmd/backends/sim/local_int.hpp — an integer per rank (LocalIntNode's role), e.g. a dim's size
// when shards differ in shape.
//
//   using M = spmd::mesh<3>;
//   spmd::sim::local_int<M> a{10, 20, 30}, b{1, 2, 3};   // by mesh index
//   auto c = a + b;                                      // {11, 22, 33}
//   c[1];                                                // 22 (rank id 1)
//   c.reconcile();                                       // throws: ranks differ
//   (a - a).reconcile();                                 // 0: every rank agrees
//   a == b;                                              // true only when true on every rank
//   a < a + 1;                                           // true; throws if ranks disagree
//
// Arithmetic wraps on overflow (never UB); division and remainder by zero, and the one
// overflowing division (lowest / -1), throw std::domain_error naming the rank.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "spmd/core/config.hpp"
#include "spmd/core/numerics.hpp"

#include "spmd/backends/sim/names.hpp"

namespace spmd::sim {

template <class Mesh>
class local_int;

namespace detail {
template <class>
inline constexpr bool is_local_int = false;
template <class M>
inline constexpr bool is_local_int<local_int<M>> = true;

}  // namespace detail

/// One index_t per rank of Mesh (stored by mesh index; read by rank id).
template <class Mesh>
class local_int {
 public:
  using mesh_type = Mesh;
  static constexpr index_t n_ranks = Mesh::size;

  /// The same value on every rank.
  local_int(index_t v = 0) { v_.fill(v); }  // NOLINT: implicit, so `x + 1` works
  /// One value per rank, in mesh-index order (Mesh::rank_at(i) gets values[i]).
  local_int(std::initializer_list<index_t> values) {
    if (values.size() == 1) {  // local_int<M>{5}: braces with one value mean every rank
      for (auto& x : v_) x = *values.begin();
      return;
    }
    if (static_cast<index_t>(values.size()) != n_ranks)
      throw std::invalid_argument("spmd::sim::local_int: got " + std::to_string(values.size()) +
                                  " values, the mesh has " + std::to_string(n_ranks) + " ranks");
    std::size_t i = 0;
    for (index_t v : values) v_[i++] = v;
  }
  /// One value per rank id; the map must hold exactly the mesh's ranks.
  explicit local_int(const std::map<index_t, index_t>& by_rank) {
    for (const auto& [r, v] : by_rank)
      if (!Mesh::contains(r))
        throw std::invalid_argument("spmd::sim::local_int: rank " + std::to_string(r) +
                                    " is not in the mesh");
    for (index_t i = 0; i < n_ranks; ++i) {
      const auto it = by_rank.find(Mesh::rank_at(i));
      if (it == by_rank.end())
        throw std::invalid_argument("spmd::sim::local_int: no value for rank " +
                                    std::to_string(Mesh::rank_at(i)));
      v_[static_cast<std::size_t>(i)] = it->second;
    }
  }

  /// The value of rank id `rank`; throws std::out_of_range for a rank outside the mesh.
  index_t operator[](index_t rank) const { return v_[slot(rank)]; }
  index_t& operator[](index_t rank) { return v_[slot(rank)]; }
  index_t at(index_t rank) const { return (*this)[rank]; }
  /// The value at mesh index i. @pre 0 <= i < n_ranks
  index_t at_index(index_t i) const { return v_[static_cast<std::size_t>(i)]; }
  index_t& at_index(index_t i) { return v_[static_cast<std::size_t>(i)]; }

  /// True when every rank holds the same value.
  bool is_uniform() const {
    for (index_t v : v_)
      if (v != v_[0]) return false;
    return true;
  }
  /// The common value, or nothing when ranks differ.
  std::optional<index_t> uniform() const {
    if (!is_uniform()) return std::nullopt;
    return v_[0];
  }
  /// The common value; throws std::logic_error naming the ranks that differ from the first
  /// rank (and every rank's value).
  index_t reconcile() const {
    if (is_uniform()) return v_[0];
    std::string differ;
    for (index_t i = 1; i < n_ranks; ++i)
      if (v_[static_cast<std::size_t>(i)] != v_[0])
        differ += (differ.empty() ? "" : ", ") + std::to_string(Mesh::rank_at(i));
    throw std::logic_error("spmd::sim::local_int::reconcile: ranks " + differ +
                           " differ from rank " + std::to_string(Mesh::rank_at(0)) + ": " +
                           text());
  }

  /// "{rank: value, ...}".
  std::string text() const {
    std::string t = "{";
    for (index_t i = 0; i < n_ranks; ++i)
      t += (i ? ", " : "") + std::to_string(Mesh::rank_at(i)) + ": " +
           std::to_string(v_[static_cast<std::size_t>(i)]);
    return t + "}";
  }

  // Arithmetic, per rank.
  friend local_int operator+(const local_int& a, const local_int& b) {
    return zip(a, b, [](index_t x, index_t y, index_t) { return spmd::wrap_add(x, y); });
  }
  friend local_int operator-(const local_int& a, const local_int& b) {
    return zip(a, b, [](index_t x, index_t y, index_t) { return spmd::wrap_sub(x, y); });
  }
  friend local_int operator*(const local_int& a, const local_int& b) {
    return zip(a, b, [](index_t x, index_t y, index_t) { return spmd::wrap_mul(x, y); });
  }
  /// Truncating division; throws std::domain_error naming the rank on division by zero or
  /// lowest / -1.
  friend local_int operator/(const local_int& a, const local_int& b) {
    return zip(a, b, [](index_t x, index_t y, index_t r) {
      check_div("/", x, y, r);
      return x / y;
    });
  }
  friend local_int operator%(const local_int& a, const local_int& b) {
    return zip(a, b, [](index_t x, index_t y, index_t r) {
      check_div("%", x, y, r);
      return x % y;
    });
  }
  friend local_int operator-(const local_int& a) { return local_int(0) - a; }
  friend local_int operator+(const local_int& a) { return a; }
  local_int& operator+=(const local_int& b) { return *this = *this + b; }
  local_int& operator-=(const local_int& b) { return *this = *this - b; }
  local_int& operator*=(const local_int& b) { return *this = *this * b; }
  local_int& operator/=(const local_int& b) { return *this = *this / b; }
  local_int& operator%=(const local_int& b) { return *this = *this % b; }

  /// True only when equal on every rank.
  friend bool operator==(const local_int& a, const local_int& b) { return a.v_ == b.v_; }

  /// Orderings: the answer must be the same on every rank; otherwise std::logic_error
  /// naming the ranks where it is true and where false.
  friend bool operator<(const local_int& a, const local_int& b) {
    return agree("<", a, b, [](index_t x, index_t y) { return x < y; });
  }
  friend bool operator<=(const local_int& a, const local_int& b) {
    return agree("<=", a, b, [](index_t x, index_t y) { return x <= y; });
  }
  friend bool operator>(const local_int& a, const local_int& b) {
    return agree(">", a, b, [](index_t x, index_t y) { return x > y; });
  }
  friend bool operator>=(const local_int& a, const local_int& b) {
    return agree(">=", a, b, [](index_t x, index_t y) { return x >= y; });
  }

 private:
  static std::size_t slot(index_t rank) {
    const index_t i = Mesh::index_of(rank);
    if (i < 0)
      throw std::out_of_range("spmd::sim::local_int: rank " + std::to_string(rank) +
                              " is not in the mesh");
    return static_cast<std::size_t>(i);
  }
  static void check_div(const char* op, index_t x, index_t y, index_t rank) {
    if (y == 0)
      throw std::domain_error("spmd::sim::local_int: " + std::to_string(x) + " " + op +
                              " 0 on rank " + std::to_string(rank));
    if (y == -1 && x == std::numeric_limits<index_t>::lowest())
      throw std::domain_error("spmd::sim::local_int: " + std::to_string(x) + " " + op +
                              " -1 overflows on rank " + std::to_string(rank));
  }
  template <class F>
  static local_int zip(const local_int& a, const local_int& b, F f) {
    local_int out;
    for (index_t i = 0; i < n_ranks; ++i) {
      const auto s = static_cast<std::size_t>(i);
      out.v_[s] = f(a.v_[s], b.v_[s], Mesh::rank_at(i));
    }
    return out;
  }
  template <class F>
  static bool agree(const char* op, const local_int& a, const local_int& b, F f) {
    std::string yes, no;
    for (index_t i = 0; i < n_ranks; ++i) {
      const auto s = static_cast<std::size_t>(i);
      std::string& to = f(a.v_[s], b.v_[s]) ? yes : no;
      to += (to.empty() ? "" : ", ") + std::to_string(Mesh::rank_at(i));
    }
    if (!yes.empty() && !no.empty())
      throw std::logic_error("spmd::sim::local_int: " + a.text() + " " + op + " " + b.text() +
                             " differs across ranks: true on ranks " + yes +
                             ", false on ranks " + no);
    return no.empty();
  }

  std::array<index_t, static_cast<std::size_t>(n_ranks)> v_{};
};

}  // namespace spmd::sim
