// tools/pipeline_command.hpp — `spmd-plan pipeline`: a pipeline schedule's table, its bubble
// and its peak, as text, JSON or a picture (pipeline_command.cpp).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

struct pipeline_options {
  std::string schedule;
  int stages = 0;
  int microbatches = 0;
  int virtual_stages = 1;
  std::string svg;
  bool json = false;
};

CLI::App* add_pipeline_command(CLI::App& app, pipeline_options& o);
int run_pipeline(const pipeline_options& o);
