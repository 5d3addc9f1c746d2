// bench/torch_child.hpp — bench/torch_gpt.py (PyTorch's eager step of spmd's gpt) as a child
// process over two pipes, answering one step at a time: bench/train_vs_torch (one core) and
// bench/train_cuda_vs_torch (one GPU) time their steps against it in the same run.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "inputs.hpp"

#ifndef SPMD_BENCH_SOURCE_DIR
#error "bench/torch_child.hpp: SPMD_BENCH_SOURCE_DIR (where torch_gpt.py is) must be defined"
#endif

namespace bench {

/// bench/torch_gpt.py as a child process over two pipes.
class torch_run {
 public:
  /// Starts it on the parameters and batches of `in` (written to a fresh folder); ok() says
  /// whether it answered (torch importable).
  torch_run(const spmd_train::model_spec& spec, const spmd_train::inputs& in, std::int64_t steps,
            std::vector<std::string> args = {})
      : args_(std::move(args)) {
    dir_ = std::filesystem::temp_directory_path() / ("spmd_torch_gpt_" + std::to_string(::getpid()) + "_" +
                                                     std::to_string(spec.vocab) + "_" + std::to_string(spec.batch));
    std::filesystem::create_directories(dir_);
    std::string manifest = "{\"vocab\": " + std::to_string(spec.vocab) + ", \"context\": " +
                           std::to_string(spec.context) + ", \"width\": " + std::to_string(width_of(spec)) +
                           ", \"heads\": " + std::to_string(spec.heads) + ", \"batch\": " + std::to_string(spec.batch) +
                           ", \"steps\": " + std::to_string(steps) + ", \"params\": [";
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      const auto& p = spec.params[i];
      const std::string file = "p" + std::to_string(i) + ".bin";
      write(file, in.params.at(p.name).data(), in.params.at(p.name).size() * sizeof(float));
      manifest += std::string(i ? ", " : "") + "{\"name\": \"" + p.name + "\", \"file\": \"" + file + "\", \"shape\": [";
      for (std::size_t d = 0; d < p.shape.size(); ++d) manifest += (d ? ", " : "") + std::to_string(p.shape[d]);
      manifest += "]}";
    }
    manifest += "]}";
    write("manifest.json", manifest.data(), manifest.size());
    write("tokens.bin", in.tokens.data(), in.tokens.size() * sizeof(std::int64_t));
    write("targets.bin", in.targets.data(), in.targets.size() * sizeof(std::int64_t));
    start();
  }
  ~torch_run() {
    if (to_) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
    }
    if (from_) std::fclose(from_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return ok_; }
  std::pair<double, double> step(std::int64_t s) {
    std::fprintf(to_, "step %lld\n", static_cast<long long>(s));
    std::fflush(to_);
    char line[256];
    double ms = -1, loss = 0;
    if (!std::fgets(line, sizeof line, from_) || std::sscanf(line, "ms %lf loss %lf", &ms, &loss) != 2) {
      std::fprintf(stderr, "torch_gpt.py did not answer a step\n");
      std::exit(1);
    }
    return {ms, loss};
  }

 private:
  static std::int64_t width_of(const spmd_train::model_spec& spec) {
    for (const auto& p : spec.params)
      if (p.name == "wte") return p.shape[1];
    return 0;
  }
  void write(const std::string& name, const void* data, std::size_t bytes) {
    std::ofstream f(dir_ / name, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  }
  void start() {
    const char* py = std::getenv("SPMD_BENCH_PYTHON");
    const std::string python = py && *py ? py : "python3";
    // The folder the build was configured in, unless SPMD_BENCH_SOURCE_DIR names another: a
    // binary carried to another machine (bench/gpu-run.sh) finds the script in that checkout.
    const char* dir = std::getenv("SPMD_BENCH_SOURCE_DIR");
    const std::string script = std::string(dir && *dir ? dir : SPMD_BENCH_SOURCE_DIR) + "/torch_gpt.py";
    int in_pipe[2], out_pipe[2];
    if (::pipe(in_pipe) != 0 || ::pipe(out_pipe) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in_pipe[0], 0);
      ::dup2(out_pipe[1], 1);
      ::close(in_pipe[1]);
      ::close(out_pipe[0]);
      std::vector<char*> argv{const_cast<char*>(python.c_str()), const_cast<char*>(script.c_str()),
                              const_cast<char*>(dir_.c_str())};
      for (std::string& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(python.c_str(), argv.data());
      std::_Exit(127);
    }
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    to_ = ::fdopen(in_pipe[1], "w");
    from_ = ::fdopen(out_pipe[0], "r");
    char line[256];
    ok_ = std::fgets(line, sizeof line, from_) && std::strncmp(line, "ready", 5) == 0;
  }

  std::vector<std::string> args_;  // after the folder: torch_gpt.py's options
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  bool ok_ = false;
};

}  // namespace bench
