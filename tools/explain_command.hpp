// tools/explain_command.hpp — `spmd-plan explain`: the candidates an operator's sharding was
// chosen from, with their costs (explain_command.cpp).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

struct explain_options {
  std::string mesh;
  std::string op;
  std::string einsum;
  std::vector<std::string> inputs;  // "placements:shape", e.g. "S(0),R:16,32"
  std::string out;                  // forced output placements, optional
  std::string dtype = "f32";
  bool all = false;
  bool json = false;
};

CLI::App* add_explain_command(CLI::App& app, explain_options& o);
int run_explain(const explain_options& o);
