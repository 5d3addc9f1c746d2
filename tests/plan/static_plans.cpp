// tests/plan/static_plans.cpp — plans computed by the compiler (spmd::plan_of), checked with
// static_asserts: step kinds, their counts, the mesh dims each collective runs over, costs
// and their ordering, and the DTensor-format trace. The test is that this file compiles.
//
// Sections: 1-d meshes (every single-dim move of the step table), 2-d meshes (merged
// collectives, shard order), 3-d meshes, unit mesh dims, dynamic extents, the cost model.
#include <spmd/plan.hpp>
#include <spmd/spmd.hpp>

namespace {

using spmd::dyn;
using spmd::extents;
using spmd::mesh;
using spmd::placements;
using spmd::reduce_op;
using spmd::replicate;
using spmd::step_kind;

using R = replicate;
template <int D, int Order = spmd::default_order>
using S = spmd::shard<D, Order>;
using Psum = spmd::partial<reduce_op::sum>;
using Pmax = spmd::partial<reduce_op::max>;
using Pavg = spmd::partial<reduce_op::avg>;

template <class Mesh, class Extents, class... P>
using L = spmd::layout<Mesh, placements<P...>, Extents>;
template <class From, class To, class T = float>
using Plan = spmd::plan_of<From, To, T>;

// A plan of local steps only: no collective, and a cost (the bytes written at memory
// bandwidth) far below one collective's fixed 6.6 us.
template <class P>
constexpr bool local_only() {
  return P::collectives() == 0 && P::cost_us() < 1.0;
}

constexpr auto AG = step_kind::all_gather;
constexpr auto AR = step_kind::all_reduce;
constexpr auto RS = step_kind::reduce_scatter;
constexpr auto A2A = step_kind::all_to_all;
constexpr auto CHUNK = step_kind::chunk;
constexpr auto PART = step_kind::partition;
constexpr auto FILL = step_kind::fill;

/// The plan's steps have exactly these kinds, in order.
template <class P, std::size_t N>
constexpr bool kinds_are(const step_kind (&want)[N]) {
  if (P::size() != static_cast<int>(N)) return false;
  for (std::size_t i = 0; i < N; ++i)
    if (P::step(static_cast<int>(i)).kind != want[i]) return false;
  return true;
}
/// ... and run over these mesh-dim masks.
template <class P, std::size_t N>
constexpr bool masks_are(const unsigned (&want)[N]) {
  if (P::size() != static_cast<int>(N)) return false;
  for (std::size_t i = 0; i < N; ++i)
    if (P::step(static_cast<int>(i)).mesh_dims != want[i]) return false;
  return true;
}
template <class P>
constexpr bool empty_plan() {
  return P::size() == 0 && P::collectives() == 0 && local_only<P>();
}
/// Every step ends where the next begins; the ends are the two layouts.
template <class P, class From, class To>
constexpr bool chained() {
  if (P::size() == 0) return true;
  if (!(P::step(0).from == From::spec()) || !(P::step(P::size() - 1).to == To::spec())) return false;
  for (int i = 0; i + 1 < P::size(); ++i)
    if (!(P::step(i).to == P::step(i + 1).from)) return false;
  return true;
}

// ===========================================================================
// 1-d mesh of 4, an 8x8 tensor: one step per row of the step table
// ===========================================================================
using M4 = mesh<4>;
using E88 = extents<8, 8>;
using R1 = L<M4, E88, R>;
using S0 = L<M4, E88, S<0>>;
using S1 = L<M4, E88, S<1>>;
using Sm1 = L<M4, E88, S<-1>>;  // the same layout as S1
using PS = L<M4, E88, Psum>;
using PM = L<M4, E88, Pmax>;
using PA = L<M4, E88, Pavg>;

// S -> R: all_gather over mesh dim 0.
using S0_R = Plan<S0, R1>;
static_assert(kinds_are<S0_R>({AG}) && masks_are<S0_R>({0b1}));
static_assert(S0_R::collectives() == 1 && S0_R::count(AG) == 1 && S0_R::count(AR) == 0);
static_assert(S0_R::trace() == "S(0)->R");
static_assert(chained<S0_R, S0, R1>());

// R -> S: a local chunk, free.
using R_S0 = Plan<R1, S0>;
static_assert(kinds_are<R_S0>({CHUNK}) && R_S0::collectives() == 0 && local_only<R_S0>());
static_assert(R_S0::trace() == "R->S(0)");

// S(i) -> S(j): all_to_all.
using S0_S1 = Plan<S0, S1>;
static_assert(kinds_are<S0_S1>({A2A}) && S0_S1::collectives() == 1);
static_assert(S0_S1::trace() == "S(0)->S(1)");
static_assert(Plan<S1, S0>::trace() == "S(1)->S(0)");

// P -> R: all_reduce with the layout's op; P -> S: reduce_scatter.
using P_R = Plan<PS, R1>;
static_assert(kinds_are<P_R>({AR}) && P_R::step(0).op == reduce_op::sum);
static_assert(P_R::trace() == "P(sum)->R");
using PM_S1 = Plan<PM, S1>;
static_assert(kinds_are<PM_S1>({RS}) && PM_S1::step(0).op == reduce_op::max);
static_assert(PM_S1::trace() == "P(max)->S(1)");
static_assert(kinds_are<Plan<PA, R1>>({AR}) && Plan<PA, R1>::step(0).op == reduce_op::avg);

// S(i) -> P(op): a local fill (op's identity around the shard), no communication.
using S0_PM = Plan<S0, PM>;
static_assert(kinds_are<S0_PM>({FILL}) && S0_PM::step(0).op == reduce_op::max);
static_assert(S0_PM::collectives() == 0 && local_only<S0_PM>());
static_assert(S0_PM::trace() == "S(0)->P(max)");
static_assert(kinds_are<Plan<S1, PA>>({FILL}) && Plan<S1, PA>::trace() == "S(1)->P(avg)");

// R -> P(op): a local partition.
using R_PS = Plan<R1, PS>;
static_assert(kinds_are<R_PS>({PART}) && R_PS::step(0).op == reduce_op::sum && local_only<R_PS>());
static_assert(R_PS::trace() == "R->P(sum)");
static_assert(Plan<R1, PM>::trace() == "R->P(max)");

// P(sum) -> P(max): through a state without partials (docs/redistribute.md). The cheapest
// is a reduce_scatter into S(0), then a fill with max's identity; it beats an all_reduce
// followed by a partition, which moves twice the bytes.
using PS_PM = Plan<PS, PM>;
static_assert(kinds_are<PS_PM>({RS, FILL}));
static_assert(PS_PM::step(0).op == reduce_op::sum && PS_PM::step(1).op == reduce_op::max);
static_assert(PS_PM::collectives() == 1 && PS_PM::cost_us() < P_R::cost_us());
static_assert(PS_PM::trace() == "P(sum)->S(0)->P(max)");
static_assert(chained<PS_PM, PS, PM>());

// Nothing to do: no steps, not a gather and a chunk.
static_assert(empty_plan<Plan<R1, R1>>() && Plan<R1, R1>::trace() == "R");
static_assert(empty_plan<Plan<S0, S0>>() && empty_plan<Plan<PS, PS>>() && empty_plan<Plan<PM, PM>>());
static_assert(empty_plan<Plan<S1, Sm1>>() && empty_plan<Plan<Sm1, S1>>());  // S(-1) is S(1)

// ===========================================================================
// 2-d meshes: one collective over several mesh dims, shard order
// ===========================================================================
using M22 = mesh<2, 2>;
using RR = L<M22, E88, R, R>;
using S0S0 = L<M22, E88, S<0>, S<0>>;
using S0S1 = L<M22, E88, S<0>, S<1>>;
using S1S0 = L<M22, E88, S<1>, S<0>>;
using S1S1 = L<M22, E88, S<1>, S<1>>;
using S0R = L<M22, E88, S<0>, R>;
using RS0 = L<M22, E88, R, S<0>>;
using PP = L<M22, E88, Psum, Psum>;
using PMPM = L<M22, E88, Pmax, Pmax>;
using S0S0_rev = L<M22, E88, S<0, 1>, S<0, 0>>;  // mesh dim 1 splits first
using S0S0_fwd = L<M22, E88, S<0, 0>, S<0, 1>>;  // the default order, spelled out

// [S0, S0] -> [R, R]: ONE all_gather over mesh dims {0, 1}.
using SS_RR = Plan<S0S0, RR>;
static_assert(kinds_are<SS_RR>({AG}) && masks_are<SS_RR>({0b11}));
static_assert(SS_RR::trace() == "S(0)[0]S(0)[1]->RR");
// [S0, S1] -> [R, R]: the two gathers are on different tensor dims; still one collective.
static_assert(kinds_are<Plan<S0S1, RR>>({AG}) && masks_are<Plan<S0S1, RR>>({0b11}));
static_assert(Plan<S0S1, RR>::trace() == "S(0)S(1)->RR");

// [P, P] -> [R, R]: one all_reduce; -> [S0, S0] and [S0, S1]: one reduce_scatter.
using PP_RR = Plan<PP, RR>;
static_assert(kinds_are<PP_RR>({AR}) && masks_are<PP_RR>({0b11}) && PP_RR::trace() == "P(sum)P(sum)->RR");
using PP_S0S0 = Plan<PP, S0S0>;
static_assert(kinds_are<PP_S0S0>({RS}) && masks_are<PP_S0S0>({0b11}));
static_assert(PP_S0S0::trace() == "P(sum)P(sum)->S(0)[0]S(0)[1]");
static_assert(kinds_are<Plan<PP, S0S1>>({RS}) && Plan<PP, S0S1>::trace() == "P(sum)P(sum)->S(0)S(1)");

// [S0, S1] -> [S1, S0]: one all_to_all over both mesh dims.
using swap = Plan<S0S1, S1S0>;
static_assert(kinds_are<swap>({A2A}) && masks_are<swap>({0b11}) && swap::trace() == "S(0)S(1)->S(1)S(0)");
// [S0, S0] -> [S1, S1]: one all_to_all too.
static_assert(kinds_are<Plan<S0S0, S1S1>>({A2A}) && masks_are<Plan<S0S0, S1S1>>({0b11}));
// [S0, S1] -> [S0, S0]: only mesh dim 1 moves.
static_assert(kinds_are<Plan<S0S1, S0S0>>({A2A}) && masks_are<Plan<S0S1, S0S0>>({0b10}));
static_assert(Plan<S0S1, S0S0>::trace() == "S(0)S(1)->S(0)[0]S(0)[1]");
// [S0, R] -> [S1, R]: one all_to_all over mesh dim 0 alone.
static_assert(kinds_are<Plan<S0R, L<M22, E88, S<1>, R>>>({A2A}));

// Nested shards come off inside-out: [S0, S0] -> [R, S0] cannot drop mesh dim 0 first, so
// it gathers both (one collective) and chunks again.
using SS_RS = Plan<S0S0, RS0>;
static_assert(kinds_are<SS_RS>({AG, CHUNK}) && masks_are<SS_RS>({0b11, 0b10}));
static_assert(SS_RS::trace() == "S(0)[0]S(0)[1]->RR->RS(0)");
// [S0, R] -> [R, S0]: gather mesh dim 0, chunk mesh dim 1.
static_assert(Plan<S0R, RS0>::trace() == "S(0)R->RR->RS(0)" && Plan<S0R, RS0>::collectives() == 1);

// Explicit shard orders: S(0)[1]S(0)[0] (mesh dim 1 splits first).
static_assert(S0S0_rev::spec().shard_order(0)[0] == 1);
using rev_RR = Plan<S0S0_rev, RR>;
static_assert(kinds_are<rev_RR>({AG}) && masks_are<rev_RR>({0b11}));
static_assert(rev_RR::trace() == "S(0)[1]S(0)[0]->RR");
using rev_fwd = Plan<S0S0_rev, S0S0>;
static_assert(kinds_are<rev_fwd>({AG, CHUNK, CHUNK}) && masks_are<rev_fwd>({0b11, 0b01, 0b10}));
static_assert(rev_fwd::trace() == "S(0)[1]S(0)[0]->RR->S(0)R->S(0)[0]S(0)[1]");
static_assert(empty_plan<Plan<S0S0_fwd, S0S0>>());  // the default order spelled out is the same layout
static_assert(!empty_plan<Plan<S0S0_rev, S0S0>>());

// Partial on several mesh dims.
using RR_PP = Plan<RR, PP>;
static_assert(kinds_are<RR_PP>({PART, PART}) && RR_PP::collectives() == 0 && local_only<RR_PP>());
static_assert(RR_PP::trace() == "RR->P(sum)R->P(sum)P(sum)");
using PP_PMPM = Plan<PP, PMPM>;
// One merged reduce_scatter, then a fill per mesh dim (which tensor dims the scatter uses
// and the order of the fills tie in cost; the search picks one).
static_assert(kinds_are<PP_PMPM>({RS, FILL, FILL}) && PP_PMPM::step(0).mesh_dims == 0b11);
static_assert((PP_PMPM::step(1).mesh_dims | PP_PMPM::step(2).mesh_dims) == 0b11);

// A shard and a partial on a tiny tensor: latency decides, so fill the shard and reduce
// over both mesh dims at once (one collective) rather than gather and reduce (two).
using E94 = extents<9, 4>;
using S0P_small = Plan<L<M22, E94, S<0>, Psum>, L<M22, E94, R, R>>;
static_assert(kinds_are<S0P_small>({FILL, AR}) && masks_are<S0P_small>({0b01, 0b11}));
static_assert(S0P_small::trace() == "S(0)P(sum)->P(sum)P(sum)->RR");

// 2x4: the all_to_all runs over all 8 ranks.
using M24 = mesh<2, 4>;
using swap24 = Plan<L<M24, E88, S<0>, S<1>>, L<M24, E88, S<1>, S<0>>>;
static_assert(kinds_are<swap24>({A2A}) && masks_are<swap24>({0b11}));

// ===========================================================================
// 3-d mesh 2x2x2, an 8x8x8 tensor
// ===========================================================================
using M222 = mesh<2, 2, 2>;
using E888 = extents<8, 8, 8>;
using RRR = L<M222, E888, R, R, R>;
using SSS0 = L<M222, E888, S<0>, S<0>, S<0>>;
using SSS1 = L<M222, E888, S<1>, S<1>, S<1>>;
using PPP = L<M222, E888, Psum, Psum, Psum>;

static_assert(kinds_are<Plan<SSS0, RRR>>({AG}) && masks_are<Plan<SSS0, RRR>>({0b111}));
static_assert(Plan<SSS0, RRR>::trace() == "S(0)[0]S(0)[1]S(0)[2]->RRR");
static_assert(kinds_are<Plan<PPP, RRR>>({AR}) && masks_are<Plan<PPP, RRR>>({0b111}));
static_assert(kinds_are<Plan<SSS0, SSS1>>({A2A}) && masks_are<Plan<SSS0, SSS1>>({0b111}));
static_assert(Plan<SSS0, SSS1>::trace() == "S(0)[0]S(0)[1]S(0)[2]->S(1)[0]S(1)[1]S(1)[2]");
// [S0, S1, S2] -> [S2, S1, S0]: one all_to_all over mesh dims {0, 2}; mesh dim 1 stays.
using rot = Plan<L<M222, E888, S<0>, S<1>, S<2>>, L<M222, E888, S<2>, S<1>, S<0>>>;
static_assert(kinds_are<rot>({A2A}) && masks_are<rot>({0b101}));
static_assert(rot::trace() == "S(0)S(1)S(2)->S(2)S(1)S(0)");
// [P, R, P] -> [R, R, R]: one all_reduce over {0, 2}, no step on mesh dim 1.
static_assert(kinds_are<Plan<L<M222, E888, Psum, R, Psum>, RRR>>({AR}));
static_assert(masks_are<Plan<L<M222, E888, Psum, R, Psum>, RRR>>({0b101}));
// Explicit order (1, 0, 2) on tensor dim 0, gathered in one collective.
using SSS0_102 = L<M222, E888, S<0, 1>, S<0, 0>, S<0, 2>>;
static_assert(kinds_are<Plan<SSS0_102, RRR>>({AG}) && masks_are<Plan<SSS0_102, RRR>>({0b111}));
static_assert(Plan<SSS0_102, RRR>::trace() == "S(0)[1]S(0)[0]S(0)[2]->RRR");
// Dropping the last split of an order keeps the others: (1, 0, 2) -> [R, S0, S0] only
// needs mesh dims 0 and 2 to move.
static_assert(Plan<SSS0_102, L<M222, E888, R, S<0>, S<0>>>::trace() == "S(0)[1]S(0)[0]S(0)[2]->RS(0)R->RS(0)[0]S(0)[1]");

// ===========================================================================
// Mesh dims of size 1 cost nothing and get no steps
// ===========================================================================
using M14 = mesh<1, 4>;
using M41 = mesh<4, 1>;
// A placement change on the unit dim alone: no step.
static_assert(empty_plan<Plan<L<M41, E88, S<0>, S<1>>, L<M41, E88, S<0>, S<0>>>>());
static_assert(empty_plan<Plan<L<M41, E88, S<0>, Psum>, L<M41, E88, S<0>, R>>>());
static_assert(empty_plan<Plan<L<M41, E88, S<0>, R>, L<M41, E88, S<0>, Pmax>>>());
static_assert(empty_plan<Plan<L<mesh<1>, E88, S<0>>, L<mesh<1>, E88, Psum>>>());
// The plan's states hold R on the unit dim, its ends included (same blocks as the caller's
// layouts); the trace shows the caller's layouts at the ends. The step works on the size-4
// dim only and costs exactly what the same move costs on a 1-d mesh of 4.
using unit_from = L<M14, E88, S<0>, S<1>>;
using unit_to = L<M14, E88, S<1>, R>;
using unit = Plan<unit_from, unit_to>;
static_assert(kinds_are<unit>({AG}) && masks_are<unit>({0b10}));
static_assert(unit::step(0).from.placements[0] == spmd::make_replicate() &&
              unit::step(0).from.placements[1] == spmd::make_shard(1, 0) &&
              unit::step(0).to.placements[0] == spmd::make_replicate() &&
              unit::step(0).to.placements[1] == spmd::make_replicate());
static_assert(unit::trace() == "S(0)S(1)->S(1)R");
static_assert(unit::cost_us() == Plan<S1, R1>::cost_us());
// On 2x1x2 a gather of [S0, S0, S0] runs over {0, 2} only.
using M212 = mesh<2, 1, 2>;
using unit3 = Plan<L<M212, E88, S<0>, S<0>, S<0>>, L<M212, E88, R, R, R>>;
static_assert(kinds_are<unit3>({AG}) && masks_are<unit3>({0b101}));
static_assert(unit3::cost_us() == Plan<S0S0, RR>::cost_us());

// ===========================================================================
// Dynamic extents: planned for a nominal 64 MiB tensor, where bandwidth decides
// ===========================================================================
using Ed = extents<dyn, 8>;
using dyn_S0_R = Plan<L<M4, Ed, S<0>>, L<M4, Ed, R>>;
static_assert(dyn_S0_R::global_bytes == spmd::nominal_dynamic_bytes);
static_assert(kinds_are<dyn_S0_R>({AG}) && dyn_S0_R::cost_us() > S0_R::cost_us());
static_assert(Plan<L<M4, extents<dyn, dyn>, S<0>>, L<M4, extents<dyn, dyn>, R>>::cost_us() == dyn_S0_R::cost_us());
// The [S0, P] -> [R, R] pair that fills on a tiny tensor gathers then reduces on a
// large one: filling would reduce 4x the bytes.
using Ed2 = extents<dyn, 4>;
using S0P_large = Plan<L<M22, Ed2, S<0>, Psum>, L<M22, Ed2, R, R>>;
static_assert(S0P_large::collectives() == 2 && S0P_large::count(AG) == 1 && S0P_large::count(AR) == 1);
static_assert(S0P_large::count(FILL) == 0);

// ===========================================================================
// The cost model: local steps are free; collectives cost what they move
// ===========================================================================
// all_to_all moves f(n-1)/n, all_gather f(n-1); all_reduce moves twice a reduce_scatter
// and has twice the hops.
static_assert(0 < S0_S1::cost_us() && S0_S1::cost_us() < S0_R::cost_us());
static_assert(Plan<PS, S0>::cost_us() < P_R::cost_us());
static_assert(S0_R::cost_us() < P_R::cost_us());
// A reduce_scatter of the whole tensor moves (n-1)/n of it, as much as an all_gather of
// a quarter: the same cost.
static_assert(Plan<PS, S0>::cost_us() == S0_R::cost_us());
// Cost grows with the element size and with the group.
static_assert(Plan<S0, R1, double>::cost_us() > S0_R::cost_us());
static_assert(Plan<S0, R1, double>::global_bytes == 2 * S0_R::global_bytes);
static_assert(Plan<L<mesh<8>, E88, S<0>>, L<mesh<8>, E88, R>>::cost_us() > S0_R::cost_us());
// One collective over {0, 1} is cheaper than the two single-dim gathers it replaces.
static_assert(SS_RR::cost_us() < Plan<S0S0, S0R>::cost_us() + Plan<S0R, RR>::cost_us());
// Two mesh dims of 2 cost as much as one of 4: the group is what counts.
static_assert(SS_RR::cost_us() == S0_R::cost_us());
// Fixed cost of a collective: 6.6 us plus 0.6 us per hop, here on a zero-size tensor.
using E0 = extents<0, 8>;
static_assert(Plan<L<M4, E0, S<0>>, L<M4, E0, R>>::cost_us() == 6.6 + 0.6 * 3);
static_assert(Plan<L<M4, E0, Psum>, L<M4, E0, R>>::cost_us() == 6.6 + 0.6 * 6);

// The planner searched few states for these (the compile-time budget is small).
static_assert(S0_R::result.states <= 6 && rot::result.states < 200);

}  // namespace

int main() { return 0; }
