// spmd/io/safetensors.hpp — the safetensors file format (Hugging Face's): read a file through a
// memory map, taking only the bytes asked for; lay out and write one.
//
//   spmd::io::safetensors_file f("model.safetensors");        // maps the file, checks the header
//   const spmd::io::tensor_entry& e = f.at("w1");              // dtype, shape, where its bytes are
//   f.read_box<float>("w1", box, out);                         // only the box's bytes
//
//   spmd::io::safetensors_layout l({{"w1", dtype::f32, {64, 32}}, ...});   // offsets, header
//   auto out = spmd::io::atomic_file::create("model.safetensors", l.file_bytes());  // "....tmp"
//   out.write(l.header_bytes(), 0);  out.write(data, l.data_start() + l.at("w1").begin);
//   out.commit();                                   // fsync, rename over the old file, sync the folder
//
// The format: 8 bytes little-endian N, then N bytes of JSON {"name": {"dtype": "F32", "shape":
// [..], "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}, then the data, each
// tensor row-major little-endian at [8 + N + begin, 8 + N + end). spmd writes tensors in name
// order, contiguous, the header padded with spaces to a multiple of 8 (as the Python package
// does), so the package reads spmd's files and spmd reads the package's.
//
// Every problem reading a file is a std::runtime_error (spmd::io::checkpoint_error) naming the file,
// the tensor where there is one, and what is wrong: a truncated file, a header that is not JSON
// or not safetensors, an unknown dtype, data offsets outside the data or not matching the
// shape. Nothing is read past what the header promises and checked.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/host/element.hpp"
#include "spmd/host/output_file.hpp"
#include "spmd/core/box_runs.hpp"
#include "spmd/core/element_count.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/io/json.hpp"  // not nlohmann/json: 2.5 s of every including unit

namespace spmd::io {

/// A checkpoint that cannot be read as asked. (Writing one fails with its base,
/// host::file_error, as every file spmd writes does.)
struct checkpoint_error : host::file_error {
  using host::file_error::file_error;
};

enum class dtype : std::uint8_t { f32, f64, bf16, f16, i32, i64 };

constexpr const char* dtype_name(dtype d) {
  switch (d) {
    case dtype::f32: return "F32";
    case dtype::f64: return "F64";
    case dtype::bf16: return "BF16";
    case dtype::f16: return "F16";
    case dtype::i32: return "I32";
    case dtype::i64: return "I64";
  }
  return "?";
}
constexpr index_t dtype_bytes(dtype d) {
  return d == dtype::f64 || d == dtype::i64 ? 8 : d == dtype::bf16 || d == dtype::f16 ? 2 : 4;
}
/// The dtype of element type T (f32, f64, bf16, f16, i32, i64).
template <class T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>) return dtype::f32;
  else if constexpr (std::is_same_v<T, double>) return dtype::f64;
  else if constexpr (std::is_same_v<T, bfloat16>) return dtype::bf16;
  else if constexpr (std::is_same_v<T, float16>) return dtype::f16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::i32;
  else {
    static_assert(std::is_same_v<T, std::int64_t>,
                  "spmd::io: checkpoints hold f32, f64, bf16, f16, i32 or i64 tensors.");
    return dtype::i64;
  }
}

/// One tensor of a file: its dtype, shape and bytes [begin, end) of the data section.
struct tensor_entry {
  std::string name;
  dtype type = dtype::f32;
  std::vector<index_t> shape;
  index_t begin = 0, end = 0;
  index_t elements() const {
    index_t n = 1;
    for (const index_t e : shape) n *= e;
    return n;
  }
};

namespace detail {

/// The largest header spmd accepts (the Python package's limit is 100 MB).
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

inline std::string shape_text(const std::vector<index_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

inline dtype parse_dtype(const std::string& s, const std::string& where) {
  for (const dtype d : {dtype::f32, dtype::f64, dtype::bf16, dtype::f16, dtype::i32, dtype::i64})
    if (s == dtype_name(d)) return d;
  throw checkpoint_error(where + ": dtype '" + s + "' is not one spmd reads (F32, F64, BF16, F16, I32, I64)");
}

/// The entries of a header, checked against a data section of `data_bytes` bytes, in name
/// order. A name given twice is refused (which one was meant is not ours to guess).
inline std::vector<tensor_entry> parse_header(const char* text, std::size_t n, index_t data_bytes,
                                              const std::string& file,
                                              std::map<std::string, std::string>* metadata = nullptr) {
  json::value j;
  try {
    j = json::parse(std::string_view(text, n));
  } catch (const json::error& e) {
    throw checkpoint_error(file + ": corrupt header (not JSON): " + e.what());
  }
  if (!j.is_object()) throw checkpoint_error(file + ": corrupt header: not a JSON object");
  std::vector<tensor_entry> out;
  for (const json::member& m : j.members) {
    if (m.key == "__metadata__") {
      // The format's metadata is a string-to-string map; anything else is not ours to read.
      if (metadata && m.val.is_object())
        for (const json::member& k : m.val.members)
          if (k.val.is_string()) (*metadata)[k.key] = k.val.text;
      continue;
    }
    const std::string where = file + ": tensor '" + m.key + "'";
    const json::value& v = m.val;
    const json::value* dtype_v = v.find("dtype");
    const json::value* shape_v = v.find("shape");
    const json::value* offsets_v = v.find("data_offsets");
    if (!v.is_object() || !dtype_v || !shape_v || !offsets_v || !dtype_v->is_string() || !shape_v->is_array() ||
        !offsets_v->is_array() || offsets_v->items.size() != 2)
      throw checkpoint_error(where + ": corrupt header entry (needs dtype, shape and two data_offsets): " +
                             json::dump(v));
    tensor_entry e;
    e.name = m.key;
    e.type = parse_dtype(dtype_v->text, where);
    for (const json::value& d : shape_v->items) {
      if (!d.is_size() || d.as_size() > static_cast<std::uint64_t>(max_elements))
        throw checkpoint_error(where + ": shape " + json::dump(*shape_v) + " is not a list of sizes >= 0");
      e.shape.push_back(static_cast<index_t>(d.as_size()));
    }
    // Bounded in bytes, not elements, so that elems * size below cannot overflow index_t.
    const index_t size = dtype_bytes(e.type);
    const index_t elems = elements_within(e.shape, max_elements / size);
    if (elems < 0)
      throw checkpoint_error(where + ": " + dtype_name(e.type) + " shape " + json::dump(*shape_v) +
                             " is too large (more than 2^62 bytes)");
    for (const json::value& o : offsets_v->items)
      if (!o.is_size())
        throw checkpoint_error(where + ": data_offsets " + json::dump(*offsets_v) + " are not sizes");
    const std::uint64_t b = offsets_v->items[0].as_size(), en = offsets_v->items[1].as_size();
    if (b > en || en > static_cast<std::uint64_t>(data_bytes))
      throw checkpoint_error(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                             ") lie outside the file's " + std::to_string(data_bytes) +
                             " bytes of data (a truncated file?)");
    e.begin = static_cast<index_t>(b);
    e.end = static_cast<index_t>(en);
    if (e.end - e.begin != elems * size)
      throw checkpoint_error(where + ": " + dtype_name(e.type) + " " + shape_text(e.shape) + " needs " +
                             std::to_string(elems * size) + " bytes, its data_offsets give " +
                             std::to_string(e.end - e.begin));
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const tensor_entry& a, const tensor_entry& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].name == out[i - 1].name)
      throw checkpoint_error(file + ": corrupt header: tensor '" + out[i].name + "' is listed twice");
  return out;
}

inline std::string errno_text() { return std::strerror(errno); }

}  // namespace detail

/// A safetensors file mapped read-only: the header parsed and checked on opening; a tensor's
/// bytes are read only when asked (the pages of a box's runs are all that is touched).
class safetensors_file {
 public:
  explicit safetensors_file(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw checkpoint_error(path_ + ": cannot open: " + detail::errno_text());
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("cannot stat: " + detail::errno_text());
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ < 8)
      fail("truncated: " + std::to_string(size_) + " bytes, not even the 8-byte header length");
    if (size_ > 0) {
      map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (map_ == MAP_FAILED) {
        map_ = nullptr;
        fail("cannot map: " + detail::errno_text());
      }
    }
    const auto* b = static_cast<const unsigned char*>(map_);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | b[i];
    if (n > detail::max_header_bytes || n > size_ - 8)
      fail("truncated or corrupt: the header length says " + std::to_string(n) + " bytes, the file has " +
           std::to_string(size_ - 8) + " after it");
    data_start_ = 8 + static_cast<std::size_t>(n);
    try {
      entries_ = detail::parse_header(static_cast<const char*>(map_) + 8, static_cast<std::size_t>(n),
                                      static_cast<index_t>(size_ - data_start_), path_, &metadata_);
    } catch (...) {
      release();
      throw;
    }
    for (std::size_t i = 0; i < entries_.size(); ++i) by_name_[entries_[i].name] = i;
  }
  safetensors_file(const safetensors_file&) = delete;
  safetensors_file& operator=(const safetensors_file&) = delete;
  ~safetensors_file() { release(); }

  const std::string& path() const { return path_; }
  const std::vector<tensor_entry>& entries() const { return entries_; }
  /// The header's "__metadata__" (string values only).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return by_name_.count(name) != 0; }
  /// The entry of `name`; a missing one throws naming it and the file.
  const tensor_entry& at(const std::string& name) const {
    const auto it = by_name_.find(name);
    if (it == by_name_.end())
      throw checkpoint_error(path_ + ": no tensor '" + name + "' (the file holds " +
                             std::to_string(entries_.size()) + ")");
    return entries_[it->second];
  }
  /// The first byte of a tensor's data.
  const char* data(const tensor_entry& e) const {
    return static_cast<const char*>(map_) + data_start_ + static_cast<std::size_t>(e.begin);
  }

  /// Checks that `name` is a tensor of T of `shape`; throws naming what differs.
  template <class T>
  const tensor_entry& expect(const std::string& name, const std::vector<index_t>& shape) const {
    const tensor_entry& e = at(name);
    if (e.type != dtype_of<T>())
      throw checkpoint_error(path_ + ": tensor '" + name + "' is " + dtype_name(e.type) + ", " +
                             dtype_name(dtype_of<T>()) + " was asked for");
    if (e.shape != shape)
      throw checkpoint_error(path_ + ": tensor '" + name + "' has shape " + detail::shape_text(e.shape) +
                             ", " + detail::shape_text(shape) + " was asked for");
    return e;
  }

  /// The box of tensor `name` (of T, of `shape`) into `out`, row-major: only its bytes.
  template <class T>
  void read_box(const std::string& name, const std::vector<index_t>& shape, const local_box& box, T* out) const {
    const tensor_entry& e = expect<T>(name, shape);
    if (shape.size() > static_cast<std::size_t>(max_tensor_dims))
      throw checkpoint_error(path_ + ": tensor '" + name + "' has " + std::to_string(shape.size()) +
                             " dims; spmd shards tensors of at most " + std::to_string(max_tensor_dims));
    shape_vec global{};
    for (const index_t x : shape) global.push_back(x);
    const char* base = data(e);
    for_each_box_run(box, global, [&](index_t g, index_t l, index_t n) {
      std::memcpy(out + l, base + g * static_cast<index_t>(sizeof(T)), static_cast<std::size_t>(n) * sizeof(T));
    });
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    release();
    throw checkpoint_error(path_ + ": " + what);
  }
  void release() {
    if (map_) ::munmap(map_, size_);
    map_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string path_;
  int fd_ = -1;
  void* map_ = nullptr;
  std::size_t size_ = 0, data_start_ = 0;
  std::vector<tensor_entry> entries_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::size_t> by_name_;
};

/// Where each tensor of a file to be written goes: entries in name order, contiguous, and
/// the header text (padded with spaces to a multiple of 8).
class safetensors_layout {
 public:
  explicit safetensors_layout(std::vector<tensor_entry> tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
    std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    // The JSON, compact, as the Python package's reader takes it: the metadata first, then
    // the tensors in name order.
    const auto utf8 = [](const std::string& s, const char* what) {
      if (!json::valid_utf8(s))
        throw checkpoint_error(std::string("spmd::io: ") + what + " '" + s + "' is not valid UTF-8");
    };
    header_ = "{";
    if (!metadata.empty()) {
      header_ += "\"__metadata__\":{";
      bool first = true;
      for (const auto& [k, v] : metadata) {
        utf8(k, "a metadata key");
        utf8(v, "a metadata value");
        if (!first) header_ += ',';
        first = false;
        json::put_string(header_, k);
        header_ += ':';
        json::put_string(header_, v);
      }
      header_ += '}';
    }
    index_t at = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      tensor_entry& e = tensors[i];
      if (e.name.empty() || e.name == "__metadata__")
        throw checkpoint_error("spmd::io: a tensor cannot be named '" + e.name + "'");
      if (i > 0 && tensors[i - 1].name == e.name)
        throw checkpoint_error("spmd::io: two tensors are named '" + e.name + "'");
      utf8(e.name, "a tensor name");
      e.begin = at;
      e.end = at + e.elements() * dtype_bytes(e.type);
      at = e.end;
      if (header_.size() > 1) header_ += ',';
      json::put_string(header_, e.name);
      header_ += ":{\"dtype\":";
      json::put_string(header_, dtype_name(e.type));
      header_ += ",\"shape\":[";
      for (std::size_t d = 0; d < e.shape.size(); ++d) header_ += (d ? "," : "") + std::to_string(e.shape[d]);
      header_ += "],\"data_offsets\":[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]}";
      by_name_[e.name] = i;
    }
    header_ += '}';
    while ((header_.size() + 8) % 8 != 0) header_ += ' ';
    const std::uint64_t n = header_.size();
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<char>(n >> (8 * i) & 0xff);
    header_ = len + header_;
    data_bytes_ = at;
    entries_ = std::move(tensors);
  }
  /// The 8-byte length and the JSON: the file's first data_start() bytes.
  const std::string& header_bytes() const { return header_; }
  index_t data_start() const { return static_cast<index_t>(header_.size()); }
  index_t file_bytes() const { return data_start() + data_bytes_; }
  const std::vector<tensor_entry>& entries() const { return entries_; }
  const tensor_entry& at(const std::string& name) const { return entries_[by_name_.at(name)]; }

 private:
  std::string header_;
  index_t data_bytes_ = 0;
  std::vector<tensor_entry> entries_;
  std::map<std::string, std::size_t> by_name_;
};

/// Files are written by host::atomic_file (host/output_file.hpp: temporary name, sync, rename,
/// the folder synced; a target that is not a regular file refused).
using host::atomic_file;

}  // namespace spmd::io
