// tests/training/resume: training checkpoints — 20 steps against 10, saved, loaded into new
// parameters and a new optimizer, and 10 more (bit for bit on the same mesh, AdamW and SGD);
// resumed on another parallelism (FSDP 2×4 -> DDP 8 -> one device, within f64 tolerance); the
// file's names and metadata; bad checkpoints refused naming what is wrong, changing nothing,
// and a failed save leaving the previous checkpoint whole.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data_parallel.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/io/training_state.hpp"
#include "spmd/runtime/data_parallel/ddp.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;
using dp_test::close;
using dp_test::batch, dp_test::in, dp_test::hidden, dp_test::out;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("spmd_resume_" + name + ".safetensors")).string();
}

enum class mode { one, fsdp, ddp };

/// The dp_test model's parameters on mesh M (1-d, or 2-d with dp = dim 0 and the second dim
/// replicated) in the layouts mode needs (one: replicated).
template <class M, mode Mode>
struct model {
  using PW = std::conditional_t<
      M::ndim == 1, std::conditional_t<Mode == mode::fsdp, placements<shard<0>>, placements<replicate>>,
      std::conditional_t<Mode == mode::fsdp, placements<shard<0>, replicate>, placements<replicate, replicate>>>;
  rt::variable<double, layout<M, PW, extents<hidden, in>>, sim::backend> w1;
  rt::variable<double, layout<M, PW, extents<hidden>>, sim::backend> b1;
  rt::variable<double, layout<M, PW, extents<out, hidden>>, sim::backend> w2;
  rt::variable<double, layout<M, PW, extents<out>>, sim::backend> b2;

  static model make() {
    const dp_test::init init;
    return {rt::requires_grad(sim::distribute_tensor<layout<M, PW, extents<hidden, in>>>(init.w1), "w1"),
            rt::requires_grad(sim::distribute_tensor<layout<M, PW, extents<hidden>>>(init.b1), "b1"),
            rt::requires_grad(sim::distribute_tensor<layout<M, PW, extents<out, hidden>>>(init.w2), "w2"),
            rt::requires_grad(sim::distribute_tensor<layout<M, PW, extents<out>>>(init.b2), "b2")};
  }

  /// Steps [from, to) of training; the losses.
  template <class Opt>
  std::vector<double> train(Opt& opt, int from, int to) {
    std::vector<double> losses;
    using S = std::conditional_t<M::ndim == 2, placements<shard<0>, replicate>,
                                 std::conditional_t<(M::size > 1), placements<shard<0>>, placements<replicate>>>;
    const dp_test::init init;
    for (int step = from; step < to; ++step) {
      const auto x = sim::distribute_tensor<layout<M, S, extents<batch, in>>>(init.x(step));
      const auto t = sim::distribute_tensor<layout<M, S, extents<batch, out>>>(init.t(step));
      auto loss = [&] {
        if constexpr (Mode == mode::fsdp) {
          auto up = rt::fully_shard<0>(w1, b1);
          auto down = rt::fully_shard<0>(w2, b2);
          auto h = up.forward([&](const auto& a, const auto& b) { return rt::relu(rt::linear(rt::as_variable(x), a, b)); });
          auto d = down.forward([&](const auto& a, const auto& b) { return rt::linear(h, a, b); }) - t;
          return rt::mean<>(d * d);
        } else if constexpr (Mode == mode::ddp) {
          auto m = rt::ddp<0>(w1, b1, w2, b2);
          const auto [a1, c1, a2, c2] = m.params();
          return dp_test::loss(x, t, a1, c1, a2, c2);
        } else {
          return dp_test::loss(x, t, w1, b1, w2, b2);
        }
      }();
      losses.push_back(loss.full_tensor()[0]);
      loss.backward();
      opt.step();
      opt.zero_grad();
    }
    return losses;
  }
  std::vector<double> all() const {
    std::vector<double> v;
    for (const auto& t : {w1.full_tensor(), b1.full_tensor(), w2.full_tensor(), b2.full_tensor()})
      v.insert(v.end(), t.begin(), t.end());
    return v;
  }
};

template <class M, mode Mode>
auto adamw_of(model<M, Mode>& m) {
  return rt::adamw({.lr = 0.01}, m.w1, m.b1, m.w2, m.b2);
}

}  // namespace

TEST_CASE("resume: 20 steps = 10, save, load into new parameters, 10 more — bit for bit", "[resume]") {
  using M = mesh<4>;
  const std::string path = temp_path("same");
  auto straight = model<M, mode::fsdp>::make();
  auto opt = adamw_of(straight);
  std::vector<double> losses = straight.train(opt, 0, 20);

  auto first = model<M, mode::fsdp>::make();
  auto opt1 = adamw_of(first);
  std::vector<double> resumed = first.train(opt1, 0, 10);
  generator gen(1234);
  gen.set_offset(96);
  // [docs:resume]
  io::save_training_state(path, opt1, {.step = 10, .generator = gen.get_state()});

  auto second = model<M, mode::fsdp>::make();  // the initial values: the load must replace them
  auto opt2 = adamw_of(second);
  const io::training_meta meta = io::load_training_state(path, opt2);  // parameters, state, step
  // [/docs:resume]
  CHECK(meta.step == 10);
  REQUIRE(meta.generator.has_value());
  CHECK(meta.generator->seed == 1234);
  CHECK(meta.generator->offset == 96);
  REQUIRE(opt2.state_of<0>().has_value());
  CHECK(opt2.state_of<0>()->step == 10);
  const std::vector<double> rest = second.train(opt2, 10, 20);
  resumed.insert(resumed.end(), rest.begin(), rest.end());
  CHECK(resumed == losses);
  CHECK(second.all() == straight.all());

  // The file as other tools see it: torch's state names, the global values.
  const io::safetensors_file f(path);
  for (const char* name : {"w1", "w1.exp_avg", "w1.exp_avg_sq", "b2", "b2.exp_avg_sq"}) CHECK(f.contains(name));
  CHECK(f.metadata().at("spmd.optimizer") == "adamw");
  CHECK(f.metadata().at("w2.step") == "10");
  std::filesystem::remove(path);
}

TEST_CASE("resume: SGD's momentum buffers, bit for bit", "[resume]") {
  using M = mesh<2>;
  const std::string path = temp_path("sgd");
  auto straight = model<M, mode::ddp>::make();
  rt::sgd opt({.lr = 0.1, .momentum = 0.9, .nesterov = true}, straight.w1, straight.b1, straight.w2, straight.b2);
  const std::vector<double> losses = straight.train(opt, 0, 4);
  auto a = model<M, mode::ddp>::make();
  rt::sgd opt_a({.lr = 0.1, .momentum = 0.9, .nesterov = true}, a.w1, a.b1, a.w2, a.b2);
  std::vector<double> resumed = a.train(opt_a, 0, 2);
  io::save_training_state(path, opt_a, {.step = 2, .generator = {}});
  auto b = model<M, mode::ddp>::make();
  rt::sgd opt_b({.lr = 0.1, .momentum = 0.9, .nesterov = true}, b.w1, b.b1, b.w2, b.b2);
  CHECK(io::load_training_state(path, opt_b).step == 2);
  CHECK(opt_b.momentum_buffer<1>().has_value());
  const std::vector<double> rest = b.train(opt_b, 2, 4);
  resumed.insert(resumed.end(), rest.begin(), rest.end());
  CHECK(resumed == losses);
  CHECK(b.all() == straight.all());
  std::filesystem::remove(path);
}

TEST_CASE("resume on another parallelism: FSDP 2×4 -> DDP 8 -> one device", "[resume]") {
  const std::string p1 = temp_path("fsdp"), p2 = temp_path("ddp");
  auto ref = model<mesh<1>, mode::one>::make();
  auto opt_ref = adamw_of(ref);
  const std::vector<double> losses = ref.train(opt_ref, 0, 6);

  // FSDP over dp = 2 on a 2×4 mesh (replicated over the second dim).
  auto f = model<mesh<2, 4>, mode::fsdp>::make();
  auto opt_f = adamw_of(f);
  std::vector<double> got = f.train(opt_f, 0, 2);
  io::save_training_state(p1, opt_f, {.step = 2, .generator = {}});

  auto d = model<mesh<8>, mode::ddp>::make();
  auto opt_d = adamw_of(d);
  CHECK(io::load_training_state(p1, opt_d).step == 2);
  const std::vector<double> mid = d.train(opt_d, 2, 4);
  got.insert(got.end(), mid.begin(), mid.end());
  io::save_training_state(p2, opt_d, {.step = 4, .generator = {}});

  auto one = model<mesh<1>, mode::one>::make();
  auto opt_one = adamw_of(one);
  CHECK(io::load_training_state(p2, opt_one).step == 4);
  const std::vector<double> last = one.train(opt_one, 4, 6);
  got.insert(got.end(), last.begin(), last.end());
  close(got, losses, 1e-12);
  close(one.all(), ref.all(), 1e-12);
  std::filesystem::remove(p1);
  std::filesystem::remove(p2);
}

TEST_CASE("resume: bad checkpoints are refused naming what is wrong, and change nothing", "[resume]") {
  using M = mesh<2>;
  const std::string path = temp_path("bad"), other = temp_path("other");
  auto m = model<M, mode::ddp>::make();
  auto opt = adamw_of(m);
  m.train(opt, 0, 1);
  io::save_training_state(path, opt, {.step = 1, .generator = {}});
  const std::vector<double> before = m.all();

  // Another optimizer.
  rt::sgd sgd_opt({.lr = 0.1}, m.w1, m.b1, m.w2, m.b2);
  CHECK_THROWS_WITH(io::load_training_state(path, sgd_opt), Catch::Contains("saved by the adamw optimizer"));

  // A file without one optimizer entry (a model's plain checkpoint of the same tensors).
  io::save_tensors<sim::backend>(other, {}, std::pair<std::string_view, const std::remove_cvref_t<decltype(m.w1.value())>&>("w1", m.w1.value()));
  CHECK_THROWS_WITH(io::load_training_state(other, opt), Catch::Contains("holds no training state"));
  // Training states written by hand: every entry, the step's metadata as `step`, and b2's
  // exp_avg_sq only when it is passed (`last`).
  const auto& s0 = *opt.state_of<0>();
  const auto& s1 = *opt.state_of<1>();
  const auto& s2 = *opt.state_of<2>();
  const auto& s3 = *opt.state_of<3>();
  using P = std::pair<std::string_view, const std::remove_cvref_t<decltype(m.w1.value())>&>;
  using PB = std::pair<std::string_view, const std::remove_cvref_t<decltype(m.b1.value())>&>;
  using P2 = std::pair<std::string_view, const std::remove_cvref_t<decltype(m.w2.value())>&>;
  using PB2 = std::pair<std::string_view, const std::remove_cvref_t<decltype(m.b2.value())>&>;
  const auto write = [&](const std::string& step, const auto&... last) {
    io::save_options o;
    o.metadata = {{"spmd.optimizer", "adamw"}, {"spmd.step", step}, {"w1.step", "1"}, {"b1.step", "1"},
                  {"w2.step", "1"}, {"b2.step", "1"}};
    io::save_tensors<sim::backend>(other, o, P("w1", m.w1.value()), P("w1.exp_avg", s0.exp_avg),
                                   P("w1.exp_avg_sq", s0.exp_avg_sq), PB("b1", m.b1.value()),
                                   PB("b1.exp_avg", s1.exp_avg), PB("b1.exp_avg_sq", s1.exp_avg_sq),
                                   P2("w2", m.w2.value()), P2("w2.exp_avg", s2.exp_avg),
                                   P2("w2.exp_avg_sq", s2.exp_avg_sq), PB2("b2", m.b2.value()),
                                   PB2("b2.exp_avg", s3.exp_avg), last...);
  };
  const PB2 b2_sq("b2.exp_avg_sq", s3.exp_avg_sq);
  // The optimizer's name but no exp_avg_sq for b2.
  write("1");
  CHECK_THROWS_WITH(io::load_training_state(other, opt), Catch::Contains("no tensor 'b2.exp_avg_sq'"));
  {
    // Counts in the metadata are digits, as the writer puts them: a sign, a space, an
    // exponent or more digits than a step can have are refused, not read leniently.
    for (const std::string bad : {" 1", "+1", "1e0", "-1", "1.0", "", "0x1", "1234567890123456789"}) {
      write(bad, b2_sq);
      CHECK_THROWS_WITH(io::load_training_state(other, opt),
                        Catch::Contains("'spmd.step' is '" + bad + "', not a count >= 0"));
    }
    write("123456789012345678", b2_sq);  // the longest count read: past --steps, but a count
    auto fresh = model<M, mode::ddp>::make();
    auto fresh_opt = adamw_of(fresh);
    CHECK(io::load_training_state(other, fresh_opt).step == 123456789012345678);
  }
  // Another model: the same names, another shape.
  {
    auto w = rt::requires_grad(sim::distribute_tensor<layout<M, placements<replicate>, extents<5, 4>>>(dp_test::values(20, 1)), "w1");
    rt::adamw o2({.lr = 0.01}, w);
    CHECK_THROWS_WITH(io::load_training_state(path, o2), Catch::Contains("w1") && Catch::Contains("[6, 4]"));
    CHECK(w.full_tensor() == dp_test::values(20, 1));
  }
  CHECK(m.all() == before);
  CHECK(opt.state_of<0>()->step == 1);

  // A save that fails half-way leaves the previous checkpoint whole.
  const auto size = std::filesystem::file_size(path);
  io::save_options stop;
  stop.after_tensor = [](std::string_view name) {
    if (name == "w2") throw std::runtime_error("stopped");
  };
  m.train(opt, 1, 2);
  CHECK_THROWS_WITH(io::save_training_state(path, opt, {.step = 2, .generator = {}}, stop), "stopped");
  CHECK(std::filesystem::file_size(path) == size);
  auto again = model<M, mode::ddp>::make();
  auto opt_again = adamw_of(again);
  CHECK(io::load_training_state(path, opt_again).step == 1);
  std::filesystem::remove(path);
  std::filesystem::remove(other);
}

namespace {
/// Two optimizers stepped as one (an optimizer per unit, as spmd-train's per-unit models train).
template <class A, class B>
struct both {
  A& a;
  B& b;
  void step() {
    a.step();
    b.step();
  }
  void zero_grad() {
    a.zero_grad();
    b.zero_grad();
  }
};
}  // namespace

TEST_CASE("resume: optimizers of parts of a model share one checkpoint, read by one optimizer and back", "[resume]") {
  using M = mesh<4>;
  const std::string path = temp_path("parts"), back = temp_path("parts_back");
  auto straight = model<M, mode::fsdp>::make();
  auto opt = adamw_of(straight);
  const std::vector<double> losses = straight.train(opt, 0, 6);

  // two optimizers, (w1, b1) and (w2, b2), saved as parts of one file at step 2
  auto a = model<M, mode::fsdp>::make();
  rt::adamw up({.lr = 0.01}, a.w1, a.b1);
  rt::adamw down({.lr = 0.01}, a.w2, a.b2);
  both<decltype(up), decltype(down)> two{up, down};
  std::vector<double> got = a.train(two, 0, 2);
  io::save_training_state<sim::backend>(path, {io::state_part_of(up), io::state_part_of(down)}, {.step = 2, .generator = {}});
  // the format one optimizer writes: its names, states and steps
  const io::safetensors_file f(path);
  CHECK(f.metadata().at("spmd.optimizer") == "adamw");
  CHECK(f.metadata().at("b2.step") == "2");
  CHECK_NOTHROW(f.expect<double>("w2.exp_avg_sq", {out, hidden}));

  // one optimizer over all four reads it and goes on, bit for bit
  auto b = model<M, mode::fsdp>::make();
  auto opt_b = adamw_of(b);
  CHECK(io::load_training_state(path, opt_b).step == 2);
  const std::vector<double> mid = b.train(opt_b, 2, 4);
  got.insert(got.end(), mid.begin(), mid.end());
  io::save_training_state(back, opt_b, {.step = 4, .generator = {}});

  // and parts read a file of one optimizer
  auto c = model<M, mode::fsdp>::make();
  rt::adamw up_c({.lr = 0.01}, c.w1, c.b1);
  rt::adamw down_c({.lr = 0.01}, c.w2, c.b2);
  CHECK(io::load_training_state(back, {io::state_part_of(up_c), io::state_part_of(down_c)}).step == 4);
  both<decltype(up_c), decltype(down_c)> two_c{up_c, down_c};
  const std::vector<double> last = c.train(two_c, 4, 6);
  got.insert(got.end(), last.begin(), last.end());
  CHECK(got == losses);
  CHECK(c.all() == straight.all());

  // parts that do not fit change no part: a name twice, two optimizer kinds, and a second part
  // whose parameter has another shape (the first part's, read, is not set)
  auto d = model<M, mode::fsdp>::make();
  rt::adamw up_d({.lr = 0.01}, d.w1, d.b1);
  const std::vector<double> before = d.all();
  CHECK_THROWS_WITH(io::load_training_state(path, {io::state_part_of(up_d), io::state_part_of(up_d)}),
                    Catch::Contains("two parameters are named 'w1'"));
  rt::sgd sgd_d({.lr = 0.1}, d.w2, d.b2);
  CHECK_THROWS_WITH(io::load_training_state(path, {io::state_part_of(up_d), io::state_part_of(sgd_d)}),
                    Catch::Contains("one optimizer kind"));
  auto wrong = rt::requires_grad(sim::distribute_tensor<layout<M, placements<replicate>, extents<3>>>(std::vector<double>(3, 0.)), "w2");
  rt::adamw other({.lr = 0.01}, wrong);
  CHECK_THROWS_AS(io::load_training_state(path, {io::state_part_of(up_d), io::state_part_of(other)}), io::checkpoint_error);
  CHECK(d.all() == before);
  std::filesystem::remove(path);
  std::filesystem::remove(back);
}
