// spmd/runtime/observe/hooks.hpp — where the runtime and the backends report to the log and
// the timeline. Each call site is
//
//   return observe::around([&] { return work(); }, [&] { return observe::on_...(...); });
//
// which runs work() alone when nothing watches (observe::active(): one load, one branch),
// and otherwise first logs the decision and opens a trace span that closes when work()
// returns. The text is built only when someone watches.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "spmd/core/config.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/trace.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/runtime/observe/log.hpp"
#include "spmd/runtime/observe/switch.hpp"
#include "spmd/runtime/observe/text.hpp"
#include "spmd/host/text_out.hpp"
#include "spmd/runtime/observe/trace.hpp"

namespace spmd::observe {

namespace detail {
/// A span that exists only when something watched at its start. work() is instantiated
/// once (not once per branch), so watching costs no compile time in the callers.
class maybe_span {
 public:
  maybe_span() = default;
  maybe_span(const maybe_span&) = delete;
  maybe_span& operator=(const maybe_span&) = delete;
  ~maybe_span() {
    if (on_) [[unlikely]]
      std::launder(reinterpret_cast<timeline::span*>(bytes_))->~span();
  }
  template <class Watch>
  void open(Watch&& watch) {
    ::new (static_cast<void*>(bytes_)) timeline::span(watch());
    on_ = true;
  }

 private:
  bool on_ = false;
  alignas(timeline::span) unsigned char bytes_[sizeof(timeline::span)];
};
}  // namespace detail

/// work(), watched by watch() (which logs and returns the trace span to hold until work()
/// has returned) when anything watches. On the hottest paths (an operator's apply, a typed
/// redistribute) the branch is written out, the unwatched work a direct call: wrapped in a
/// lambda, g++ stopped inlining the op's body into its caller (bench/op_overhead at -O2:
/// +115 instructions per small add; written out, +6).
template <class Work, class Watch>
SPMD_FORCE_INLINE inline decltype(auto) around(Work&& work, Watch&& watch) {
  detail::maybe_span s;
  if (active()) [[unlikely]]
    s.open(watch);
  return work();
}

/// The same for work queued on a device: sync() waits for the device before the span opens
/// and again before it closes, so the span is the work's device time.
template <class Work, class Watch, class Sync>
SPMD_FORCE_INLINE inline void around_synced(Work&& work, Watch&& watch, Sync&& sync) {
  if (!active()) [[likely]] {
    work();
    return;
  }
  sync();
  [[maybe_unused]] const timeline::span s = watch();
  work();
  sync();
}

// The hooks below are cold and out of line: they run only when something watches, and the
// callers' one branch stays small. Their text is built by host::text_out's calls
// (host/text_out.hpp says why).

/// A plan step as it runs: step i of n on a tensor of shape `global`, in the process that
/// holds ranks [lo, lo + count).
[[gnu::cold, gnu::noinline]] inline timeline::span on_step(const plan_step& s, int i, int n, const shape_vec& global,
                                                          index_t element_bytes, index_t lo, index_t count) {
  if (watching(log_steps)) {
    host::text_out t;
    t << "  step " << i + 1 << '/' << n << ' ' << step_text(s, global, element_bytes) << ": "
      << placements_text(s.from) << "->" << placements_text(s.to);
    log::line(lo, count, t.str());
  }
  if (!watching(trace)) return {};
  const char* kind = step_kind_text(s.kind);
  host::text_out a;
  a << "\"kind\":" << timeline::quoted(kind) << ",\"mesh_dims\":" << timeline::quoted(dims_text(s.mesh_dims))
    << ",\"bytes_per_rank\":" << (is_collective(s.kind) ? traffic(s, global, element_bytes).max_rank_bytes : 0)
    << ",\"from\":" << timeline::quoted(placements_text(s.from)) << ",\"to\":" << timeline::quoted(placements_text(s.to))
    << ",\"step\":" << i + 1;
  return timeline::span("step", kind, lo, count, std::move(a).str());
}

/// A redistribute by the compile-time or run-time plan p from `src` to `dst` of elements of
/// `element_bytes` bytes named `element` ("f32").
[[gnu::cold, gnu::noinline]] inline timeline::span on_redistribute(const plan& p, const layout_spec& src,
                                                                  const layout_spec& dst, const shape_vec& global,
                                                                  host::held_range h, bool compile_time,
                                                                  index_t element_bytes, const char* element) {
  const std::string from = placements_text(src), to = placements_text(dst);
  const std::string tr(spmd::trace(p, src, dst).view());
  index_t bytes = 0;
  for (const plan_step& s : p.steps)
    if (is_collective(s.kind)) bytes += traffic(s, global, element_bytes).max_rank_bytes;
  if (watching(log_redistribute)) {
    host::text_out t;
    t << "redistribute " << layout_text(src, global, element) << " -> " << to << ": plan " << tr << ", "
      << p.steps.size() << (p.steps.size() == 1 ? " step" : " steps");
    for (int i = 0; i < p.steps.size(); ++i)  // each step as spmd-plan plan shows it
      t << (i ? "; " : " (") << step_text(p.steps[i], global, element_bytes) << (i + 1 == p.steps.size() ? ")" : "");
    t << ", " << bytes << " B/rank, " << (compile_time ? "compile time" : "run time");
    log::line(h.lo, h.count(), t.str());
  }
  if (!watching(trace)) return {};
  host::text_out name, a;
  name << from << "->" << to;
  a << "\"from\":" << timeline::quoted(from) << ",\"to\":" << timeline::quoted(to) << ",\"plan\":"
    << timeline::quoted(tr) << ",\"steps\":" << p.steps.size() << ",\"bytes_per_rank\":" << bytes
    << ",\"shape\":" << timeline::quoted(shape_text(global)) << ",\"element\":\"" << element << '"';
  return timeline::span("redistribute", std::move(name).str(), h.lo, h.count(), std::move(a).str());
}

/// The same for elements W.
template <class W>
timeline::span on_redistribute(const plan& p, const layout_spec& src, const layout_spec& dst, const shape_vec& global,
                               host::held_range h, bool compile_time) {
  return on_redistribute(p, src, dst, global, h, compile_time, index_t{sizeof(W)}, host::element_name<W>());
}

/// One operator input for on_op: its layout, shape, and the placements the op computes it in.
struct op_input {
  const layout_spec *given, *used;  // constants: detail::spec_constant
  shape_vec global;
  const char* element;
};

/// Operator `name` on `inputs`, computing in `out` (then moved to `final` when forced).
[[gnu::cold, gnu::noinline]] inline timeline::span on_op(std::string_view name, const op_input* in, int n,
                                                        const layout_spec& out, const layout_spec& final,
                                                        const char* out_element, host::held_range h) {
  host::text_out ins;
  for (int i = 0; i < n; ++i) {
    ins << (i ? ", in" : "in") << i << ' ' << layout_text(*in[i].given, in[i].global, in[i].element);
    if (*in[i].given == *in[i].used) ins << " (kept)";
    else ins << " -> " << placements_text(*in[i].used) << " (redistribute)";
  }
  host::text_out outs;
  outs << out_element << ' ' << placements_text(out);
  if (!(final == out)) outs << " -> " << placements_text(final) << " (forced)";
  if (watching(log_ops)) {
    host::text_out t;
    t << "op " << name << ": " << ins.str() << " => out " << outs.str() << ", compile time";
    log::line(h.lo, h.count(), t.str());
  }
  if (!watching(trace)) return {};
  host::text_out a;
  a << "\"inputs\":" << timeline::quoted(ins.str()) << ",\"out\":" << timeline::quoted(outs.str());
  return timeline::span("op", std::string(name), h.lo, h.count(), std::move(a).str());
}

}  // namespace spmd::observe
