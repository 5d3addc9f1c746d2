// tests/io/checkpoint.cpp — modules and checkpoints on the simulation: distribute_module's
// layouts, save under one mesh and load under others (every rank's local against the
// original tensor's box, computed here from the global data), the file against an
// independent reading of the format, every kind of bad file as an error naming the tensor and
// the problem, a save killed half-way leaving the previous checkpoint whole, and a team of
// writers (a pipeline's groups) writing one file, each its tensors.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>  // the reference reader of the headers spmd writes

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/io/checkpoint.hpp"
#include "spmd/runtime/module.hpp"

#include <boost/hana/for_each.hpp>
#include <boost/hana/string.hpp>

namespace {

using namespace spmd;
using Catch::Contains;

struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp,
    (tensor<float, extents<6, 5>>, w1),
    (tensor<float, extents<6>>, b1),
    (tensor<double, extents<5, 6>>, w2),
    (tensor<bfloat16, extents<5>>, b2),
    (tensor<std::int64_t, extents<3, 2, 7>>, table));
};

// On 2x4: w1 column-parallel, w2 row-parallel, the table split on both dims; the rest
// replicated (the partition does not name them).
template <fixed_string Name, class M>
struct on_2x4 {};
template <class M>
struct on_2x4<"w1", M> {
  using type = placements<replicate, shard<0>>;
};
template <class M>
struct on_2x4<"w2", M> {
  using type = placements<replicate, shard<1>>;
};
template <class M>
struct on_2x4<"table", M> {
  using type = layout<mesh<2, 4>, placements<shard<2>, shard<0>>, extents<3, 2, 7>>;
};
// On 4x2: other splits, uneven ones and a Partial.
template <fixed_string Name, class M>
struct on_4x2 {};
template <class M>
struct on_4x2<"w1", M> {
  using type = placements<shard<1>, partial<reduce_op::sum>>;
};
template <class M>
struct on_4x2<"w2", M> {
  using type = placements<shard<0>, shard<0>>;
};
template <class M>
struct on_4x2<"b2", M> {
  using type = placements<shard<0>, replicate>;
};
template <fixed_string Name, class M>
struct replicated {};

mlp sample() {
  mlp m;
  for (std::size_t i = 0; i < m.w1.data.size(); ++i) m.w1.data[i] = 0.5f * static_cast<float>(i) - 3;
  for (std::size_t i = 0; i < m.b1.data.size(); ++i) m.b1.data[i] = static_cast<float>(i) + 0.25f;
  for (std::size_t i = 0; i < m.w2.data.size(); ++i) m.w2.data[i] = -1.0 / (1.0 + static_cast<double>(i));
  for (std::size_t i = 0; i < m.b2.data.size(); ++i) m.b2.data[i] = bfloat16(static_cast<float>(i) * 1.5f);
  for (std::size_t i = 0; i < m.table.data.size(); ++i) m.table.data[i] = (std::int64_t{1} << 40) + static_cast<std::int64_t>(i);
  return m;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// The box of a global row-major tensor, by testing every index for membership.
template <class T>
std::vector<T> box_of(const std::vector<T>& g, const shape_vec& global, const local_box& b) {
  std::vector<T> out;
  for (index_t i = 0; i < static_cast<index_t>(g.size()); ++i) {
    index_t rest = i;
    bool in = true;
    for (int d = global.size() - 1; d >= 0; --d) {
      const index_t c = rest % global[d];
      rest /= global[d];
      in = in && c >= b.offset[d] && c < b.offset[d] + b.shape[d];
    }
    if (in) out.push_back(g[static_cast<std::size_t>(i)]);
  }
  return out;
}

/// Every rank's local of every member against the struct's data: its box, or the identity
/// on a Partial group's other members.
template <class DM>
int check_locals(const DM& d, const mlp& m) {
  int checked = 0;
  const mlp full = d.full_module();
  d.for_each([&](std::string_view name, const auto& x) {
    using D = std::remove_cvref_t<decltype(x)>;
    using T = typename D::value_type;
    using L = typename D::layout_type;
    const shape_vec global = x.layout().extents().to_vec();
    const auto acc = boost::hana::accessors<mlp>();
    const std::vector<T>* want = nullptr;
    boost::hana::for_each(acc, [&](auto pair) {
      using V = std::remove_cvref_t<decltype(boost::hana::second(pair)(m).data)>;
      if constexpr (std::is_same_v<V, std::vector<T>>)
        if (boost::hana::to<const char*>(boost::hana::first(pair)) == name) want = &boost::hana::second(pair)(m).data;
    });
    REQUIRE(want != nullptr);
    for (index_t i = 0; i < L::mesh_type::size; ++i) {
      INFO("member " << name << " mesh index " << i);
      const auto local = x.to_local(L::mesh_type::rank_at(i)).data;
      if (host::holds_identity(L::spec(), i)) {
        for (const T v : local) CHECK(v == host::identity<T>(reduce_op::sum));
      } else {
        CHECK(same_bits(local, box_of(*want, global, box_at(L::spec(), global, unravel(L::spec().mesh, i)))));
      }
      ++checked;
    }
  });
  CHECK(same_bits(full.w1.data, m.w1.data));
  CHECK(same_bits(full.w2.data, m.w2.data));
  CHECK(same_bits(full.b2.data, m.b2.data));
  CHECK(same_bits(full.table.data, m.table.data));
  return checked;
}

std::string temp_path(const char* name) { return std::string("/tmp/spmd_io_test_") + std::to_string(::getpid()) + "_" + name; }

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST_CASE("distribute_module: the partition's layouts, replicate where it says nothing", "[io][module]") {
  const mlp m = sample();
  auto d = sim::distribute_module<on_2x4, mesh<2, 4>>(m);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(d.get<"w1">())>::placements_type,
                               placements<replicate, shard<0>>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(d.get<"b1">())>::placements_type,
                               placements<replicate, replicate>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(d.get<"table">())>::placements_type,
                               placements<shard<2>, shard<0>>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(d.get<"w2">())>::value_type, double>);
  CHECK(check_locals(d, m) == 5 * 8);
  // to_local over the module: every member's local on one rank, in the struct's order.
  const auto mine = d.to_local(5);
  CHECK(std::get<0>(mine).shape == std::vector<index_t>{2, 5});  // w1 rows 2..3 (6 over 4: 2,2,2,0)
  CHECK(std::get<4>(mine).shape == std::vector<index_t>{1, 2, 3});  // 3 over 4, 7 over 2
}

TEST_CASE("save on 2x4, load on 4x2 (uneven, Partial) and on one device", "[io][checkpoint]") {
  const mlp m = sample();
  const std::string path = temp_path("reshard.safetensors");
  io::save(path, sim::distribute_module<on_2x4, mesh<2, 4>>(m), {{{"format", "pt"}}, {}});
  CHECK(check_locals(io::load_module<on_4x2, mesh<4, 2>, sim::backend, mlp>(path), m) == 5 * 8);
  CHECK(check_locals(io::load_module<replicated, mesh<1>, sim::backend, mlp>(path), m) == 5);
  // One tensor by name, into any layout.
  using L = layout<mesh<3>, placements<shard<1>>, extents<5, 6>>;
  const auto w2 = io::load<double, L, sim::backend>(path, "w2");
  CHECK(same_bits(w2.full_tensor(), m.w2.data));
  CHECK(w2.to_local(2).shape == std::vector<index_t>{5, 2});
  // A P(sum) layout saves its reduced value.
  const std::string p2 = temp_path("partial.safetensors");
  using LP = layout<mesh<2>, placements<partial<reduce_op::sum>>, extents<6, 5>>;
  const auto xp = sim::distribute_tensor<LP>(m.w1.data);  // split values, reducing exactly
  CHECK_FALSE(same_bits(xp.to_local(0).data, m.w1.data));
  io::save_tensors<sim::backend>(p2, {}, std::pair<std::string_view, const decltype(xp)&>("w1", xp));
  using LR = layout<mesh<1>, placements<replicate>, extents<6, 5>>;
  CHECK(same_bits(io::load<float, LR, sim::backend>(p2, "w1").full_tensor(), m.w1.data));
  std::remove(path.c_str());
  std::remove(p2.c_str());
}

TEST_CASE("the file is safetensors: header, order, padding, little-endian data", "[io][checkpoint]") {
  const mlp m = sample();
  const std::string path = temp_path("format.safetensors");
  io::save(path, sim::distribute_module<on_2x4, mesh<2, 4>>(m), {{{"format", "pt"}}, {}});
  const std::string bytes = read_all(path);
  REQUIRE(bytes.size() > 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  CHECK((8 + n) % 8 == 0);
  const auto j = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(j["__metadata__"]["format"] == "pt");
  CHECK(j["w1"]["dtype"] == "F32");
  CHECK(j["w1"]["shape"] == nlohmann::json::array({6, 5}));
  CHECK(bytes.substr(8, 60) == R"({"__metadata__":{"format":"pt"},"b1":{"dtype":"F32","shape":)");  // compact, in order
  CHECK(j["b2"]["dtype"] == "BF16");
  CHECK(j["table"]["dtype"] == "I64");
  // Name order, contiguous: b1, b2, table, w1, w2.
  CHECK(j["b1"]["data_offsets"] == nlohmann::json::array({0, 24}));
  CHECK(j["b2"]["data_offsets"] == nlohmann::json::array({24, 34}));
  CHECK(j["table"]["data_offsets"] == nlohmann::json::array({34, 34 + 42 * 8}));
  const std::size_t w2_at = 8 + n + j["w2"]["data_offsets"][0].get<std::size_t>();
  CHECK(bytes.size() == 8 + n + j["w2"]["data_offsets"][1].get<std::size_t>());
  double first = 0;
  std::memcpy(&first, bytes.data() + w2_at + 8, 8);  // w2[0][1] (x86: little-endian)
  CHECK(first == m.w2.data[1]);
  std::remove(path.c_str());
}

TEST_CASE("tensor names and metadata with escapes and UTF-8, written and read back", "[io][checkpoint]") {
  const std::vector<std::string> names = {"caf\xc3\xa9.\xe2\x82\xac", "q\"b\\s/", "tab\tnl\n", "ctl\x01"};
  std::vector<io::tensor_entry> entries;
  for (const std::string& n : names) entries.push_back({n, io::dtype::f32, {2}, 0, 0});
  const io::safetensors_layout l(entries, {{"k\"\xc3\xa9", "v\n"}});
  const std::string h = l.header_bytes().substr(8);
  const auto j = nlohmann::json::parse(h);  // the reference reader
  CHECK(j["__metadata__"]["k\"\xc3\xa9"] == "v\n");
  for (const std::string& n : names) CHECK(j.contains(n));
  CHECK(h.find("\\u0001") != std::string::npos);
  const std::string path = temp_path("names.safetensors");
  {
    io::atomic_file out = io::atomic_file::create(path, l.file_bytes());  // data: zeros
    out.write(l.header_bytes().data(), l.header_bytes().size(), 0);
    out.commit();
  }
  const io::safetensors_file f(path);
  for (const std::string& n : names) CHECK(f.at(n).shape == std::vector<index_t>{2});
  CHECK(f.metadata().at("k\"\xc3\xa9") == "v\n");
  std::remove(path.c_str());
  CHECK_THROWS_WITH(io::safetensors_layout({{"bad\xff", io::dtype::f32, {1}, 0, 0}}),
                    Contains("a tensor name 'bad\xff' is not valid UTF-8"));
  CHECK_THROWS_WITH(io::safetensors_layout({{"w", io::dtype::f32, {1}, 0, 0}}, {{"k", "\xc3"}}),
                    Contains("a metadata value"));
}

TEST_CASE("bad files: an error naming the tensor and the problem", "[io][checkpoint]") {
  const mlp m = sample();
  const std::string good = temp_path("good.safetensors"), bad = temp_path("bad.safetensors");
  io::save(good, sim::distribute_module<on_2x4, mesh<2, 4>>(m));
  const std::string bytes = read_all(good);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  using LW = layout<mesh<2>, placements<shard<0>>, extents<6, 5>>;
  const auto load_w1 = [&] { return io::load<float, LW, sim::backend>(bad, "w1"); };

  write_all(bad, bytes);
  CHECK_THROWS_WITH((io::load<float, LW, sim::backend>(bad, "w3")), Contains("no tensor 'w3'"));
  CHECK_THROWS_WITH((io::load<double, LW, sim::backend>(bad, "w1")), Contains("tensor 'w1' is F32, F64 was asked for"));
  using LX = layout<mesh<2>, placements<shard<0>>, extents<5, 6>>;
  CHECK_THROWS_WITH((io::load<float, LX, sim::backend>(bad, "w1")), Contains("tensor 'w1' has shape [6, 5], [5, 6] was asked for"));
  CHECK_THROWS_WITH((io::load_module<on_4x2, mesh<4, 2>, sim::backend, mlp>(temp_path("absent"))),
                    Contains("cannot open"));

  write_all(bad, bytes.substr(0, bytes.size() - 10));  // truncated data
  CHECK_THROWS_WITH(load_w1(), Contains("lie outside the file's"));
  CHECK_THROWS_WITH(load_w1(), Contains("(a truncated file?)"));
  write_all(bad, bytes.substr(0, 8 + n / 2));  // truncated header
  CHECK_THROWS_WITH(load_w1(), Contains("the header length says"));
  write_all(bad, bytes.substr(0, 5));
  CHECK_THROWS_WITH(load_w1(), Contains("not even the 8-byte header length"));
  std::string corrupt = bytes;
  corrupt[8] = '[';  // the JSON object's brace
  write_all(bad, corrupt);
  CHECK_THROWS_WITH(load_w1(), Contains("corrupt header (not JSON)"));
  std::string huge = bytes;
  huge[7] = '\x7f';  // a length of ~9e18
  write_all(bad, huge);
  CHECK_THROWS_WITH(load_w1(), Contains("truncated or corrupt"));
  const auto with_header = [&](const std::string& json) {
    std::string h = json;
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<char>(h.size() >> (8 * i) & 0xff);
    write_all(bad, len + h + std::string(120, '\0'));
  };
  with_header(R"({"w1": {"dtype": "F8_E4M3", "shape": [6, 5], "data_offsets": [0, 30]}})");
  CHECK_THROWS_WITH(load_w1(), Contains("tensor 'w1': dtype 'F8_E4M3' is not one spmd reads"));
  with_header(R"({"w1": {"dtype": "F32", "shape": [6, 5], "data_offsets": [0, 100]}})");
  CHECK_THROWS_WITH(load_w1(), Contains("tensor 'w1': F32 [6, 5] needs 120 bytes, its data_offsets give 100"));
  // Within 2^62 elements, but not within 2^62 bytes: refused before its size overflows (UBSan;
  // found by fuzz_safetensors_header).
  with_header(R"({"w1": {"dtype": "F64", "shape": [999999999999999996, 3], "data_offsets": [0, 8]}})");
  CHECK_THROWS_WITH(load_w1(), Contains("F64 shape [999999999999999996,3] is too large (more than 2^62 bytes)"));
  with_header(R"({"w1": {"dtype": "F32", "shape": [6, -5], "data_offsets": [0, 120]}})");
  CHECK_THROWS_WITH(load_w1(), Contains("tensor 'w1': shape [6,-5] is not a list of sizes"));
  with_header(R"({"w1": {"dtype": "F32", "shape": [6, 5]}})");
  CHECK_THROWS_WITH(load_w1(), Contains("tensor 'w1': corrupt header entry"));
  with_header(R"({"w1": {"dtype": "F32", "shape": [6, 5], "data_offsets": [0, 120]}})");
  CHECK(same_bits(load_w1().full_tensor(), std::vector<float>(30, 0.0f)));  // and a good one loads
  with_header(R"({"w1": {"dtype": "F32", "shape": [6, 5], "data_offsets": [0, 120]},)"
              R"( "w1": {"dtype": "F32", "shape": [5, 6], "data_offsets": [0, 120]}})");
  CHECK_THROWS_WITH(load_w1(), Contains("corrupt header: tensor 'w1' is listed twice"));
  with_header(R"({"w1": {"dtype": "F32", "shape": [6, 5], "data_offsets": [0, 120]}})" + std::string(6, '\0'));
  CHECK(same_bits(load_w1().full_tensor(), std::vector<float>(30, 0.0f)));  // NUL padding is read past
  with_header(R"({"w1": {"dtype": "F32", "shape": [6, 5], "data_offsets": [0, 1.2e2]}})");
  CHECK_THROWS_WITH(load_w1(), Contains("tensor 'w1': data_offsets [0,1.2e2] are not sizes"));
  with_header(R"({"w1": {"dtype": "F32", "shape": [6, 5], "data_offsets": [0, 120]})");
  CHECK_THROWS_WITH(load_w1(), Contains("corrupt header (not JSON): syntax error at byte"));
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("a save killed half-way leaves the previous checkpoint whole", "[io][checkpoint]") {
  const mlp old_model = sample();
  mlp new_model = sample();
  for (float& v : new_model.w1.data) v += 100;
  const std::string path = temp_path("crash.safetensors");
  io::save(path, sim::distribute_module<on_2x4, mesh<2, 4>>(old_model));
  const std::string before = read_all(path);

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    io::save_options o;
    o.after_tensor = [](std::string_view name) {
      if (name == "b2") ::kill(::getpid(), SIGKILL);  // after two of five tensors
    };
    io::save(path, sim::distribute_module<on_2x4, mesh<2, 4>>(new_model), o);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(read_all(path) == before);                                   // untouched
  CHECK(read_all(path + ".tmp").size() == before.size());            // the half-written one
  CHECK(check_locals(io::load_module<on_4x2, mesh<4, 2>, sim::backend, mlp>(path), old_model) == 40);
  // The next save replaces both.
  io::save(path, sim::distribute_module<on_2x4, mesh<2, 4>>(new_model));
  CHECK(check_locals(io::load_module<on_4x2, mesh<4, 2>, sim::backend, mlp>(path), new_model) == 40);
  std::ifstream tmp(path + ".tmp");
  CHECK_FALSE(tmp.good());
  std::remove(path.c_str());
}

TEST_CASE("a save that fails leaves the previous checkpoint whole and no temporary file; a FIFO is refused", "[io][checkpoint]") {
  const mlp m = sample();
  const std::string path = temp_path("fails.safetensors");
  io::save(path, sim::distribute_module<on_2x4, mesh<2, 4>>(m));
  const std::string before = read_all(path);
  io::save_options o;
  o.after_tensor = [](std::string_view name) {
    if (name == "b2") throw std::runtime_error("stopped after b2");  // as a failed write would
  };
  CHECK_THROWS_WITH(io::save(path, sim::distribute_module<on_2x4, mesh<2, 4>>(m), o), Contains("stopped after b2"));
  CHECK(read_all(path) == before);
  CHECK(::access((path + ".tmp").c_str(), F_OK) != 0);
  std::remove(path.c_str());

  const std::string fifo = temp_path("fifo.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK_THROWS_AS(io::save(fifo, sim::distribute_module<on_2x4, mesh<2, 4>>(m)), host::file_error);
  CHECK_THROWS_WITH(io::save(fifo, sim::distribute_module<on_2x4, mesh<2, 4>>(m)),
                    Contains(fifo + ": is a FIFO, not a regular file"));
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(::access((fifo + ".tmp").c_str(), F_OK) != 0);
  std::remove(fifo.c_str());
}

}  // namespace

namespace {

// For tests/io/test_interop.py: a checkpoint written from sharded tensors (2x4: S(0) split
// on both dims, a P(sum), an uneven split, a replicated f16), whose values Python recomputes.
struct plain {
  BOOST_HANA_DEFINE_STRUCT(plain,
    (spmd::tensor<float, spmd::extents<6, 5>>, w),
    (spmd::tensor<double, spmd::extents<5, 7>>, v),
    (spmd::tensor<std::int64_t, spmd::extents<3, 2, 7>>, t),
    (spmd::tensor<spmd::float16, spmd::extents<4>>, h));
};
template <spmd::fixed_string Name, class M>
struct plain_plan {};
template <class M>
struct plain_plan<"w", M> {
  using type = spmd::placements<spmd::shard<0>, spmd::shard<0>>;
};
template <class M>
struct plain_plan<"v", M> {
  using type = spmd::placements<spmd::partial<spmd::reduce_op::sum>, spmd::shard<1>>;
};
template <class M>
struct plain_plan<"t", M> {
  using type = spmd::placements<spmd::shard<2>, spmd::shard<0>>;
};

TEST_CASE("write the interop sample (SPMD_IO_SAMPLE names the file)", "[.write-sample]") {
  const char* path = std::getenv("SPMD_IO_SAMPLE");
  REQUIRE(path != nullptr);
  plain p;
  for (std::size_t i = 0; i < p.w.data.size(); ++i) p.w.data[i] = 0.5f * static_cast<float>(i) - 3;
  for (std::size_t i = 0; i < p.v.data.size(); ++i) p.v.data[i] = -1.0 / (1.0 + static_cast<double>(i));
  for (std::size_t i = 0; i < p.t.data.size(); ++i) p.t.data[i] = (std::int64_t{1} << 40) + static_cast<std::int64_t>(i);
  for (std::size_t i = 0; i < p.h.data.size(); ++i) p.h.data[i] = spmd::float16(0.25f * static_cast<float>(i));
  spmd::io::save(path, spmd::sim::distribute_module<plain_plan, spmd::mesh<2, 4>>(p), {{{"writer", "spmd"}}, {}});
}

}  // namespace

// A file team (io/file_team.hpp): two members, here threads, each holding only some of the
// tensors, as a pipeline's groups of processes do; the file they write together against the
// file one process writes holding all of them, byte for byte.
TEST_CASE("a file team writes one file, each member its tensors", "[io][checkpoint][team]") {
  const mlp m = sample();
  const auto d = sim::distribute_module<on_2x4, mesh<2, 4>>(m);
  const std::string alone = temp_path("alone.safetensors"), together = temp_path("together.safetensors");
  // one process with every tensor
  io::save_options all;
  all.metadata = {{"a", "1"}, {"b", "2"}};
  io::save_tensors<sim::backend>(alone, all,
                                 {io::to_save("w1", d.get<"w1">()), io::to_save("b1", d.get<"b1">()),
                                  io::to_save("w2", d.get<"w2">()), io::to_save("table", d.get<"table">())});
  // member 0: w1 and table, metadata a; member 1: b1 and w2, metadata b (and a, the same)
  std::vector<std::vector<io::saved_tensor>> held{{io::to_save("w1", d.get<"w1">()), io::to_save("table", d.get<"table">())},
                                                  {io::to_save("b1", d.get<"b1">()), io::to_save("w2", d.get<"w2">())}};
  std::vector<std::map<std::string, std::string>> meta{{{"a", "1"}}, {{"b", "2"}, {"a", "1"}}};
  std::barrier sync(2);
  std::vector<std::string> texts(2);
  std::vector<std::string> failures(2);
  auto member = [&](std::size_t i) {
    io::save_options o;
    o.metadata = meta[i];
    o.team = io::file_team{i == 0, [&] { sync.arrive_and_wait(); }, [&, i](const std::string& mine) {
                             texts[i] = mine;
                             sync.arrive_and_wait();
                             std::vector<std::string> every = texts;
                             sync.arrive_and_wait();
                             return every;
                           }};
    try {
      io::save_tensors<sim::backend>(together, o, held[i]);
    } catch (const std::exception& e) {
      failures[i] = e.what();
    }
  };
  std::thread other(member, 1);
  member(0);
  other.join();
  CHECK(failures == std::vector<std::string>(2));
  CHECK(read_all(together) == read_all(alone));
  using L = layout<mesh<1>, placements<replicate>, extents<5, 6>>;
  CHECK(same_bits(io::load<double, L, sim::backend>(together, "w2").full_tensor(), m.w2.data));
  std::remove(alone.c_str());
  std::remove(together.c_str());
}

TEST_CASE("a file team's merge refuses a tensor twice, metadata that differs, a malformed text", "[io][checkpoint][team]") {
  const io::tensor_entry w{"w", io::dtype::f32, {2, 3}}, v{"v", io::dtype::i64, {4}};
  const std::string a = io::detail::describe_header({w}, {{"spmd.step", "10"}});
  const auto [entries, metadata] =
      io::detail::merge_headers({a, io::detail::describe_header({v}, {{"spmd.step", "10"}, {"x:y", "1:2"}})});
  REQUIRE(entries.size() == 2);
  CHECK((entries[0].name == "w" && entries[0].shape == std::vector<index_t>{2, 3} && entries[0].type == io::dtype::f32));
  CHECK((entries[1].name == "v" && entries[1].shape == std::vector<index_t>{4} && entries[1].type == io::dtype::i64));
  CHECK(metadata == std::map<std::string, std::string>{{"spmd.step", "10"}, {"x:y", "1:2"}});
  CHECK_THROWS_WITH(io::detail::merge_headers({a, io::detail::describe_header({w}, {})}),
                    Contains("tensor 'w' is written by members 0 and 1"));
  CHECK_THROWS_WITH(io::detail::merge_headers({a, io::detail::describe_header({v}, {{"spmd.step", "11"}})}),
                    Contains("metadata 'spmd.step' is '10' on one member of the file's team and '11' on member 1"));
  for (const std::string bad : {std::string("x"), a.substr(0, a.size() - 1), a + "1", std::string("99999999999999999999:")})
    CHECK_THROWS_WITH(io::detail::merge_headers({bad}), Contains("malformed"));
}
