// spmd/io/data_loader.hpp — training data from safetensors files: samples cycled over epochs,
// shuffled or not, each rank reading only the rows of its own block of a step's batch.
//
//   spmd::io::safetensors_dataset data({"part0.safetensors", "part1.safetensors"},
//                                      {{"tokens", {16}}, {"targets", {16}}});   // a sample: 16 of each
//   spmd::io::data_loader loader(std::move(data), {.batch = 8, .replicas = dp, .shuffle = true, .seed = 1});
//   auto x = loader.batch<std::int64_t, L, B>("tokens", step);   // dtensor of layout L: (8, 16)
//   loader.epoch_of(step);
//
// A dataset is the files' samples in order. In each file a field's tensor has the field's
// sample shape as its last dims; its leading dims, flattened, count the samples (so a file of
// (steps, batch, 16) and one of (samples, 16) are both samples of 16), and every field of a
// file counts the same number. Which samples a step reads, in which rows of its batch, is
// batch_order's (io/sampler.hpp: DistributedSampler's shares when the replicas divide the
// batch).
//
// batch<U, L, B>(name, step) makes the step's batch a dtensor of layout L (dim 0 the batch;
// Shard and Replicate placements, no Partial) on backend B: each rank this process holds
// reads, from the memory-mapped files, only the samples of its block's rows, converted to U
// (floating types from floating ones, integers from integers). The replicas of the loader
// must be the mesh dims that shard dim 0 (the data-parallel ranks): their product is what
// batch() checks.
//
// Errors are std::invalid_argument (bad arguments: a field a file lacks, shapes that do not
// end with the sample shape, a type that does not convert, a layout that does not fit) or
// spmd::io::checkpoint_error (an unreadable or corrupt file), each naming the file and field.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/layout_spec.hpp"
#include "spmd/io/safetensors.hpp"
#include "spmd/io/sampler.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd::io {

/// A field of a sample: a tensor name and the shape one sample holds of it.
struct sample_field {
  std::string name;
  std::vector<index_t> shape;  // {} for one value a sample
};

namespace detail {

inline std::string dims_text(const std::vector<index_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

template <class U, class S>
void convert_rows(const char* src, index_t n, U* out) {
  for (index_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, src + i * static_cast<index_t>(sizeof(S)), sizeof(S));
    if constexpr (std::is_same_v<S, bfloat16> || std::is_same_v<S, float16>) out[i] = static_cast<U>(static_cast<float>(v));
    else out[i] = static_cast<U>(v);
  }
}

}  // namespace detail

/// The samples of one or more safetensors files, in order (see the top of this file).
class safetensors_dataset {
 public:
  safetensors_dataset(const std::vector<std::string>& paths, std::vector<sample_field> fields)
      : fields_(std::move(fields)) {
    if (paths.empty()) throw std::invalid_argument("spmd::io::safetensors_dataset: no files");
    if (fields_.empty()) throw std::invalid_argument("spmd::io::safetensors_dataset: no fields");
    for (const std::string& p : paths) {
      files_.push_back(std::make_unique<safetensors_file>(p));
      const safetensors_file& f = *files_.back();
      index_t count = -1;
      for (std::size_t k = 0; k < fields_.size(); ++k) {
        const sample_field& s = fields_[k];
        if (!f.contains(s.name))
          throw std::invalid_argument(f.path() + ": no tensor '" + s.name + "' (a sample's " + detail::dims_text(s.shape) + ")");
        const tensor_entry& e = f.at(s.name);
        const bool ends = e.shape.size() >= s.shape.size() &&
                          std::equal(s.shape.begin(), s.shape.end(), e.shape.end() - static_cast<std::ptrdiff_t>(s.shape.size()));
        if (!ends)
          throw std::invalid_argument(f.path() + ": tensor '" + s.name + "' has shape " + detail::dims_text(e.shape) +
                                      ", which does not end with a sample's " + detail::dims_text(s.shape));
        index_t n = 1;
        for (std::size_t d = 0; d + s.shape.size() < e.shape.size(); ++d) n *= e.shape[d];
        if (k == 0) {
          count = n;
        } else if (n != count) {
          throw std::invalid_argument(f.path() + ": tensor '" + s.name + "' holds " + std::to_string(n) +
                                      " samples, '" + fields_[0].name + "' " + std::to_string(count));
        }
        if (files_.size() > 1 && e.type != files_[0]->at(s.name).type)
          throw std::invalid_argument(f.path() + ": tensor '" + s.name + "' is " + dtype_name(e.type) + ", " +
                                      files_[0]->path() + "'s " + dtype_name(files_[0]->at(s.name).type));
      }
      first_.push_back(size_);
      size_ += count;
    }
  }

  /// Samples in all files.
  index_t size() const { return size_; }
  const std::vector<sample_field>& fields() const { return fields_; }
  /// The field `name`, or std::invalid_argument naming the fields there are.
  const sample_field& field(const std::string& name) const {
    for (const sample_field& s : fields_)
      if (s.name == name) return s;
    std::string names;
    for (const sample_field& s : fields_) names += (names.empty() ? "" : ", ") + s.name;
    throw std::invalid_argument("spmd::io::safetensors_dataset: no field '" + name + "' (the fields: " + names + ")");
  }
  /// The stored dtype of a field.
  dtype type_of(const std::string& name) const { return files_[0]->at(field(name).name).type; }
  /// Elements of one sample of a field.
  index_t sample_elements(const std::string& name) const {
    index_t n = 1;
    for (const index_t e : field(name).shape) n *= e;
    return n;
  }

  /// The field's values of `samples` (indices into the dataset), one after another, as U.
  template <class U>
  void read(const std::string& name, const index_t* samples, index_t count, U* out) const {
    const index_t per = sample_elements(name);
    const dtype t = type_of(name);
    const bool floating = t == dtype::f32 || t == dtype::f64 || t == dtype::bf16 || t == dtype::f16;
    constexpr bool want_floating = !std::is_integral_v<U>;
    if (floating != want_floating)
      throw std::invalid_argument("spmd::io::safetensors_dataset: field '" + name + "' is " + dtype_name(t) + ", read as " +
                                  (want_floating ? "a floating type" : "an integer type"));
    for (index_t i = 0; i < count; ++i) {
      const index_t s = samples[i];
      if (s < 0 || s >= size_)
        throw std::invalid_argument("spmd::io::safetensors_dataset: sample " + std::to_string(s) + " of " + std::to_string(size_));
      std::size_t f = files_.size() - 1;
      while (first_[f] > s) --f;
      const safetensors_file& file = *files_[f];
      const char* src = file.data(file.at(name)) + (s - first_[f]) * per * dtype_bytes(t);
      U* dst = out + i * per;
      switch (t) {
        case dtype::f32: detail::convert_rows<U, float>(src, per, dst); break;
        case dtype::f64: detail::convert_rows<U, double>(src, per, dst); break;
        case dtype::bf16: detail::convert_rows<U, bfloat16>(src, per, dst); break;
        case dtype::f16: detail::convert_rows<U, float16>(src, per, dst); break;
        case dtype::i32: detail::convert_rows<U, std::int32_t>(src, per, dst); break;
        case dtype::i64: detail::convert_rows<U, std::int64_t>(src, per, dst); break;
      }
    }
  }

 private:
  std::vector<sample_field> fields_;
  std::vector<std::unique_ptr<safetensors_file>> files_;
  std::vector<index_t> first_;  // each file's first sample
  index_t size_ = 0;
};

/// Batches of a dataset, step after step over epochs (see the top of this file).
class data_loader {
 public:
  data_loader(safetensors_dataset data, const batch_options& o) : data_(std::move(data)), order_(data_.size(), o), o_(o) {}

  const safetensors_dataset& dataset() const { return data_; }
  const batch_order& order() const { return order_; }
  index_t batch_size() const { return o_.batch; }
  index_t steps_per_epoch() const { return order_.steps_per_epoch(); }
  index_t epoch_of(index_t step) const { return order_.epoch_of(step); }

  /// Rows [first, first + count) of step's batch of field `name`, as U (count samples).
  template <class U>
  std::vector<U> rows(const std::string& name, index_t step, index_t first, index_t count) const {
    const std::vector<index_t> b = order_.batch(step);
    if (first < 0 || count < 0 || first + count > o_.batch)
      throw std::invalid_argument("spmd::io::data_loader: rows [" + std::to_string(first) + ", " +
                                  std::to_string(first + count) + ") of a batch of " + std::to_string(o_.batch));
    std::vector<U> out(static_cast<std::size_t>(count * data_.sample_elements(name)));
    data_.read<U>(name, b.data() + first, count, out.data());
    return out;
  }

  /// Step's batch of field `name` as a dtensor of Layout on backend B: global shape (batch,
  /// the field's sample shape); each held rank reads the samples of its block's rows only.
  template <class U, class Layout, class B>
  runtime::dtensor<U, Layout, B> batch(const std::string& name, index_t step, const Layout& layout = Layout{}) const {
    using M = typename Layout::mesh_type;
    const layout_spec spec = Layout::spec();
    const shape_vec global = layout.extents().to_vec();
    const sample_field& f = data_.field(name);
    std::vector<index_t> want{o_.batch};
    want.insert(want.end(), f.shape.begin(), f.shape.end());
    if (std::vector<index_t>(global.begin(), global.end()) != want)
      throw std::invalid_argument("spmd::io::data_loader: the layout's shape " +
                                  detail::dims_text({global.begin(), global.end()}) + " is not field '" + name +
                                  "''s batch " + detail::dims_text(want));
    index_t split = 1;  // the ranks dim 0 is split over
    for (int m = 0; m < spec.placements.size(); ++m) {
      const placement& p = spec.placements[m];
      if (p.is_partial())
        throw std::invalid_argument("spmd::io::data_loader: a batch's layout holds no Partial (field '" + name + "')");
      if (p.is_shard() && p.dim == 0) split *= spec.mesh[m];
    }
    if (split != o_.replicas)
      throw std::invalid_argument("spmd::io::data_loader: the layout splits the batch over " + std::to_string(split) +
                                  " ranks, the loader's replicas are " + std::to_string(o_.replicas));
    const std::vector<index_t> b = order_.batch(step);
    const index_t per = data_.sample_elements(name);
    return runtime::factories<B>::template from_local<U>(
        layout,
        [&](index_t i, index_t) {
          const local_box box = box_at(spec, global, unravel(M::shape_vec(), i));
          host::host_tensor<U> t;
          t.shape.assign(box.shape.begin(), box.shape.end());
          const index_t rows = box.shape.size() > 0 ? box.shape[0] : 0;
          std::vector<U> whole(static_cast<std::size_t>(rows * per));
          if (rows > 0) data_.read<U>(name, b.data() + box.offset[0], rows, whole.data());
          t.data = sub_box(whole, box, global, per);
          return t;
        },
        "spmd::io::data_loader::batch");
  }

 private:
  /// The box's elements of whole rows (rows of `per` elements each, the box's dim-0 range).
  template <class U>
  static std::vector<U> sub_box(std::vector<U>& whole, const local_box& box, const shape_vec& global, index_t per) {
    index_t n = 1;
    for (int d = 0; d < box.shape.size(); ++d) n *= box.shape[d];
    if (n == static_cast<index_t>(whole.size())) return std::move(whole);  // whole rows
    std::vector<U> out(static_cast<std::size_t>(n));
    // Walk the box's elements row-major; each maps into its row of `whole`.
    const int nd = global.size();
    shape_vec idx = box.shape;
    for (int d = 0; d < nd; ++d) idx[d] = 0;
    for (index_t k = 0; k < n; ++k) {
      index_t src = idx[0] * per, stride = per;
      for (int d = 1; d < nd; ++d) {
        stride /= global[d];
        src += (box.offset[d] + idx[d]) * stride;
      }
      out[static_cast<std::size_t>(k)] = whole[static_cast<std::size_t>(src)];
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[d] < box.shape[d]) break;
        idx[d] = 0;
      }
    }
    return out;
  }

  safetensors_dataset data_;
  batch_order order_;
  batch_options o_;
};

}  // namespace spmd::io
