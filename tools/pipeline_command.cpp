// tools/pipeline_command.cpp — `spmd-plan pipeline`: the table of a pipeline schedule
// (spmd/plan/pipeline_schedule.hpp), built by the same functions the compiler runs, with its
// bubble and each rank's peak of live microbatches; --svg draws it (spmd/io/pipeline_svg.hpp).
//
//   spmd-plan pipeline --schedule 1f1b --stages 4 --microbatches 8
//   schedule 1f1b: 4 stages (ranks), 1 virtual stage each, 8 microbatches
//   33 slots (F 1, B 2, I 1, W 1); bubble 0.2727 (36 of 132 rank-slots idle)
//   peak live microbatches by rank: 4 3 2 1
//   rank 0 | F0 F1 F2 F3 .  .  ...
//
// --stages is the pipeline's ranks along pp; with --virtual V each holds V of the model's
// stages·V pieces, stage s on rank s mod stages. --json prints {"schedule", "stages",
// "virtual", "microbatches", "model_stages", "slots", "bubble", "idle_slots", "rank_slots",
// "peak", "durations", "ranks": [{"rank", "actions": [{"slot", "op", "stage",
// "microbatch"}], "sends": [{"slot", "to", "stage", "microbatch", "kind"}], "receives":
// [{"slot", "from", ...}]}]}, a task's "slot" being the first it takes.
#include "pipeline_command.hpp"

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/host/output_file.hpp"
#include "spmd/io/pipeline_svg.hpp"
#include "spmd/plan/pipeline_schedule.hpp"

namespace {

namespace pp = spmd::pp;

// Sizes beyond these would be tables too large to print (up to 6,300 slots × 64 ranks).
constexpr int max_stages = 64, max_virtual = 8, max_microbatches = 256;

void check_size(const char* option, int value, int most) {
  if (value < 1 || value > most)
    throw std::invalid_argument(std::string("bad ") + option + " " + std::to_string(value) +
                                ": from 1 to " + std::to_string(most));
}

std::string label(const pp::task& k, const pp::shape& dims) {
  std::string s = std::string(1, pp::letter(k.kind)) + std::to_string(k.microbatch);
  if (dims.virtual_stages > 1) s += "." + std::to_string(k.stage / dims.ranks);
  return s;
}

nlohmann::ordered_json transfer_json(int slot, const pp::transfer& x, const char* peer) {
  nlohmann::ordered_json j;
  j["slot"] = slot;
  j[peer] = x.peer;
  j["stage"] = x.stage;
  j["microbatch"] = x.microbatch;
  j["kind"] = x.gradient ? "gradient" : "activation";
  return j;
}

}  // namespace

CLI::App* add_pipeline_command(CLI::App& app, pipeline_options& o) {
  CLI::App* cmd = app.add_subcommand(
      "pipeline", "A pipeline schedule's table of time slots by ranks, its bubble and its peak of "
                  "live microbatches, as the compiler builds and checks them");
  cmd->add_option("--schedule", o.schedule, "gpipe, 1f1b, interleaved or zb (ZB-H1)")->required();
  cmd->add_option("--stages", o.stages, "The pipeline's ranks (1-64)")->required();
  cmd->add_option("--microbatches", o.microbatches, "Microbatches per step (1-256)")->required();
  cmd->add_option("--virtual", o.virtual_stages,
                  "Stages per rank (interleaved only; 1-8): the model is cut into stages x virtual");
  cmd->add_option("--svg", o.svg, "Also draw the table into this SVG file");
  cmd->add_flag("--json", o.json, "Print one JSON object");
  return cmd;
}

int run_pipeline(const pipeline_options& o) {
  pp::schedule_kind kind{};
  if (!pp::parse_schedule(o.schedule, kind))
    throw std::invalid_argument("bad schedule '" + o.schedule + "': gpipe, 1f1b, interleaved or zb");
  check_size("--stages", o.stages, max_stages);
  check_size("--microbatches", o.microbatches, max_microbatches);
  check_size("--virtual", o.virtual_stages, max_virtual);
  const pp::shape dims{o.stages, o.virtual_stages, o.microbatches};
  if (const char* e = pp::shape_error(kind, dims))
    throw std::invalid_argument("bad --virtual " + std::to_string(o.virtual_stages) + " for " +
                                o.schedule + ": " + e);
  const pp::built b = pp::build(kind, dims);
  if (b.info.failed.what != pp::fault::none)  // the built-in programs run: tests say so
    throw std::logic_error(std::string("the schedule cannot run: ") + pp::describe(b.info.failed.what) +
                           " at slot " + std::to_string(b.info.failed.slot));
  const pp::table& t = b.table;
  const bool split = kind == pp::schedule_kind::zero_bubble;
  if (const pp::fault_at f = pp::check(t, dims, split); f.what != pp::fault::none)
    throw std::logic_error(std::string("the table fails its check: ") + pp::describe(f.what));
  const int rank_slots = t.slots * t.ranks, idle = rank_slots - pp::busy_slots(t);
  const double bubble = double(idle) / double(rank_slots);
  std::vector<int> peak;
  for (int r = 0; r < t.ranks; ++r) peak.push_back(pp::peak_live(t, r));

  char bubble_text[32];
  std::snprintf(bubble_text, sizeof bubble_text, "%.4f", bubble);
  const std::string title = "schedule " + o.schedule + ": " + std::to_string(o.stages) + " stages (ranks), " +
                            std::to_string(o.virtual_stages) + " virtual stage" +
                            (o.virtual_stages > 1 ? "s" : "") + " each, " + std::to_string(o.microbatches) +
                            " microbatches";
  if (!o.svg.empty()) {
    try {
      spmd::host::write_text(o.svg, spmd::io::svg(t, dims, title + "; bubble " + bubble_text));
    } catch (const spmd::host::file_error& e) {
      throw std::invalid_argument(std::string("--svg ") + e.what());
    }
  }

  if (o.json) {
    nlohmann::ordered_json j;
    j["schedule"] = std::string(pp::name(kind));
    j["stages"] = o.stages;
    j["virtual"] = o.virtual_stages;
    j["microbatches"] = o.microbatches;
    j["model_stages"] = dims.stages();
    j["slots"] = t.slots;
    j["bubble"] = bubble;
    j["idle_slots"] = idle;
    j["rank_slots"] = rank_slots;
    j["peak"] = peak;
    j["durations"] = {{"F", 1}, {"B", 2}, {"I", 1}, {"W", 1}};
    auto ranks = nlohmann::ordered_json::array();
    for (int r = 0; r < t.ranks; ++r) {
      auto actions = nlohmann::ordered_json::array(), sends = actions, receives = actions;
      for (int s = 0; s < t.slots; ++s) {
        const pp::cell& c = t(s, r);
        if (!c.continues && c.work.kind != pp::work::idle) {
          nlohmann::ordered_json a;
          a["slot"] = s;
          a["op"] = std::string(1, pp::letter(c.work.kind));
          a["stage"] = c.work.stage;
          a["microbatch"] = c.work.microbatch;
          actions.push_back(a);
        }
        if (c.send.peer >= 0) sends.push_back(transfer_json(s, c.send, "to"));
        for (const pp::transfer& x : c.recv)
          if (x.peer >= 0) receives.push_back(transfer_json(s, x, "from"));
      }
      nlohmann::ordered_json rj;
      rj["rank"] = r;
      rj["actions"] = actions;
      rj["sends"] = sends;
      rj["receives"] = receives;
      ranks.push_back(rj);
    }
    j["ranks"] = ranks;
    std::cout << j.dump() << '\n';
    return 0;
  }

  std::string text = title + "\n" + std::to_string(t.slots) + " slots (F 1, B 2, I 1, W 1); bubble " +
                     bubble_text + " (" + std::to_string(idle) + " of " + std::to_string(rank_slots) +
                     " rank-slots idle)\npeak live microbatches by rank:";
  for (int p : peak) text += " " + std::to_string(p);
  text += "\n";
  std::size_t width = 2;
  for (int s = 0; s < t.slots; ++s)
    for (int r = 0; r < t.ranks; ++r)
      if (t(s, r).work.kind != pp::work::idle) width = std::max(width, label(t(s, r).work, dims).size());
  for (int r = 0; r < t.ranks; ++r) {
    std::string row = "rank " + std::to_string(r) + " |";
    for (int s = 0; s < t.slots; ++s) {
      const pp::cell& c = t(s, r);
      std::string cell = c.work.kind == pp::work::idle ? "." : c.continues ? "~" : label(c.work, dims);
      cell.resize(width, ' ');
      row += " " + cell;
    }
    while (!row.empty() && row.back() == ' ') row.pop_back();
    text += row + "\n";
  }
  std::cout << text;
  return 0;
}
