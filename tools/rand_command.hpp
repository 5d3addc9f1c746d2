// tools/rand_command.hpp — `spmd-plan rand`: every rank's block of a random tensor under a
// layout, and the generator's offset after the call (rand_command.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

struct rand_options {
  std::string mesh;
  std::string shape;
  std::string placements;
  std::string seed;         // digits: an unsigned 64-bit integer
  std::string offset = "0";
  std::string dist = "uniform";
  std::string dtype = "f32";
  bool json = false;
};

CLI::App* add_rand_command(CLI::App& app, rand_options& o);
int run_rand(const rand_options& o);
