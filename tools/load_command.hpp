// tools/load_command.hpp — `spmd-plan load`: what every rank would load of a safetensors
// checkpoint under a layout, or the file's tensors (load_command.cpp).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

struct load_options {
  std::string file;
  std::string tensor;
  std::string mesh;
  std::string placements;
  bool list = false;
  bool json = false;
};

CLI::App* add_load_command(CLI::App& app, load_options& o);
int run_load(const load_options& o);
