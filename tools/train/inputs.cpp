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

/// INIT's entry `name`, of T, with `shape`.
template <class T>
const spmd::io::tensor_entry& expect(const spmd::io::safetensors_file& f, const std::string& what,
                                     const std::string& name, const std::vector<std::int64_t>& shape) {
  if (!f.contains(name))
    throw usage_error(what + " " + f.path() + ": no tensor '" + name + "' (expected " +
                      spmd::io::dtype_name(spmd::io::dtype_of<T>()) + " " + shape_text(shape) + ")");
  const spmd::io::tensor_entry& e = f.at(name);
  const std::vector<std::int64_t> found(e.shape.begin(), e.shape.end());
  if (e.type != spmd::io::dtype_of<T>() || found != shape)
    throw usage_error(what + " " + f.path() + ": tensor '" + name + "' should be " +
                      spmd::io::dtype_name(spmd::io::dtype_of<T>()) + " " + shape_text(shape) + ", found " +
                      spmd::io::dtype_name(e.type) + " " + shape_text(found));
  return e;
}

/// DATA's tensor `name`: of T, its shape ending with a sample's (leading dims: the samples).
template <class T>
const spmd::io::tensor_entry& expect_samples(const spmd::io::safetensors_file& f, const std::string& name,
                                             const std::vector<std::int64_t>& sample) {
  std::string want = std::string(spmd::io::dtype_name(spmd::io::dtype_of<T>())) + " (samples";
  for (const std::int64_t e : sample) want += ", " + std::to_string(e);
  want += ")";
  if (!f.contains(name)) throw usage_error("--data " + f.path() + ": no tensor '" + name + "' (expected " + want + ")");
  const spmd::io::tensor_entry& e = f.at(name);
  std::vector<std::int64_t> found(e.shape.begin(), e.shape.end());
  const bool ends = found.size() >= sample.size() &&
                    std::equal(sample.begin(), sample.end(), found.end() - static_cast<std::ptrdiff_t>(sample.size()));
  if (e.type != spmd::io::dtype_of<T>() || !ends)
    throw usage_error("--data " + f.path() + ": tensor '" + name + "' should be " + want + ", found " +
                      spmd::io::dtype_name(e.type) + " " + shape_text(found));
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
    // DATA: checked whole here (types, shapes, every label and token in range); training
    // reads it through the loader (make_loader), each rank its own rows.
    const spmd::io::safetensors_file data(o.data);
    const std::string where = "--data " + data.path();
    if (spec.name == "mlp") {
      expect_samples<float>(data, "x", {spec.d_in});
      const auto& l = expect_samples<std::int64_t>(data, "labels", {});
      check_range(read_all<std::int64_t>(data, l), spec.classes, where, "labels", {l.shape.begin(), l.shape.end()});
    } else {
      for (const char* name : {"tokens", "targets"}) {
        const auto& t = expect_samples<std::int64_t>(data, name, {spec.context});
        check_range(read_all<std::int64_t>(data, t), spec.vocab, where, name, {t.shape.begin(), t.shape.end()});
      }
    }
  } catch (const spmd::io::checkpoint_error& e) {
    throw usage_error(e.what());  // unreadable, truncated or corrupt
  }
  return in;
}

std::shared_ptr<const spmd::io::data_loader> make_loader(const train_options& o, const model_spec& spec) {
  std::vector<spmd::io::sample_field> fields;
  if (spec.name == "mlp") fields = {{"x", {spec.d_in}}, {"labels", {}}};
  else fields = {{"tokens", {spec.context}}, {"targets", {spec.context}}};
  try {
    return std::make_shared<const spmd::io::data_loader>(
        spmd::io::safetensors_dataset({o.data}, std::move(fields)),
        spmd::io::batch_options{.batch = spec.batch, .replicas = o.dp, .shuffle = o.shuffle.has_value(),
                                .seed = static_cast<std::uint64_t>(o.shuffle.value_or(0))});
  } catch (const std::invalid_argument& e) {
    throw usage_error("--data " + o.data + ": " + e.what());
  } catch (const spmd::io::checkpoint_error& e) {
    throw usage_error(e.what());
  }
}

}  // namespace spmd_train
