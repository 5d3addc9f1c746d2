// spmd/io/training_state.hpp — resumable training: parameters, optimizer state, step count and
// random generator in one safetensors checkpoint, each rank writing its own blocks, loaded
// into any layout (another mesh, FSDP -> DDP -> one device: the load reshards).
//
//   spmd::runtime::adamw opt({.lr = 0.01}, w1, b1);          // w1's leaf name is "w1"
//   spmd::io::save_training_state("ck.safetensors", opt, {.step = 10, .generator = gen.get_state()});
//   ...
//   spmd::io::training_meta m = spmd::io::load_training_state("ck.safetensors", opt2);  // m.step == 10
//
// The file (docs/training.md): every parameter under its leaf name (requires_grad's name), its
// global value as save_tensors writes it; its optimizer state beside it, torch's names —
// `<name>.exp_avg` and `<name>.exp_avg_sq` (AdamW), `<name>.momentum_buffer` (SGD) — zeros
// before the first step; and metadata: "spmd.optimizer" (adamw, sgd), "spmd.step",
// "<name>.step" (AdamW's per-parameter step; SGD: 1 once it has a momentum buffer),
// "spmd.generator.seed" and "spmd.generator.offset" when given. The state is stored as the
// parameter is (f32 parameters: f32 state), so a resume on the same mesh and backend continues
// bit for bit.
//
// Several optimizers (an optimizer per unit of a model whose units chose FSDP or DDP at run
// time) write one checkpoint as parts, in the same format, and read it back, or any one
// optimizer over the same parameters does:
//
//   spmd::io::save_training_state<B>("ck.safetensors", {io::state_part_of(up), io::state_part_of(down)}, meta);
//   spmd::io::load_training_state("ck.safetensors", {io::state_part_of(up2), io::state_part_of(down2)});
//
// Errors are checkpoint_error naming the file and what is wrong — another optimizer, a missing
// parameter or state entry, another shape or dtype (another model), a missing or malformed
// step — and are found before anything is changed: a failed load leaves the optimizer and its
// parameters as they were. A save writes a temporary file and renames it over the old one only
// when every rank's blocks are written, so the previous checkpoint stays whole if it fails.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/io/checkpoint.hpp"
#include "spmd/random/generator.hpp"
#include "spmd/runtime/optim.hpp"

namespace spmd::io {

/// What a training checkpoint records besides the tensors.
struct training_meta {
  std::int64_t step = 0;                        // training steps done
  std::optional<generator_state> generator;     // the random generator's state
};

namespace detail {

/// The state tensors each optimizer keeps per parameter, and how to read and set them.
template <class Opt>
struct optimizer_state;

template <class... Ps>
struct optimizer_state<runtime::adamw<Ps...>> {
  using opt_type = runtime::adamw<Ps...>;
  static constexpr std::size_t count = 2;
  static constexpr const char* suffix[count] = {".exp_avg", ".exp_avg_sq"};
  template <std::size_t I>
  static auto tensors(const opt_type& o) {
    const auto& s = o.template state_of<I>();
    if (s) return std::make_tuple(s->exp_avg, s->exp_avg_sq);
    const auto& p = std::get<I>(o.parameters());
    using V = std::remove_cvref_t<decltype(p)>;
    auto z = runtime::factories<typename V::backend_type>::template full<typename V::element_type>(
        typename V::element_type(0), p.layout());
    return std::make_tuple(z, z);
  }
  template <std::size_t I>
  static std::int64_t step(const opt_type& o) {
    const auto& s = o.template state_of<I>();
    return s ? s->step : 0;
  }
  template <std::size_t I, class Tuple>
  static void set(opt_type& o, Tuple&& t, std::int64_t step) {
    auto& s = o.template state_of<I>();
    if (step == 0) s.reset();
    else s.emplace(typename std::remove_cvref_t<decltype(*s)>{std::move(std::get<0>(t)), std::move(std::get<1>(t)), step});
  }
};

template <class... Ps>
struct optimizer_state<runtime::sgd<Ps...>> {
  using opt_type = runtime::sgd<Ps...>;
  static constexpr std::size_t count = 1;
  static constexpr const char* suffix[count] = {".momentum_buffer"};
  template <std::size_t I>
  static auto tensors(const opt_type& o) {
    const auto& b = o.template momentum_buffer<I>();
    if (b) return std::make_tuple(*b);
    const auto& p = std::get<I>(o.parameters());
    using V = std::remove_cvref_t<decltype(p)>;
    return std::make_tuple(runtime::factories<typename V::backend_type>::template full<typename V::element_type>(
        typename V::element_type(0), p.layout()));
  }
  template <std::size_t I>
  static std::int64_t step(const opt_type& o) {
    return o.template momentum_buffer<I>() ? 1 : 0;
  }
  template <std::size_t I, class Tuple>
  static void set(opt_type& o, Tuple&& t, std::int64_t step) {
    auto& b = o.template momentum_buffer<I>();
    if (step == 0) b.reset();
    else b.emplace(std::move(std::get<0>(t)));
  }
};

inline std::int64_t parse_int(const std::map<std::string, std::string>& meta, const std::string& key,
                              const std::string& path) {
  const auto it = meta.find(key);
  if (it == meta.end())
    throw checkpoint_error(path + ": the metadata has no '" + key + "' (not a complete spmd training checkpoint)");
  // Digits only, as the writer puts them: no sign, space or exponent that stoll would take.
  const std::string& text = it->second;
  std::int64_t v = 0;
  bool ok = !text.empty() && text.size() <= 18;  // 18 digits cannot overflow
  for (const char c : text) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) v = v * 10 + (c - '0');
  }
  if (!ok) throw checkpoint_error(path + ": metadata '" + key + "' is '" + text + "', not a count >= 0");
  return v;
}

/// Parameter I's value and optimizer state from `file`, in the parameter's layout.
template <std::size_t I, class S, class Opt, std::size_t... K>
auto load_parameter(const safetensors_file& file, const std::string& name, const Opt& opt, std::index_sequence<K...>) {
  const auto& p = std::get<I>(opt.parameters());
  using V = std::remove_cvref_t<decltype(p)>;
  using T = typename V::element_type;
  using L = typename V::layout_type;
  using B = typename V::backend_type;
  auto value = load_from<T, L, B>(file, name, p.layout());
  auto state = std::make_tuple(load_from<T, L, B>(file, name + S::suffix[K], p.layout())...);
  return std::make_pair(std::move(value), std::move(state));
}
template <std::size_t I, class S, class Opt>
auto load_parameter(const safetensors_file& file, const std::string& name, const Opt& opt) {
  return load_parameter<I, S>(file, name, opt, std::make_index_sequence<S::count>{});
}

}  // namespace detail

/// One optimizer's share of a training checkpoint: several optimizers can write one file (an
/// optimizer per unit whose holding was chosen at run time, nn/unit_choice.hpp), with the
/// format one optimizer writes, so any of them reads it back. It refers to the optimizer,
/// which must outlive it.
struct state_part {
  std::string optimizer;            // Opt::name
  std::vector<std::string> names;   // its parameters' leaf names
  /// Adds its parameters and state (in parameter order, each value then its state) and its
  /// per-parameter metadata.
  std::function<void(std::vector<saved_tensor>&, std::map<std::string, std::string>&)> save;
  /// Reads its parameters and state from the file (throwing checkpoint_error, changing nothing,
  /// when they do not fit) and returns what sets them.
  std::function<std::function<void()>(const safetensors_file&, const std::string& path)> stage;
};

namespace detail {
/// Parameter I of opt and its state, to save under `name`.
template <std::size_t I, class Opt>
void add_saved(const Opt& opt, const std::string& name, std::vector<saved_tensor>& out) {
  using S = optimizer_state<Opt>;
  out.push_back(to_save(name, std::get<I>(opt.parameters()).value()));
  auto state = S::template tensors<I>(opt);  // copies share the optimizer's buffers where the backend can
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (out.push_back(to_save(name + S::suffix[K], std::move(std::get<K>(state)))), ...);
  }(std::make_index_sequence<S::count>{});
}

/// opt's share of a checkpoint to write (no stage: a const optimizer is only saved).
template <class Opt>
state_part saved_part_of(const Opt& opt, const std::string& prefix = {}) {
  using S = optimizer_state<Opt>;
  state_part part;
  part.optimizer = Opt::name;
  std::apply([&](const auto&... p) { (part.names.push_back(prefix + std::string(p.name())), ...); }, opt.parameters());
  part.save = [&opt, names = part.names](std::vector<saved_tensor>& out, std::map<std::string, std::string>& metadata) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((metadata[names[I] + ".step"] = std::to_string(S::template step<I>(opt))), ...);
      (add_saved<I>(opt, names[I], out), ...);
    }(std::make_index_sequence<Opt::size>{});
  };
  return part;
}
}  // namespace detail

/// opt's share of a checkpoint; its parameters named `prefix` + their leaf names (a piece of a
/// model, optimized on its own, under the whole model's names: a pipeline's stages).
template <class Opt>
state_part state_part_of(Opt& opt, const std::string& prefix = {}) {
  using S = detail::optimizer_state<Opt>;
  state_part part = detail::saved_part_of(opt, prefix);
  part.stage = [&opt, names = part.names](const safetensors_file& file, const std::string& path) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      const auto& md = file.metadata();
      const std::array<std::int64_t, sizeof...(I)> steps{detail::parse_int(md, names[I] + ".step", path)...};
      auto loaded = std::make_shared<decltype(std::make_tuple(detail::load_parameter<I, S>(file, names[I], opt)...))>(
          std::make_tuple(detail::load_parameter<I, S>(file, names[I], opt)...));
      return std::function<void()>([&opt, loaded, steps] {
        (
            [&] {
              auto& [value, state] = std::get<I>(*loaded);
              std::get<I>(opt.parameters()).value() = std::move(value);
              S::template set<I>(opt, std::move(state), steps[I]);
            }(),
            ...);
      });
    }(std::make_index_sequence<Opt::size>{});
  };
  return part;
}

namespace detail {
/// The parts' names, checked unique across them (they are the checkpoint's keys), and their
/// optimizer, checked one.
inline std::string check_parts(const std::vector<state_part>& parts, const std::string& path) {
  if (parts.empty()) throw std::invalid_argument("spmd::io: a training checkpoint of no optimizer (" + path + ")");
  std::set<std::string> seen;
  for (const state_part& p : parts) {
    if (p.optimizer != parts.front().optimizer)
      throw std::invalid_argument("spmd::io: a training checkpoint of one optimizer kind; " + path + " was given " +
                                  parts.front().optimizer + " and " + p.optimizer);
    for (const std::string& n : p.names)
      if (!seen.insert(n).second)
        throw checkpoint_error(path + ": two parameters are named '" + n +
                               "'; a training checkpoint keys tensors by the names given to requires_grad");
  }
  return parts.front().optimizer;
}
}  // namespace detail

/// Saves the parts' parameters and state, and `meta`, at `path` as one file, every process of
/// backend B writing its blocks (see the header comment).
template <class B>
void save_training_state(const std::string& path, const std::vector<state_part>& parts, const training_meta& meta = {},
                         save_options options = {}) {
  options.metadata["spmd.optimizer"] = detail::check_parts(parts, path);
  options.metadata["spmd.step"] = std::to_string(meta.step);
  if (meta.generator) {
    options.metadata["spmd.generator.seed"] = std::to_string(meta.generator->seed);
    options.metadata["spmd.generator.offset"] = std::to_string(meta.generator->offset);
  }
  std::vector<saved_tensor> tensors;
  for (const state_part& p : parts) p.save(tensors, options.metadata);
  save_tensors<B>(path, options, tensors);
}

/// Saves opt's parameters and state, and `meta`, at `path` (see the header comment).
template <class Opt>
  requires requires(const Opt& o) { o.parameters(); }
void save_training_state(const std::string& path, const Opt& opt, const training_meta& meta = {}, save_options options = {}) {
  using B = typename std::remove_cvref_t<std::tuple_element_t<0, std::remove_cvref_t<decltype(opt.parameters())>>>::backend_type;
  save_training_state<B>(path, std::vector<state_part>{detail::saved_part_of(opt)}, meta, std::move(options));
}

/// Loads a checkpoint of save_training_state into the parts' parameters and state (their own
/// layouts: the load reshards) and returns its step and generator state. Throws
/// checkpoint_error, changing nothing, when the file does not fit (see the header comment).
inline training_meta load_training_state(const std::string& path, const std::vector<state_part>& parts) {
  const std::string name = detail::check_parts(parts, path);
  const safetensors_file file(path);
  const auto& md = file.metadata();
  const auto kind = md.find("spmd.optimizer");
  if (kind == md.end())
    throw checkpoint_error(path + ": holds no training state (no 'spmd.optimizer' in its metadata)");
  if (kind->second != name)
    throw checkpoint_error(path + ": was saved by the " + kind->second + " optimizer; this one is " + name);
  training_meta meta;
  meta.step = detail::parse_int(md, "spmd.step", path);
  if (md.count("spmd.generator.seed") || md.count("spmd.generator.offset"))
    meta.generator = generator_state{static_cast<std::uint64_t>(detail::parse_int(md, "spmd.generator.seed", path)),
                                     static_cast<std::uint64_t>(detail::parse_int(md, "spmd.generator.offset", path))};
  // Everything is read before anything is set.
  std::vector<std::function<void()>> set;
  for (const state_part& p : parts) set.push_back(p.stage(file, path));
  for (const auto& f : set) f();
  return meta;
}

/// Loads a checkpoint of save_training_state into opt (see the parts' form).
template <class Opt>
  requires requires(Opt& o) { o.parameters(); }
training_meta load_training_state(const std::string& path, Opt& opt) {
  return load_training_state(path, std::vector<state_part>{state_part_of(opt)});
}

}  // namespace spmd::io
