// Pipeline schedules (spmd/plan/pipeline_schedule.hpp) built at run time for every shape up
// to 8 ranks, 4 stages per rank and 64 microbatches, and checked three ways:
//   - the library's own table check (first_fault);
//   - an independent executor: ranks that advance through their slots at random speeds, a
//     slot's transfers completing only once both ends have posted them, each rank's data
//     held as values (which forward outputs and gradients it has): it must finish, every
//     task must find its inputs, and every stage-microbatch must have run F and its backward
//     exactly once;
//   - the published formulas for the length, the bubble and the peak.
// And tables edited into faults, which the check must name.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <set>
#include <tuple>
#include <vector>

#include <spmd/plan/pipeline_schedule.hpp>

namespace pp = spmd::pp;
using pp::schedule_kind;

namespace {

constexpr schedule_kind all_kinds[] = {schedule_kind::gpipe, schedule_kind::one_f_one_b,
                                       schedule_kind::interleaved, schedule_kind::zero_bubble};

/// Runs a table as independent processes would. A rank's slot has two phases: it runs the
/// slot's task on the data it holds, then posts its transfers (a send carries what the rank
/// holds then) and waits until every peer of the slot has posted its side; only then is a
/// receive's data held. One rank at a time, chosen at random among those that can move,
/// takes a step. Returns an empty string, or what went wrong.
std::string execute(const pp::table& t, pp::shape dims, unsigned seed) {
  std::mt19937 rng(seed);
  const int n = t.ranks;
  std::vector<int> at(static_cast<std::size_t>(n), 0);         // the slot each rank is in
  std::vector<bool> posted(static_cast<std::size_t>(n), false);  // its task run, transfers posted
  // what each rank holds: (0, s, m) stage s's output of microbatch m, (1, s, m) the gradient
  // stage s sends back
  using item = std::tuple<int, int, int>;
  std::vector<std::set<item>> held(static_cast<std::size_t>(n));
  std::map<std::tuple<int, int, int>, item> mailbox;  // (receiver, slot, sender) -> data
  std::map<std::tuple<int, int, int>, int> runs;      // (F 0 / input backward 1 / weight 2, s, m)
  auto has = [&](int r, int kind, int s, int m) { return held[std::size_t(r)].count({kind, s, m}) > 0; };
  auto run_task = [&](int r, const pp::cell& c) -> std::string {
    if (c.continues || c.work.kind == pp::work::idle) return {};
    const int s = c.work.stage, m = c.work.microbatch, last = dims.stages() - 1;
    if (dims.rank_of(s) != r) return "stage on the wrong rank";
    switch (c.work.kind) {
      case pp::work::forward:
        if (s > 0 && !has(r, 0, s - 1, m)) return "forward without its input";
        held[std::size_t(r)].insert({0, s, m});
        ++runs[{0, s, m}];
        break;
      case pp::work::backward:
      case pp::work::backward_input:
        if (!has(r, 0, s, m)) return "backward without its forward";
        if (s < last && !has(r, 1, s + 1, m)) return "backward without its gradient";
        held[std::size_t(r)].insert({1, s, m});
        ++runs[{1, s, m}];
        if (c.work.kind == pp::work::backward) ++runs[{2, s, m}];
        break;
      case pp::work::backward_weight:
        if (!has(r, 1, s, m)) return "weight gradient before the input gradient";
        ++runs[{2, s, m}];
        break;
      case pp::work::idle: break;
    }
    return {};
  };
  int done = 0;
  while (done < n) {
    std::vector<int> can;
    for (int r = 0; r < n; ++r) {
      const int slot = at[std::size_t(r)];
      if (slot >= t.slots) continue;
      if (!posted[std::size_t(r)]) {
        can.push_back(r);
        continue;
      }
      const pp::cell& c = t(slot, r);
      auto peer_posted = [&](int p) {
        return at[std::size_t(p)] > slot || (at[std::size_t(p)] == slot && posted[std::size_t(p)]);
      };
      bool ok = c.send.peer < 0 || peer_posted(c.send.peer);
      for (const pp::transfer& x : c.recv) ok = ok && (x.peer < 0 || peer_posted(x.peer));
      if (ok) can.push_back(r);
    }
    if (can.empty()) {
      std::string s = "deadlock at slots";
      for (int r = 0; r < n; ++r) s += " " + std::to_string(at[std::size_t(r)]);
      return s;
    }
    const int r = can[std::uniform_int_distribution<std::size_t>(0, can.size() - 1)(rng)];
    const int slot = at[std::size_t(r)];
    const pp::cell& c = t(slot, r);
    if (!posted[std::size_t(r)]) {  // phase one: the task, then post the send
      if (std::string e = run_task(r, c); !e.empty()) return e;
      if (c.send.peer >= 0) {
        const item x{c.send.gradient ? 1 : 0, c.send.stage, c.send.microbatch};
        if (!held[std::size_t(r)].count(x)) return "sends what it does not hold";
        mailbox[{c.send.peer, slot, r}] = x;
      }
      posted[std::size_t(r)] = true;
      continue;
    }
    // phase two: every peer has posted; take what was sent
    for (const pp::transfer& x : c.recv) {
      if (x.peer < 0) continue;
      const auto box = mailbox.find({r, slot, x.peer});
      const item want{x.gradient ? 1 : 0, x.stage, x.microbatch};
      if (box == mailbox.end() || box->second != want) return "receives what was not sent";
      held[std::size_t(r)].insert(want);
      mailbox.erase(box);
    }
    posted[std::size_t(r)] = false;
    if (++at[std::size_t(r)] == t.slots) ++done;
  }
  if (!mailbox.empty()) return "a send nobody received";
  for (int s = 0; s < dims.stages(); ++s)
    for (int m = 0; m < dims.microbatches; ++m)
      for (int k = 0; k < 3; ++k)
        if (runs[{k, s, m}] != 1) return "a task ran " + std::to_string(runs[{k, s, m}]) + " times";
  return {};
}

int idle_slots(const pp::table& t) { return t.slots * t.ranks - pp::busy_slots(t); }

}  // namespace

TEST_CASE("every built-in schedule runs, for every shape up to 8 ranks and 64 microbatches",
          "[pipeline]") {
  int built = 0;
  for (schedule_kind k : all_kinds)
    for (int p = 1; p <= 8; ++p)
      for (int v = 1; v <= (k == schedule_kind::interleaved ? 4 : 1); ++v)
        for (int m = 1; m <= 64; ++m) {
          const pp::shape dims{p, v, m};
          INFO(pp::name(k) << " ranks " << p << " virtual " << v << " microbatches " << m);
          const pp::built b = pp::build(k, dims);
          REQUIRE(b.info.failed.what == pp::fault::none);
          REQUIRE(pp::check(b.table, dims, k == schedule_kind::zero_bubble).what == pp::fault::none);
          if (m <= 12 && p <= 6) REQUIRE(execute(b.table, dims, unsigned(p * 1000 + v * 100 + m)).empty());
          // 3 slots of work per stage and microbatch: F, and B or I and W
          REQUIRE(pp::busy_slots(b.table) == 3 * m * v * p);
          ++built;
        }
  CHECK(built == 3 * 8 * 64 + 8 * 4 * 64);
}

TEST_CASE("lengths, bubbles and peaks against the published formulas", "[pipeline]") {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m) {
      INFO("ranks " << p << " microbatches " << m);
      const pp::shape dims{p, 1, m};
      const pp::built gpipe = pp::build(schedule_kind::gpipe, dims);
      const pp::built one = pp::build(schedule_kind::one_f_one_b, dims);
      const pp::built zb = pp::build(schedule_kind::zero_bubble, dims);
      // GPipe and 1F1B: 3(m + p − 1) slots, so the bubble is (p − 1)/(m + p − 1)
      CHECK(gpipe.table.slots == 3 * (m + p - 1));
      CHECK(one.table.slots == 3 * (m + p - 1));
      CHECK(idle_slots(one.table) * (m + p - 1) == one.table.slots * p * (p - 1));
      for (int r = 0; r < p; ++r) {
        CHECK(pp::peak_live(gpipe.table, r) == m);
        CHECK(pp::peak_live(one.table, r) == std::min(p - r, m));
        CHECK(pp::peak_live(zb.table, r) <= std::min(p, m));
      }
      // ZB-H1: 3m + p − 1 slots once m ≥ p (bubble p − 1 per rank); never longer than 1F1B
      if (m >= p) CHECK(zb.table.slots == 3 * m + p - 1);
      CHECK(zb.table.slots <= one.table.slots);
    }
  // interleaved: 3(vm + p − 1) slots when p divides m; rank r holds
  // min(vm, (v − 1)·g + 2(p − 1 − r) + 1), g microbatches a round
  for (int p = 1; p <= 8; ++p)
    for (int v = 1; v <= 4; ++v)
      for (int m = p; m <= 32; m += p) {
        INFO("ranks " << p << " virtual " << v << " microbatches " << m);
        const pp::built b = pp::build(schedule_kind::interleaved, {p, v, m});
        CHECK(b.table.slots == 3 * (v * m + p - 1));
        const int g = m / std::max(1, m / p);  // p divides m, so ⌊m/p⌋ divides it
        for (int r = 0; r < p; ++r)
          CHECK(pp::peak_live(b.table, r) == std::min(v * m, (v - 1) * g + 2 * (p - 1 - r) + 1));
      }
}

TEST_CASE("the compile-time table is the run-time table", "[pipeline]") {
  using s = pp::schedule<schedule_kind::interleaved, 2, 3, 2>;
  const pp::built b = pp::build(schedule_kind::interleaved, {2, 2, 3});
  REQUIRE(b.table.slots == s::slots);
  for (int t = 0; t < s::slots; ++t)
    for (int r = 0; r < 2; ++r) {
      CHECK(b.table(t, r).work == s::table(t, r).work);
      CHECK(b.table(t, r).send == s::table(t, r).send);
      CHECK(b.table(t, r).recv == s::table(t, r).recv);
    }
}

TEST_CASE("edited tables: the check names the first fault and where", "[pipeline]") {
  const pp::shape dims{4, 1, 4};
  const pp::built b = pp::build(schedule_kind::one_f_one_b, dims);
  REQUIRE(b.table.slots == 21);
  // rank 1's forward of microbatch 0 ends in slot 1 and goes to rank 2
  REQUIRE(b.table(1, 1).send == pp::transfer{2, 1, 0, false});
  SECTION("a receive dropped") {
    pp::table t = b.table;
    t(1, 2).recv = {};
    const pp::fault_at f = pp::check(t, dims, false);
    CHECK(f.what == pp::fault::unpaired);
    CHECK(f.slot == 1);
    CHECK(f.rank == 1);
    CHECK(!execute(t, dims, 1).empty());
  }
  SECTION("a send dropped") {
    pp::table t = b.table;
    t(1, 1).send = {};
    const pp::fault_at f = pp::check(t, dims, false);
    CHECK(f.what == pp::fault::unpaired);
    CHECK(f.slot == 1);
    CHECK(f.rank == 2);
  }
  SECTION("a forward moved before its input") {
    pp::table t = b.table;
    // rank 2's forward of microbatch 0 (slot 2) moved into slot 1, when its input arrives
    REQUIRE(t(2, 2).work == pp::task{pp::work::forward, 2, 0});
    std::swap(t(1, 2).work, t(2, 2).work);
    const pp::fault_at f = pp::check(t, dims, false);
    CHECK(f.what == pp::fault::input_missing);
    CHECK(f.slot == 1);
    CHECK(f.rank == 2);
    CHECK(execute(t, dims, 2) == "forward without its input");
  }
  SECTION("a task on a rank that does not hold its stage") {
    pp::table t = b.table;
    t(5, 0).work = pp::task{pp::work::forward, 1, 3};
    CHECK(pp::check(t, dims, false).what == pp::fault::wrong_rank);
  }
  SECTION("a backward left out") {
    pp::table t = b.table;
    const int last = t.slots - 2;
    REQUIRE(t(last, 0).work.kind == pp::work::backward);
    t(last, 0) = {};
    t(last + 1, 0) = {};
    const pp::fault_at f = pp::check(t, dims, false);
    CHECK(f.what == pp::fault::incomplete);
  }
  SECTION("a task twice") {
    pp::table t = b.table;
    REQUIRE(t(4, 0).work.kind == pp::work::idle);
    t(4, 0).work = pp::task{pp::work::forward, 0, 0};
    CHECK(pp::check(t, dims, false).what == pp::fault::repeated);
  }
}

namespace {

/// A program of one's own: GPipe's order on every rank but the last, which runs 1F1B's (no
/// forward waits on a backward before it on the others, so it runs).
struct last_rank_1f1b {
  pp::shape dims;
  constexpr int length(int) const { return 2 * dims.microbatches; }
  constexpr pp::task at(int rank, int i) const {
    const auto k = rank == dims.ranks - 1 ? schedule_kind::one_f_one_b : schedule_kind::gpipe;
    return pp::program_task(k, dims, rank, i);
  }
  constexpr bool defers_weight() const { return false; }
  constexpr int live_cap(int) const { return 0; }
};

/// Rank 0 backward before its second forward; rank 1 both forwards first: a deadlock.
struct crossed {
  constexpr int length(int) const { return 4; }
  constexpr pp::task at(int rank, int i) const {
    using pp::work;
    constexpr pp::task order[2][4] = {
        {{work::forward, 0, 0}, {work::backward, 0, 0}, {work::forward, 0, 1}, {work::backward, 0, 1}},
        {{work::forward, 1, 0}, {work::forward, 1, 1}, {work::backward, 1, 0}, {work::backward, 1, 1}}};
    return order[rank][i];
  }
  constexpr bool defers_weight() const { return false; }
  constexpr int live_cap(int) const { return 0; }
};

template <class Program>
pp::summary run_program(const Program& program, pp::shape dims) {
  std::vector<int> ints(std::size_t(spmd::pp::schedule_detail::layout_of(dims).size()));
  std::vector<pp::task> queue(std::size_t(spmd::pp::schedule_detail::layout_of(dims).queue_size()));
  return pp::run(program, dims, ints, queue, spmd::pp::schedule_detail::no_table{});
}

}  // namespace

TEST_CASE("programs of one's own: run, or the deadlock's slot", "[pipeline]") {
  const pp::summary ok = run_program(last_rank_1f1b{{3, 1, 4}}, {3, 1, 4});
  CHECK(ok.failed.what == pp::fault::none);
  CHECK(ok.slots == 3 * (4 + 3 - 1));
  // the other way round (1F1B before a last rank of GPipe's order) deadlocks: rank 1 waits
  // for microbatch 0's gradient before its third forward, which the last rank needs first
  struct first_1f1b : last_rank_1f1b {
    constexpr pp::task at(int rank, int i) const {
      const auto k = rank == dims.ranks - 1 ? schedule_kind::gpipe : schedule_kind::one_f_one_b;
      return pp::program_task(k, dims, rank, i);
    }
  };
  const pp::summary hang = run_program(first_1f1b{{{3, 1, 4}}}, {3, 1, 4});
  CHECK(hang.failed.what == pp::fault::deadlock);
  const pp::summary bad = run_program(crossed{}, {2, 1, 2});
  CHECK(bad.failed.what == pp::fault::deadlock);
  CHECK(bad.failed.slot == 2);
  CHECK(bad.failed.rank == 0);
}
