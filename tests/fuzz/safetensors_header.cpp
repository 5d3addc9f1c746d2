// libFuzzer harness: a safetensors header (io/json.hpp's reader, io/safetensors.hpp's checks).
// Every input either gives entries or throws spmd::io::checkpoint_error with a message; what
// parses as JSON writes back as compact JSON that parses to the same text again; the entries
// a header gives lie inside the data, in name order, each once. Never a crash, a leak or UB
// (ASan and UBSan, recovering from nothing).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "spmd/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  namespace json = spmd::io::json;
  try {
    const std::string once = json::dump(json::parse(text));
    if (json::dump(json::parse(once)) != once) __builtin_trap();  // the writer's text reads back
  } catch (const json::error& e) {
    if (std::string_view(e.what()).empty()) __builtin_trap();
  }
  constexpr spmd::index_t data_bytes = 4096;
  std::map<std::string, std::string> metadata;
  try {
    const auto entries = spmd::io::detail::parse_header(text.data(), text.size(), data_bytes, "fuzz", &metadata);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      if (e.begin < 0 || e.end < e.begin || e.end > data_bytes) __builtin_trap();
      if (i > 0 && !(entries[i - 1].name < e.name)) __builtin_trap();
    }
  } catch (const spmd::io::checkpoint_error& e) {
    if (std::string_view(e.what()).empty()) __builtin_trap();
  }
  return 0;
}
