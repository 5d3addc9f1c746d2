// tools/train/inputs.cpp — reading and checking INIT and DATA (inputs.hpp).
#include "inputs.hpp"

#include <cstring>

#include "spmd/io/safetensors.hpp"

namespace spmd_train {

model_spec mlp_spec() {
  model_spec s;
  s.name = "mlp";
  s.batch = 16, s.d_in = 32, s.classes = 16;
  s.tp_units = 64, s.tp_unit_name = "hidden features", s.tp_divides = false;
  s.params = {{"w1", {64, 32}}, {"b1", {64}}, {"w2", {16, 64}}, {"b2", {16}}};
  return s;
}

model_spec gpt_spec(std::int64_t vocab, std::int64_t context, std::int64_t width, std::int64_t heads,
                    std::int64_t batch) {
  model_spec s;
  s.name = "gpt";
  s.batch = batch, s.context = context, s.vocab = vocab, s.heads = heads;
  s.tp_units = heads, s.tp_unit_name = "heads";
  const std::int64_t c = width;
  s.params = {{"wte", {vocab, c}}, {"wpe", {context, c}}};
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    s.params.push_back({b + "ln1.weight", {c}});
    s.params.push_back({b + "ln1.bias", {c}});
    for (const char* w : {"wq", "wk", "wv", "wo"}) s.params.push_back({b + "attn." + w, {c, c}});
    s.params.push_back({b + "ln2.weight", {c}});
    s.params.push_back({b + "ln2.bias", {c}});
    s.params.push_back({b + "mlp.w1", {4 * c, c}});
    s.params.push_back({b + "mlp.b1", {4 * c}});
    s.params.push_back({b + "mlp.w2", {c, 4 * c}});
    s.params.push_back({b + "mlp.b2", {c}});
  }
  s.params.push_back({"ln_f.weight", {c}});
  s.params.push_back({"ln_f.bias", {c}});
  s.params.push_back({"lm_head", {vocab, c}});
  return s;
}

model_spec spec_of(const std::string& model) {
  if (model == "mlp") return mlp_spec();
  if (model == "gpt") return gpt_spec();
  throw usage_error("--model " + model + ": the models are mlp and gpt");
}

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

/// The entry `name` of `f`, of T, with `shape` (for DATA: dim 0 at least `min_steps`).
template <class T>
const spmd::io::tensor_entry& expect(const spmd::io::safetensors_file& f, const std::string& what,
                                     const std::string& name, std::vector<std::int64_t> shape,
                                     std::int64_t min_steps = -1) {
  if (!f.contains(name))
    throw usage_error(what + " " + f.path() + ": no tensor '" + name + "' (expected " +
                      spmd::io::dtype_name(spmd::io::dtype_of<T>()) + " " +
                      (min_steps >= 0 ? "(steps, ...) = " : "") + shape_text(shape) + ")");
  const spmd::io::tensor_entry& e = f.at(name);
  std::vector<std::int64_t> found(e.shape.begin(), e.shape.end());
  if (min_steps >= 0 && !found.empty() && found.size() == shape.size()) shape[0] = found[0];
  if (e.type != spmd::io::dtype_of<T>() || found != shape)
    throw usage_error(what + " " + f.path() + ": tensor '" + name + "' should be " +
                      spmd::io::dtype_name(spmd::io::dtype_of<T>()) + " " + shape_text(shape) + ", found " +
                      spmd::io::dtype_name(e.type) + " " + shape_text(found));
  if (min_steps >= 0 && found[0] < min_steps)
    throw usage_error(what + " " + f.path() + ": tensor '" + name + "' holds " + std::to_string(found[0]) +
                      " steps, --steps asks for " + std::to_string(min_steps));
  return e;
}

template <class T>
std::vector<T> read_all(const spmd::io::safetensors_file& f, const spmd::io::tensor_entry& e) {
  std::vector<T> v(static_cast<std::size_t>(e.elements()));
  if (!v.empty()) std::memcpy(v.data(), f.data(e), v.size() * sizeof(T));
  return v;
}

void check_range(const std::vector<std::int64_t>& v, std::int64_t n, const std::string& where, const std::string& name,
                 const std::vector<std::int64_t>& shape) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] >= n) {
      std::string at;
      std::size_t r = i;
      std::vector<std::int64_t> idx(shape.size());
      for (std::size_t d = shape.size(); d-- > 0;) {
        idx[d] = static_cast<std::int64_t>(r % static_cast<std::size_t>(shape[d]));
        r /= static_cast<std::size_t>(shape[d]);
      }
      for (std::size_t d = 0; d < idx.size(); ++d) at += (d ? ", " : "") + std::to_string(idx[d]);
      throw usage_error(where + ": " + name + "[" + at + "] = " + std::to_string(v[i]) + " is out of range [0, " +
                        std::to_string(n) + ")");
    }
}

}  // namespace

inputs read_inputs(const train_options& o, const model_spec& spec) {
  inputs in;
  try {
    const spmd::io::safetensors_file init(o.init);
    for (const param_spec& p : spec.params)
      in.params[p.name] = read_all<float>(init, expect<float>(init, "--init", p.name, p.shape));
    const spmd::io::safetensors_file data(o.data);
    const std::string where = "--data " + data.path();
    if (spec.name == "mlp") {
      const auto& x = expect<float>(data, "--data", "x", {o.steps, spec.batch, spec.d_in}, o.steps);
      const auto& l = expect<std::int64_t>(data, "--data", "labels", {x.shape[0], spec.batch}, o.steps);
      in.data_steps = x.shape[0];
      in.x = read_all<float>(data, x);
      in.labels = read_all<std::int64_t>(data, l);
      check_range(in.labels, spec.classes, where, "labels", {l.shape.begin(), l.shape.end()});
    } else {
      const auto& t = expect<std::int64_t>(data, "--data", "tokens", {o.steps, spec.batch, spec.context}, o.steps);
      const auto& g = expect<std::int64_t>(data, "--data", "targets", {t.shape[0], spec.batch, spec.context}, o.steps);
      in.data_steps = t.shape[0];
      in.tokens = read_all<std::int64_t>(data, t);
      in.targets = read_all<std::int64_t>(data, g);
      check_range(in.tokens, spec.vocab, where, "tokens", {t.shape.begin(), t.shape.end()});
      check_range(in.targets, spec.vocab, where, "targets", {g.shape.begin(), g.shape.end()});
    }
  } catch (const spmd::io::checkpoint_error& e) {
    throw usage_error(e.what());  // unreadable, truncated or corrupt
  }
  return in;
}

}  // namespace spmd_train
