// libFuzzer harness: spmd-plan's argument handling. The input is split at NUL bytes into
// arguments. Every command line must end in exit 0 or 2 (bad input, with a message); exit 1
// (an internal error) or a crash is a finding. Output goes to a null stream.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int spmd_plan_main(int argc, char** argv);

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"spmd-plan"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (!cur.empty()) args.push_back(cur);
  if (args.size() > 24) return 0;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::ostringstream sink;
  std::streambuf* out = std::cout.rdbuf(sink.rdbuf());
  std::streambuf* err = std::cerr.rdbuf(sink.rdbuf());
  const int rc = spmd_plan_main(static_cast<int>(args.size()), argv.data());
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
  if (rc != 0 && rc != 2) {
    std::fprintf(stderr, "exit %d: %s\n", rc, sink.str().c_str());
    __builtin_trap();
  }
  if (rc == 2 && sink.str().find("spmd-plan") == std::string::npos) __builtin_trap();  // a message
  return 0;
}
