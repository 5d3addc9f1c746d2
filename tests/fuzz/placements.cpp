// libFuzzer harness: the placement, mesh and shape grammar (io/placement_text.hpp).
// Input: three fields separated by '|': mesh text, shape text, placements text. Every input
// either parses or throws std::invalid_argument; what parses formats back to text that parses
// to the same value, and a layout either builds or its error is a sentence.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "spmd/io/placement_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t a = text.find('|'), b = a == std::string::npos ? a : text.find('|', a + 1);
  const std::string_view all(text);
  const std::string_view mesh_t = all.substr(0, a);
  const std::string_view shape_t = a == std::string::npos ? std::string_view{} : all.substr(a + 1, b - a - 1);
  const std::string_view place_t = b == std::string::npos ? all : all.substr(b + 1);
  using namespace spmd;
  spmd::placement_vec p{};
  try {
    p = parse_placements(place_t);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  if (!(parse_placements(format_placements(p)) == p)) __builtin_trap();  // round trip
  try {
    const spmd::mesh_shape_vec m = parse_mesh(mesh_t);
    if (!(parse_mesh(format_mesh(m)) == m)) __builtin_trap();
    const spmd::shape_vec s = parse_shape(shape_t);
    const spmd::layout_spec spec = checked_spec(m, p, s.size());
    (void)format_placements(spec);
  } catch (const std::invalid_argument& e) {
    if (std::string_view(e.what()).empty()) __builtin_trap();  // every error says something
  }
  return 0;
}
