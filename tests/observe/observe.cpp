// tests/observe/observe.cpp — the log lines (spmd::log) and the timeline (spmd::timeline) of
// a known program on the simulation: the words of each decision, the bytes counted by hand,
// every step of the plan on every rank's lane in order, and silence when nothing watches.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/observe.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/matmul.hpp"

using namespace spmd;

namespace {

using M4 = mesh<4>;
using M24 = mesh<2, 4>;

bool has(const std::vector<std::string>& lines, const std::string& a, const std::string& b = "") {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(a) != std::string::npos && l.find(b) != std::string::npos;
  });
}

// In the folder meson runs the test in (the build's), named for this test.
std::string temp_file(const char* name) { return std::string("observe-test") + name; }

}  // namespace

TEST_CASE("nothing is logged or recorded unless asked", "[observe]") {
  REQUIRE_FALSE(observe::active());  // the test runs without SPMD_LOG and SPMD_TRACE
  log::capture c;
  auto x = sim::distribute_tensor<layout<M4, placements<shard<0>>, extents<8, 16>>>(std::vector<float>(128, 1.f));
  auto y = sim::redistribute<placements<replicate>>(x);
  (void)runtime::add(y, y);
  CHECK(c.lines().empty());
}

TEST_CASE("SPMD_LOG's lines: redistribute and ops, with the plan and bytes per rank", "[observe]") {
  log::capture c;
  log::enable("redistribute,ops");
  std::vector<float> a(8 * 16), w(16 * 4);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5);
  auto x = sim::distribute_tensor<layout<M4, placements<shard<0>>, extents<8, 16>>>(a);
  // S(0) -> R of f32[8, 16] over 4 ranks: each rank receives the 3 blocks it lacks,
  // 3 * 2 * 16 * 4 bytes = 384.
  auto r = sim::redistribute<placements<replicate>>(x);
  CHECK(has(c.lines(), "[spmd] redistribute f32[8, 16] S(0) on mesh(4) -> R: plan S(0)->R, 1 step (all_gather over mesh dims 0, 384 B/rank), "
                         "384 B/rank, compile time"));
  // A matmul of R x by S(0) w: the compiler chunks x to S(1) (free) and makes a P(sum); the
  // op line comes first, then the redistribute it causes, with 0 bytes (a chunk moves none).
  auto wt = sim::distribute_tensor<layout<M4, placements<shard<0>>, extents<16, 4>>>(w);
  c.clear();
  auto y = runtime::matmul(r, wt);
  REQUIRE(c.lines().size() == 2);
  CHECK(c.lines()[0] ==
        "[spmd] op matmul: in0 f32[8, 16] R on mesh(4) -> S(1) (redistribute), in1 f32[16, 4] S(0) on mesh(4) (kept) "
        "=> out f32 P(sum), compile time");
  CHECK(c.lines()[1] == "[spmd] redistribute f32[8, 16] R on mesh(4) -> S(1): plan R->S(1), 1 step (chunk over mesh dims 0, 0 B/rank), "
                              "0 B/rank, compile time");
  CHECK(y.full_tensor().size() == 32);

  // steps: one line per step as it runs.
  log::disable();
  log::enable("steps");
  c.clear();
  (void)sim::redistribute<placements<replicate>>(x);
  REQUIRE(c.lines().size() == 1);
  CHECK(c.lines()[0] == "[spmd]   step 1/1 all_gather over mesh dims 0, 384 B/rank: S(0)->R");
  log::disable();
  c.clear();
  (void)sim::redistribute<placements<replicate>>(x);
  CHECK(c.lines().empty());
  CHECK_FALSE(observe::active());
}

namespace {
/// The steps a redistribute line names in its parentheses: "kind over mesh dims 0,1, N B/rank".
std::vector<std::string> logged_steps(const std::string& line) {
  const std::size_t open = line.find(" step"), lp = line.find(" (", open), rp = line.find("), ", lp);
  std::vector<std::string> out;
  if (open == std::string::npos || lp == std::string::npos || rp == std::string::npos) return out;
  const std::string list = line.substr(lp + 2, rp - lp - 2);
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find("; ", at), list.size());
    out.push_back(list.substr(at, end - at));
    at = end + 2;
  }
  return out;
}
/// The same words written from a compile-time plan's steps, field by field: the kind (with
/// the reduction's op), the mesh dims in the mask, the busiest rank's bytes.
template <class P>
std::vector<std::string> plan_steps(const shape_vec& global, index_t element_bytes) {
  std::vector<std::string> out;
  for (int i = 0; i < P::size(); ++i) {
    const plan_step s = P::step(i);
    std::string t = step_kind_name(s.kind);
    if (s.kind == step_kind::all_reduce || s.kind == step_kind::reduce_scatter)
      t += std::string("(") + reduce_op_name(s.op) + ")";
    t += " over mesh dims ";
    std::string dims;
    for (int d = 0; d < s.from.mesh.size(); ++d)
      if (in_mask(s.mesh_dims, d)) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    out.push_back(t + dims + ", " + std::to_string(traffic(s, global, element_bytes).max_rank_bytes) + " B/rank");
  }
  return out;
}
}  // namespace

TEST_CASE("an operator's own redistribute names every step of the plan it runs", "[observe]") {
  using LX = layout<M24, placements<shard<0>, shard<1>>, extents<8, 12>>;
  using LY = layout<M24, placements<shard<1>, shard<0>>, extents<8, 12>>;
  std::vector<float> a(96);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  auto x = sim::distribute_tensor<LX>(a);
  auto y = sim::distribute_tensor<LY>(a);
  log::capture c;
  log::enable("redistribute,ops");
  auto z = runtime::add(x, y);
  log::disable();
  REQUIRE(c.lines().size() == 2);
  CHECK(c.lines()[0].find("in1 f32[8, 12] S(1)S(0) on mesh(2, 4) -> S(0)S(1) (redistribute)") != std::string::npos);
  const std::string& line = c.lines()[1];
  CHECK(line.find("[spmd] redistribute f32[8, 12] S(1)S(0) on mesh(2, 4) -> S(0)S(1): plan ") == 0);
  using P = plan_of<LY, LX, float>;
  static_assert(P::size() >= 1);
  CHECK(line.find(std::string("plan ") + std::string(P::trace().view()) + ", ") != std::string::npos);
  CHECK(logged_steps(line) == plan_steps<P>(LX{}.extents().to_vec(), 4));
  CHECK(z.full_tensor().size() == 96);
}

TEST_CASE("log::enable names a word it does not know", "[observe]") {
  try {
    log::enable("redistribute,bogus");
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("bogus") != std::string::npos);
  }
  CHECK_FALSE(observe::active());
}

TEST_CASE("a timeline: every step of a known plan on every rank's lane, in order, inside its redistribute", "[observe]") {
  using Src = layout<M24, placements<shard<0>, shard<1>>, extents<8, 12>>;
  using Dst = layout<M24, placements<shard<1>, shard<0>>, extents<8, 12>>;
  using P = plan_of<Src, Dst, float>;
  static_assert(P::size() >= 1);
  std::vector<float> a(8 * 12);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  auto x = sim::distribute_tensor<Src>(a);
  const std::string file = temp_file("-spmd-trace.json");
  {
    timeline::session s(file);
    auto y = sim::redistribute<Dst::placements_type>(x);
    auto z = runtime::mul(y, y);
    (void)z;
  }
  CHECK_FALSE(observe::active());
  std::ifstream in(file);
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  std::remove(file.c_str());
  std::map<int, std::vector<nlohmann::json>> lanes;
  std::map<int, std::string> names;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") names[e.at("tid").get<int>()] = e.at("args").at("name");
    if (e.at("ph") != "X") continue;
    CHECK(e.at("ts").get<double>() >= 0);
    CHECK(e.at("dur").get<double>() >= 0);
    lanes[e.at("tid").get<int>()].push_back(e);
  }
  REQUIRE(lanes.size() == 8);
  for (int r = 0; r < 8; ++r) {
    CHECK(names[r] == "rank " + std::to_string(r));
    std::vector<nlohmann::json> ev = lanes[r];
    std::stable_sort(ev.begin(), ev.end(), [](const nlohmann::json& a, const nlohmann::json& b) { return a.at("ts").get<double>() < b.at("ts").get<double>(); });
    std::vector<std::string> steps;
    const nlohmann::json* redist = nullptr;
    for (const auto& e : ev) {
      if (e.at("cat") == "step") steps.push_back(e.at("name"));
      if (e.at("cat") == "redistribute") redist = &e;
    }
    REQUIRE(steps.size() == static_cast<std::size_t>(P::size()));
    for (int i = 0; i < P::size(); ++i) CHECK(steps[static_cast<std::size_t>(i)] == step_kind_name(P::step(i).kind));
    REQUIRE(redist != nullptr);
    CHECK(redist->at("args").at("plan") == std::string(P::trace().view()));
    CHECK(redist->at("args").at("from") == "S(0)S(1)");
    const double t0 = redist->at("ts"), t1 = t0 + redist->at("dur").get<double>();
    for (const auto& e : ev)
      if (e.at("cat") == "step") {
        CHECK(e.at("ts").get<double>() >= t0);
        CHECK(e.at("ts").get<double>() + e.at("dur").get<double>() <= t1 + 1e-3);
        CHECK(e.at("args").contains("bytes_per_rank"));
      }
    CHECK(std::count_if(ev.begin(), ev.end(), [](const nlohmann::json& e) { return e.at("cat") == "op" && e.at("name") == "mul"; }) == 1);
  }
}

TEST_CASE("a timeline session needs a file it can write: refused when it opens, close() says a failed write", "[observe]") {
  CHECK_THROWS_AS(timeline::session(""), std::invalid_argument);
  CHECK_THROWS_WITH(timeline::session("/nonexistent-spmd-dir/t.json"), Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(timeline::session("/tmp"), Catch::Contains("/tmp: is a directory"));
  CHECK_FALSE(observe::active());
  // The folder goes away while the session records: close() throws, naming the file.
  char dir[] = "/tmp/spmd_session_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string file = std::string(dir) + "/t.json";
  timeline::session s(file);
  (void)sim::redistribute<placements<replicate>>(
      sim::distribute_tensor<layout<M4, placements<shard<0>>, extents<8>>>(std::vector<float>(8, 1.f)));
  REQUIRE(::rmdir(dir) == 0);
  CHECK_THROWS_WITH(s.close(), Catch::Contains(file + ": the directory " + dir + " does not exist"));
  CHECK_FALSE(observe::active());
  CHECK_NOTHROW(s.close());  // once closed, closed
}
