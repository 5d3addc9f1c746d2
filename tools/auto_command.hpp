// tools/auto_command.hpp — `spmd-plan auto`: the automatic sharding search over a training step
// given as a graph file (auto_command.cpp, docs/auto.md).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

struct auto_options {
  std::string mesh;
  std::string graph;                  // the graph file (JSON)
  std::optional<double> memory;       // bytes a rank may hold
  std::string fix;                    // 'NAME=PLACEMENTS;...'
  std::string cost;                   // a cost model file (bench/auto_calibrate), or the defaults
  bool json = false;
};

CLI::App* add_auto_command(CLI::App& app, auto_options& o);
int run_auto(const auto_options& o);
