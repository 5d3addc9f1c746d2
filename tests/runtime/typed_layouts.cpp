// tests/runtime/typed_layouts.cpp — the typed API (spmd::layout, local_extents through
// with_rank) against the reference model, for a generated list of layout types.
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/bind.hpp>
#include <boost/mp11/list.hpp>
#include <catch2/catch.hpp>

#include "reference.hpp"

namespace {

namespace mp = boost::mp11;
using ref::index_t;
using ref::ivec;
using spmd::dyn;
using spmd::extents;
using spmd::partial;
using spmd::placements;
using spmd::reduce_op;
using spmd::replicate;
using spmd::shard;

// ---------------------------------------------------------------------------
// The layout types: meshes x placement lists x extents (static, dynamic, mixed)
// ---------------------------------------------------------------------------
template <class Mesh, class Extents, class PlacementLists>
using layouts_over =
    mp::mp_transform_q<mp::mp_bind<spmd::layout, Mesh, mp::_1, Extents>, PlacementLists>;

template <class... P>
using one_each = mp::mp_list<placements<P>...>;  // 1-d meshes

using opt_rps = mp::mp_list<replicate, partial<>, shard<0>, shard<1>>;
using opt_rs = mp::mp_list<replicate, shard<0>, shard<1>>;

// The six orders of tensor dim D over three mesh dims.
template <int D>
using orders3 = mp::mp_list<placements<shard<D, 0>, shard<D, 1>, shard<D, 2>>,
                            placements<shard<D, 0>, shard<D, 2>, shard<D, 1>>,
                            placements<shard<D, 1>, shard<D, 0>, shard<D, 2>>,
                            placements<shard<D, 1>, shard<D, 2>, shard<D, 0>>,
                            placements<shard<D, 2>, shard<D, 0>, shard<D, 1>>,
                            placements<shard<D, 2>, shard<D, 1>, shard<D, 0>>>;

using M3 = spmd::mesh<3>;
using Q4 = spmd::mesh<4>::with_ranks<6, 2, 0, 4>;
using N23 = spmd::mesh<2, 3>::named<"dp", "tp">;
using Q212 = spmd::mesh<2, 1, 2>::with_ranks<3, 1, 2, 0>;
using M222 = spmd::mesh<2, 2, 2>;
using M1212 = spmd::mesh<1, 2, 1, 2>::named<"a", "b", "c", "d">;
using M22 = spmd::mesh<2, 2>;

using all_layouts = mp::mp_append<
    // 1-d meshes, every placement
    layouts_over<M3, spmd::dextents<2>,
                 one_each<replicate, partial<reduce_op::max>, shard<0>, shard<1>, shard<-1>>>,
    layouts_over<Q4, extents<dyn, 7>, one_each<replicate, shard<0>, shard<1>>>,
    // 2-d: every pair from {R, P, S0, S1}, and the explicit orders
    layouts_over<N23, spmd::dextents<2>, mp::mp_product<placements, opt_rps, opt_rps>>,
    layouts_over<
        N23, spmd::dextents<2>,
        mp::mp_list<placements<shard<0, 1>, shard<0, 0>>, placements<shard<1, 1>, shard<1, 0>>,
                    placements<shard<-1, 0>, shard<1, 1>>>>,
    // 3-d over an explicit rank list: every triple from {R, S0, S1}, and all orders
    layouts_over<Q212, extents<dyn, 5>, mp::mp_product<placements, opt_rs, opt_rs, opt_rs>>,
    layouts_over<Q212, extents<dyn, 5>, orders3<0>>,
    layouts_over<M222, extents<3, dyn>, orders3<1>>,
    layouts_over<M222, spmd::dextents<2>,
                 mp::mp_list<placements<shard<0, 1>, shard<1>, shard<0, 0>>>>,
    // 4-d
    layouts_over<M1212, spmd::dextents<2>,
                 mp::mp_list<placements<shard<0>, shard<0>, shard<1>, shard<0>>,
                             placements<shard<0, 2>, replicate, shard<0, 0>, shard<0, 1>>,
                             placements<partial<>, shard<1>, shard<-1>, shard<0>>>>,
    // rank 0 and rank 3 tensors
    layouts_over<spmd::mesh<2>, extents<>,
                 mp::mp_list<placements<partial<>>, placements<replicate>>>,
    layouts_over<M22, extents<>, mp::mp_list<placements<replicate, partial<reduce_op::min>>>>,
    layouts_over<M22, spmd::dextents<3>,
                 mp::mp_list<placements<shard<2>, shard<0>>, placements<shard<-1>, shard<-1>>,
                             placements<shard<1, 1>, shard<1, 0>>>>,
    // fully static
    layouts_over<N23, extents<4, 7>,
                 mp::mp_list<placements<shard<0>, shard<0>>, placements<shard<1, 1>, shard<1, 0>>,
                             placements<shard<1>, shard<0>>>>,
    layouts_over<Q212, extents<5, 3>, mp::mp_list<placements<shard<0, 1>, shard<1>, shard<0, 0>>>>,
    layouts_over<M222, extents<7, 0, 2>, mp::mp_list<placements<shard<0>, shard<1>, shard<2>>>>>;

// ---------------------------------------------------------------------------
// One layout type against the reference, for every global shape it admits.
//
// Compile time: the templates below only read the typed layout into plain values
// (probe<L>); all comparing is done by ordinary functions, compiled once.
// ---------------------------------------------------------------------------
using spmd::shape_vec;

template <std::size_t N>
shape_vec sv(const spmd::dims<N>& d) {
  shape_vec v{};
  for (std::size_t i = 0; i < N; ++i) v.push_back(d[i]);
  return v;
}
template <class E>
shape_vec static_extents_of() {
  shape_vec v{};
  for (std::size_t d = 0; d < E::rank(); ++d) v.push_back(E::static_extent(d));
  return v;
}
ivec iv(const shape_vec& v) { return ref::to_ivec(v); }

// What one rank's compiled path answers.
struct rank_probe {
  index_t rank = 0;
  shape_vec le_value, le_static;  // local_extents<rank>(): values, static extents of its type
  shape_vec shape, offset;        // block_of(rank)
  shape_vec local_shape, global_offset, at_shape, at_offset;
  index_t local_size = 0;
};
// What a layout object answers for one global shape.
struct layout_probe {
  shape_vec global;
  std::vector<rank_probe> ranks;                         // in mesh order
  shape_vec u_value, u_static;                           // uniform_local_extents()
  std::vector<bool> uniform;                             // uniform(d)
  std::vector<std::pair<shape_vec, shape_vec>> outside;  // block_of(ranks not in the mesh)
};
struct layout_info {
  ivec mesh, ranks, static_extents;
  std::vector<ref::place> ps;  // raw: not normalised
};

template <class L>
layout_info info_of() {
  using M = typename L::mesh_type;
  layout_info info{ref::to_ivec(M::shape()),
                   {},
                   iv(static_extents_of<typename L::extents_type>()),
                   ref::from_spmd(L::placements_type::value())};
  for (index_t i = 0; i < M::size; ++i) info.ranks.push_back(M::rank_at(i));
  return info;
}

template <class L>
layout_probe probe(const ivec& global, const std::vector<ivec>& coords, const ivec& outside_ranks) {
  using M = typename L::mesh_type;
  using E = typename L::extents_type;
  constexpr std::size_t R = L::rank;
  spmd::dims<R> g{};
  for (std::size_t d = 0; d < R; ++d) g[d] = global[d];
  const L l{E::from_values(g)};
  layout_probe p;
  p.global = sv(l.global_shape());
  for (index_t i = 0; i < M::size; ++i) {
    spmd::dims<M::ndim> c{};
    for (int m = 0; m < M::ndim; ++m) c[std::size_t(m)] = coords[std::size_t(i)][std::size_t(m)];
    // The compiled per-rank path: `rank` is a constant expression.
    p.ranks.push_back(spmd::with_rank<M>(M::rank_at(i), [&](auto rc) {
      constexpr index_t rank = decltype(rc)::value;
      const auto le = l.template local_extents<rank>();
      const spmd::block<R> b = l.block_of(rank), at = l.block_at(c);
      return rank_probe{rank,
                        sv(le.values()),
                        static_extents_of<std::remove_const_t<decltype(le)>>(),
                        sv(b.shape),
                        sv(b.offset),
                        sv(l.local_shape(rank)),
                        sv(l.global_offset(rank)),
                        sv(at.shape),
                        sv(at.offset),
                        l.local_size(rank)};
    }));
  }
  const auto u = l.uniform_local_extents();
  p.u_value = sv(u.values());
  p.u_static = static_extents_of<std::remove_const_t<decltype(u)>>();
  for (std::size_t d = 0; d < R; ++d) p.uniform.push_back(l.uniform(d));
  for (index_t rank : outside_ranks) {
    const auto b = l.block_of(rank);
    p.outside.push_back({sv(b.shape), sv(b.offset)});
  }
  return p;
}

std::vector<ivec> admissible_shapes(const ivec& static_extents) {
  static const index_t sizes[] = {0, 1, 2, 3, 5, 7};
  std::vector<ivec> out;
  for (const ivec& c : ref::all_coords(ivec(static_extents.size(), 6))) {
    ivec s;
    for (std::size_t d = 0; d < static_extents.size(); ++d)
      s.push_back(static_extents[d] == dyn ? sizes[c[d]] : static_extents[d]);
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

struct tally {
  std::vector<std::string> first;
  std::size_t count = 0, checks = 0;
  void expect(bool ok, const std::string& what) {
    ++checks;
    if (ok) return;
    if (first.size() < 20) first.push_back(what);
    ++count;
  }
};

using probe_fn = layout_probe (*)(const ivec&, const std::vector<ivec>&, const ivec&);

void verify(const layout_info& info, probe_fn run, tally& t) {
  const auto coords = ref::all_coords(info.mesh);
  const index_t max_rank = *std::max_element(info.ranks.begin(), info.ranks.end());
  const ivec outside_ranks{-1, max_rank + 1, max_rank + 7};
  const std::size_t R = info.static_extents.size();
  for (const ivec& global : admissible_shapes(info.static_extents)) {
    const layout_probe p = run(global, coords, outside_ranks);
    const std::string where = "mesh " + ref::to_string(info.mesh) + " ranks " +
                              ref::to_string(info.ranks) + " placements " +
                              ref::to_string(info.ps) + " global " + ref::to_string(global);
    t.expect(iv(p.global) == global, where + ": global_shape");
    std::vector<ref::box> want;
    for (const ivec& c : coords) want.push_back(ref::box_at(info.mesh, info.ps, global, c));

    for (std::size_t i = 0; i < want.size(); ++i) {
      const ref::box& w = want[i];
      const rank_probe& q = p.ranks[i];
      const std::string at = where + " rank " + std::to_string(q.rank);
      t.expect(q.rank == info.ranks[i], at + ": with_rank passed another rank");
      t.expect(iv(q.le_value) == w.shape,
               at + ": local_extents value " + ref::to_string(iv(q.le_value)));
      ivec want_static = w.shape;
      for (std::size_t d = 0; d < R; ++d)
        if (info.static_extents[d] == dyn) want_static[d] = dyn;
      t.expect(iv(q.le_static) == want_static,
               at + ": local_extents type " + ref::to_string(iv(q.le_static)));
      t.expect(iv(q.shape) == w.shape && iv(q.offset) == w.offset,
               at + ": block_of " + ref::to_string(iv(q.shape)) + " / " +
                   ref::to_string(iv(q.offset)) + ", want " + ref::to_string(w.shape) + " / " +
                   ref::to_string(w.offset));
      t.expect(iv(q.local_shape) == w.shape && iv(q.global_offset) == w.offset,
               at + ": local_shape / global_offset");
      t.expect(iv(q.at_shape) == w.shape && iv(q.at_offset) == w.offset, at + ": block_at");
      index_t volume = 1;
      for (index_t e : w.shape) volume *= e;
      t.expect(q.local_size == volume, at + ": local_size");
    }

    // Uniformity: the same extent on every rank; static when the global extent is.
    ivec u_static(R, dyn);
    for (std::size_t d = 0; d < R; ++d) {
      bool same = true;
      for (const auto& w : want) same &= w.shape[d] == want[0].shape[d];
      t.expect(p.uniform[d] == same, where + ": uniform(" + std::to_string(d) + ")");
      if (same && info.static_extents[d] != dyn) u_static[d] = want[0].shape[d];
    }
    t.expect(iv(p.u_value) == want[0].shape, where + ": uniform_local_extents value");
    t.expect(iv(p.u_static) == u_static,
             where + ": uniform_local_extents type " + ref::to_string(iv(p.u_static)));

    // Ranks outside the mesh hold nothing, at offset = the global extents.
    for (const auto& [shape, offset] : p.outside)
      t.expect(iv(shape) == ivec(R, 0) && iv(offset) == global,
               where + ": a rank outside the mesh");
  }
}

}  // namespace

TEST_CASE("typed layouts equal the reference on every rank, through with_rank", "[typed]") {
  tally t;
  std::size_t n = 0;
  mp::mp_for_each<mp::mp_transform<std::type_identity, all_layouts>>([&](auto id) {
    using L = typename decltype(id)::type;
    verify(info_of<L>(), &probe<L>, t);
    ++n;
  });
  std::ostringstream os;
  for (const auto& f : t.first) os << f << '\n';
  INFO(os.str());
  INFO(t.count << " failures in " << t.checks << " checks over " << n << " layout types");
  CHECK(t.count == 0);
  CHECK(n == mp::mp_size<all_layouts>::value);
  CHECK(n > 80);
}

TEST_CASE("a dynamic layout and its static twin agree", "[typed]") {
  using S = spmd::layout<N23, placements<shard<1, 1>, shard<1, 0>>, extents<4, 7>>;
  using D = spmd::layout<N23, placements<shard<1, 1>, shard<1, 0>>, spmd::dextents<2>>;
  static_assert(std::is_empty_v<S>);
  const D d{spmd::dextents<2>{4, 7}};
  for (index_t r = 0; r < N23::size; ++r) {
    CHECK(d.block_of(r) == S{}.block_of(r));
    spmd::with_rank<N23>(r, [&](auto rc) {
      constexpr auto st = S{}.local_extents<decltype(rc)::value>();  // a constant
      CHECK(d.local_extents<decltype(rc)::value>().values() == st.values());
    });
  }
}

TEST_CASE("run-time extents a layout refuses: negative, or more than 2^62 elements", "[typed]") {
  using D = spmd::layout<N23, placements<shard<1>, replicate>, spmd::dextents<2>>;
  using E = spmd::dextents<2>;
  const auto message = [](index_t a, index_t b) {
    try {
      const D d{E{a, b}};
      (void)d;
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // spmd::dyn (-1) marks a run-time extent in a type; as a value it is a negative size.
  CHECK(message(-1, 7) == "spmd::layout: extents (-1, 7): extent -1 at dim 0 is negative");
  CHECK(message(4, -3) == "spmd::layout: extents (4, -3): extent -3 at dim 1 is negative");
  // 4e12 x 4e12 overflows index_t: refused before any block is computed.
  CHECK(message(4000000000000, 4000000000000) ==
        "spmd::layout: extents (4000000000000, 4000000000000) hold more than 2^62 elements");
  CHECK(message(index_t{1} << 31, index_t{1} << 32) ==
        "spmd::layout: extents (2147483648, 4294967296) hold more than 2^62 elements");
  // The limit itself, and empty tensors however long their other dims, are tensors.
  CHECK(message(index_t{1} << 31, index_t{1} << 31) == "accepted");
  CHECK(message(index_t{1} << 30, index_t{1} << 32) == "accepted");
  CHECK(message(2, index_t{1} << 61) == "accepted");
  CHECK(message(4, index_t{1} << 61) != "accepted");
  CHECK(message(0, index_t{1} << 62) == "accepted");
  CHECK(message(0, 0) == "accepted");
}
