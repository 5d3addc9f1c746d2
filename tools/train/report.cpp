// tools/train/report.cpp — see report.hpp.
#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace spmd_train {

namespace {

/// A number with 9 significant digits, as JSON: a non-finite one is null (JSON has no NaN;
/// the run's warning and exit code 3 say which step went non-finite).
std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::string list(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + number(v[i]);
  return s + "]";
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

/// --parallel auto's choice as JSON: {"choice", "step_s", "unrestricted_step_s", "optimal",
/// "candidates": {name: {"step_s", "collectives"}}, "search_ms", "units": {unit: how},
/// "mixes", "exhaustive"}.
std::string choice_json(const parallel_choice& c) {
  std::string j = "{\"choice\":" + quoted(c.choice) + ",\"step_s\":" + number(c.step_s) +
                  ",\"unrestricted_step_s\":" + number(c.unrestricted_step_s) +
                  ",\"optimal\":" + (c.optimal ? "true" : "false") + ",\"candidates\":{";
  for (std::size_t i = 0; i < c.candidates.size(); ++i)
    j += (i ? "," : "") + quoted(c.candidates[i].name) + ":{\"step_s\":" + number(c.candidates[i].step_s) +
         ",\"collectives\":" + std::to_string(c.candidates[i].collectives) + "}";
  j += "},\"search_ms\":" + number(c.search_ms) + ",\"units\":{";
  for (std::size_t i = 0; i < c.units.size(); ++i) j += (i ? "," : "") + quoted(c.units[i].first) + ":" + quoted(c.units[i].second);
  return j + "},\"mixes\":" + std::to_string(c.mixes) + ",\"exhaustive\":" + (c.exhaustive ? "true" : "false") + "}";
}

}  // namespace

std::string number_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

void print_result(const train_options& o, const train_result& r) {
  static constexpr const char* kinds[] = {"all_gather", "all_reduce", "reduce_scatter", "all_to_all"};
  if (o.json) {
    std::string j = "{";
    j += "\"model\":" + quoted(o.model);
    j += ",\"mesh\":" + quoted(o.mesh);
    j += ",\"backend\":" + quoted(o.backend);
    j += ",\"dp\":" + quoted(r.parallel ? r.parallel->choice : o.dp_mode);
    j += ",\"dtype\":" + quoted(o.dtype);
    j += ",\"optimizer\":" + quoted(o.optimizer);
    j += ",\"lr\":" + number(o.lr);
    j += ",\"steps\":" + std::to_string(o.steps);
    j += ",\"losses\":" + list(r.losses);
    j += ",\"grad_norms\":" + list(r.grad_norms);
    j += ",\"bytes_per_rank\":" + std::to_string(r.bytes_per_rank);
    j += ",\"collectives_per_step\":{";
    for (int k = 0; k < 4; ++k) j += std::string(k ? "," : "") + quoted(kinds[k]) + ":" + std::to_string(r.collectives[k]);
    j += "}";
    j += ",\"clip\":" + (o.clip ? number(*o.clip) : std::string("null"));
    j += ",\"shuffle\":" + (o.shuffle ? std::to_string(*o.shuffle) : std::string("null"));
    j += ",\"steps_per_epoch\":" + std::to_string(r.steps_per_epoch);
    j += ",\"epoch\":" + std::to_string(r.epoch);
    if (r.parallel) j += ",\"auto\":" + choice_json(*r.parallel);  // only with --parallel auto: the fields above are a contract
    // "parallel" {dp, tp, cp}; a pipelined run adds "pp" to it and "schedule" after it (the
    // fields of a run without a pipeline are as before it existed: a contract)
    j += ",\"parallel\":{\"dp\":" + std::to_string(o.dp) + ",\"tp\":" + std::to_string(o.tp) +
         ",\"cp\":" + std::to_string(o.cp) + (r.pipeline ? ",\"pp\":" + std::to_string(o.pp) : std::string()) + "}";
    if (const auto& p = r.pipeline)
      j += ",\"schedule\":{\"name\":" + quoted(p->schedule) + ",\"stages\":" + std::to_string(p->stages) +
           ",\"virtual\":" + std::to_string(p->virtual_stages) + ",\"microbatches\":" + std::to_string(p->microbatches) +
           ",\"slots\":" + std::to_string(p->slots) + ",\"bubble\":" + number(p->bubble) + "}";
    j += "}";
    std::printf("%s\n", j.c_str());
    return;
  }
  double ms = 0;
  for (double t : r.step_ms) ms += t;
  const std::string clip = o.clip ? ", clip " + number_text(*o.clip) : "";
  const std::string from = r.first_step ? " from step " + std::to_string(r.first_step) : "";
  std::printf("\n%s on mesh %s (%s, %s, %s, %s, lr %g%s): %zu steps%s", o.model.c_str(), o.mesh.c_str(),
              o.backend.c_str(), r.parallel ? r.parallel->choice.c_str() : o.dp_mode.c_str(), o.dtype.c_str(), o.optimizer.c_str(), o.lr, clip.c_str(),
              r.losses.size(), from.c_str());
  if (r.losses.empty())  // resumed at --steps: the checkpoint is the end of the run
    std::printf(", nothing left to train (the checkpoint is at --steps %lld)\n", static_cast<long long>(o.steps));
  else
    std::printf(", loss %.9g -> %.9g, %.2f ms per step\n", r.losses.front(), r.losses.back(),
                r.step_ms.empty() ? 0.0 : ms / static_cast<double>(r.step_ms.size()));
  if (r.steps_per_epoch > 0)
    std::printf("data: %lld batches an epoch%s, the last step in epoch %lld\n", static_cast<long long>(r.steps_per_epoch),
                o.shuffle ? (", shuffled (seed " + std::to_string(*o.shuffle) + " + the epoch)").c_str() : "",
                static_cast<long long>(r.epoch));
  if (const auto& p = r.pipeline)
    std::printf("pipeline: %s over %d stage%s (%d per rank), %d microbatch%s a step; its table: %d slots, bubble %.4f\n",
                p->schedule.c_str(), p->stages * p->virtual_stages, p->stages * p->virtual_stages > 1 ? "s" : "",
                p->virtual_stages, p->microbatches, p->microbatches > 1 ? "es" : "", p->slots, p->bubble);
  if (const auto& c = r.parallel) {
    std::printf("parallel auto: %s, a modelled step of %.4g s (", c->choice.c_str(), c->step_s);
    for (std::size_t i = 0; i < c->candidates.size(); ++i)
      std::printf("%s%s %.4g s", i ? ", " : "", c->candidates[i].name.c_str(), c->candidates[i].step_s);
    std::printf("); the search over every placement: %.4g s%s; chosen in %.1f ms\n", c->unrestricted_step_s,
                c->optimal ? ", so the choice is optimal under the cost model" : "", c->search_ms);
    if (c->choice == "per-unit") {
      std::printf("units:");
      for (std::size_t i = 0; i < c->units.size(); ++i)
        std::printf("%s %s %s", i ? "," : "", c->units[i].first.empty() ? "(model)" : c->units[i].first.c_str(),
                    c->units[i].second.c_str());
      std::printf(" (the best of %ld mixes%s)\n", c->mixes, c->exhaustive ? "" : ", not every one searched");
    }
  }
  std::printf("bytes per rank (parameters + gradients + optimizer state, the most any rank holds): %lld\n",
              static_cast<long long>(r.bytes_per_rank));
  std::printf("collectives per step:");
  for (int k = 0; k < 4; ++k) std::printf(" %s %d%s", kinds[k], r.collectives[k], k < 3 ? "," : "\n");
}

std::int64_t first_non_finite(const train_result& r) {
  for (std::size_t i = 0; i < r.losses.size(); ++i)
    if (!std::isfinite(r.losses[i]) || (i < r.grad_norms.size() && !std::isfinite(r.grad_norms[i])))
      return r.first_step + static_cast<std::int64_t>(i) + 1;
  return 0;
}

void warn_non_finite(const train_result& r, std::int64_t step) {
  const std::size_t i = static_cast<std::size_t>(step - r.first_step - 1);
  const auto text = [](double v) { return std::isnan(v) ? std::string("nan") : number_text(v); };  // not "-nan"
  std::fprintf(stderr, "spmd-train: warning: training diverged at step %lld (loss %s, gradient norm %s); exit code 3\n",
               static_cast<long long>(step), text(r.losses[i]).c_str(), text(r.grad_norms[i]).c_str());
}

}  // namespace spmd_train
