// tests/cli/io_text.cpp — the host-only text headers behind spmd-plan: the placement grammar
// (parse, format, round trips, error messages) and the layout table / grid.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/io/placement_text.hpp"
#include "spmd/io/visualize.hpp"

namespace {

using namespace spmd;

/// what() of the std::invalid_argument that f throws ("" when it throws nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

layout_spec spec_of(const char* mesh, const char* placements, int rank) {
  return checked_spec(parse_mesh(mesh), parse_placements(placements), rank);
}

}  // namespace

TEST_CASE("single placements parse", "[io]") {
  CHECK(parse_placement("R") == make_replicate());
  CHECK(parse_placement("S(0)") == make_shard(0));
  CHECK(parse_placement("S(-1)") == make_shard(-1));
  CHECK(parse_placement("S(1)[2]") == make_shard(1, 2));
  CHECK(parse_placement("  S ( 3 ) [ 0 ]  ") == make_shard(3, 0));
  CHECK(parse_placement("P") == make_partial(reduce_op::sum));
  CHECK(parse_placement("P(sum)") == make_partial(reduce_op::sum));
  CHECK(parse_placement("P(avg)") == make_partial(reduce_op::avg));
  CHECK(parse_placement("P( max )") == make_partial(reduce_op::max));
  CHECK(parse_placement("P(min)") == make_partial(reduce_op::min));
  CHECK(parse_placement("P(product)") == make_partial(reduce_op::product));
}

TEST_CASE("bad placements name the token and why", "[io]") {
  for (const char* bad : {"", "Q", "r", "RR", "S", "S()", "S(x)", "S(0", "S(0)[", "S(0)[1",
                          "S(0)[-1]", "S(0)[x]", "S(0)x", "S(+1)", "P(", "P()", "P(foo)",
                          "P(sum)x", "S(99999999999)"}) {
    INFO("token: '" << bad << "'");
    const std::string msg = error_of([&] { parse_placement(bad); });
    CHECK(contains(msg, "bad placement '" + std::string(bad) + "'"));
  }
  CHECK(contains(error_of([] { parse_placement("P(foo)"); }), "unknown reduce op 'foo'"));
  CHECK(error_of([] { parse_placements("R,S(x),R"); }) ==
        "bad placement 'S(x)' at position 1: the shard dim 'x' is not an integer");
  CHECK(contains(error_of([] { parse_placements("R, "); }), "'' at position 1"));
  CHECK(contains(error_of([] { parse_placements("R,R,R,R,R,R,R,R,R"); }), "at most 8"));
}

TEST_CASE("placement lists round-trip through text", "[io]") {
  CHECK(parse_placements("").empty());
  CHECK(parse_placements("  ").empty());
  for (const char* text : {"R", "S(0),S(0)", "S(-1),P(max)", "S(1)[1],S(1)[2],S(1)[0]",
                           "P(avg),R,S(2)[0]", "R,R,R,R,R,R,R,R"}) {
    INFO(text);
    CHECK(format_placements(parse_placements(text)) == text);
  }
  CHECK(format_placements(parse_placements(" P , S( 0 ) ")) == "P(sum),S(0)");
  // A list is checked against a mesh only later, so it may hold any int; its text must still
  // round-trip (the fuzzer found eight long orders cut short, which then failed to parse).
  for (const char* text : {"S(2)[1],S(1)[1881],S(1)[189811],S(1)[18881],S(1)[11881],"
                           "S(1)[189811],S(1)[188981],S(1)[1888]",
                           "S(-2147483648)[2147483647],S(2147483647)[2147483647],"
                           "S(-2147483648)[2147483647],S(-2147483648)[2147483647],"
                           "S(-2147483648)[2147483647],S(-2147483648)[2147483647],"
                           "S(-2147483648)[2147483647],S(-2147483648)[2147483647]"}) {
    INFO(text);
    CHECK(format_placements(parse_placements(text)) == text);
  }
  CHECK(format_placement(parse_placement("S(-2147483648)[2147483647]")) ==
        "S(-2147483648)[2147483647]");
}

TEST_CASE("a spec prints its normalised placements", "[io]") {
  // negative dims normalised; default order written out explicitly loses its brackets
  CHECK(placement_strings(spec_of("2x2", "S(-1),S(0)[0]", 2)) ==
        std::vector<std::string>{"S(1)", "S(0)"});
  CHECK(format_placements(spec_of("2x2", "S(0)[0],S(0)[1]", 1)) == "S(0),S(0)");
  CHECK(format_placements(spec_of("2x2", "S(0)[1],S(0)[0]", 1)) == "S(0)[1],S(0)[0]");
  // only the tensor dim with a non-default order gets brackets
  CHECK(format_placements(spec_of("2x2x2x2", "S(0),S(1)[1],S(1)[0],S(0)", 2)) ==
        "S(0),S(1)[1],S(1)[0],S(0)");
  CHECK(format_placements(spec_of("2x2x2", "S(1)[1],S(1)[2],S(1)[0]", 2)) ==
        "S(1)[1],S(1)[2],S(1)[0]");
  CHECK(format_placements(spec_of("2x3", "P,R", 0)) == "P(sum),R");
  // the printed form parses back to the same spec
  const layout_spec s = spec_of("2x2x2", "S(-1)[1],S(1)[0],S(-1)[0]", 3);
  CHECK(format_placements(s) == "S(2)[1],S(1),S(2)[0]");
  CHECK(checked_spec(s.mesh, parse_placements(format_placements(s)), 3) == s);
}

TEST_CASE("meshes and shapes parse and print", "[io]") {
  CHECK(format_mesh(parse_mesh("2x4")) == "2x4");
  CHECK(format_mesh(parse_mesh(" 8 ")) == "8");
  CHECK(format_mesh(parse_mesh("1x2x1x2x1x2x1x2")) == "1x2x1x2x1x2x1x2");
  CHECK(format_shape(parse_shape("10,5")) == "10,5");
  CHECK(format_shape(parse_shape(" 0 , 3 ")) == "0,3");
  CHECK(parse_shape("").empty());
  CHECK(format_list(parse_shape("10,5")) == "[10, 5]");
  CHECK(format_list(parse_shape("")) == "[]");

  CHECK(error_of([] { parse_mesh("2x0"); }) ==
        "bad mesh '2x0': size '0' at mesh dim 1 must be >= 1");
  CHECK(error_of([] { parse_mesh("2xx4"); }) == "bad mesh '2xx4': empty size at mesh dim 1");
  CHECK(contains(error_of([] { parse_mesh(""); }), "bad mesh ''"));
  CHECK(contains(error_of([] { parse_mesh("1x1x1x1x1x1x1x1x1"); }), "at most 8 mesh dims"));
  CHECK(contains(error_of([] { parse_mesh("2147483648x2147483648x2"); }), "2^62 ranks"));
  CHECK(error_of([] { parse_shape("-1"); }) ==
        "bad shape '-1': size '-1' at tensor dim 0 must be >= 0");
  CHECK(error_of([] { parse_shape("4,a"); }) ==
        "bad shape '4,a': size 'a' at tensor dim 1 is not an integer");
  CHECK(contains(error_of([] { parse_shape("1,1,1,1,1,1,1,1,1"); }), "at most 8 tensor dims"));
  CHECK(contains(error_of([] { parse_shape("9223372036854775808"); }), "out of range"));
}

TEST_CASE("checked_spec names the offending placement", "[io]") {
  const auto err = [](const char* mesh, const char* placements, int rank) {
    return error_of([&] { checked_spec(parse_mesh(mesh), parse_placements(placements), rank); });
  };
  CHECK(err("2x4", "R,S(2)", 2) ==
        "placement 'S(2)' on mesh dim 1: a shard dim is outside the tensor's dims "
        "(tensor has 2 dims)");
  CHECK(contains(err("2x4", "S(0)", 2), "placements 'S(0)' (1 placement) do not fit mesh '2x4'"));
  CHECK(contains(err("2x4", "P(sum),P(max)", 2), "placement 'P(max)' on mesh dim 1"));
  CHECK(contains(err("2x4", "S(0)[0],S(0)[0]", 2), "placement 'S(0)[0]' on mesh dim 1"));
  CHECK(contains(err("2x4", "S(0)[1],S(0)", 2), "placement 'S(0)[1]' on mesh dim 0"));
  CHECK(err("2x4", "S(0),S(1)", 2).empty());
}

TEST_CASE("layout_table lists every rank", "[io]") {
  CHECK(layout_table(spec_of("4", "S(0)", 1), parse_shape("5")) ==
        "rank  coord  local_shape  offset\n"
        "----  -----  -----------  ------\n"
        "   0  [0]    [2]          [0]\n"
        "   1  [1]    [2]          [2]\n"
        "   2  [2]    [1]          [4]\n"
        "   3  [3]    [0]          [5]\n");
  CHECK_THROWS_AS(layout_table(spec_of("4", "S(0)", 1), parse_shape("5,5")),
                  std::invalid_argument);
}

TEST_CASE("visualize draws DTensor's grid", "[io]") {
  // (9,5) over (2,2) with S(0),S(0): rows 3,2,2,2
  CHECK(visualize(spec_of("2x2", "S(0),S(0)", 2), parse_shape("9,5")) ==
        "         Col 0-4\n"
        "-------  -------\n"
        "Row 0-2  0\n"
        "Row 3-4  1\n"
        "Row 5-6  2\n"
        "Row 7-8  3\n");
  // both dims sharded, replicas share a cell
  CHECK(visualize(spec_of("2x2x2", "S(1),R,S(0)", 2), parse_shape("4,10")) ==
        "         Col 0-4  Col 5-9\n"
        "-------  -------  -------\n"
        "Row 0-1  0, 2     4, 6\n"
        "Row 2-3  1, 3     5, 7\n");
  // 1-d: one row; the empty block of rank 3 is left out
  CHECK(visualize(spec_of("4", "S(0)", 1), parse_shape("5")) ==
        "         Col 0-1  Col 2-3  Col 4-4\n"
        "-------  -------  -------  -------\n"
        "Row 0-0  0        1        2\n");
  // 0-d: one cell
  CHECK(visualize(spec_of("3", "P(max)", 0), parse_shape("")) ==
        "         Col 0-0\n"
        "-------  -------\n"
        "Row 0-0  0, 1, 2\n");
  CHECK(contains(visualize(spec_of("2", "S(0)", 1), parse_shape("0")), "every block is empty"));
  CHECK_THROWS_AS(visualize(spec_of("2", "S(0)", 3), parse_shape("2,2,2")),
                  std::invalid_argument);
}
