// spmd/io/file_team.hpp — the processes that write one file together when each holds only some
// of its tensors: a pipeline's groups, each holding its stages' parameters (docs/pipeline.md).
//
//   io::save_options opt;
//   opt.team = io::file_team{world_rank == 0, [&] { world_barrier(); },
//                            [&](const std::string& mine) { return gather_across_groups(mine); }};
//   io::save_tensors<B>("model.safetensors", opt, my_groups_tensors);
//
// A save needs every tensor's entry before any block is written (the header fixes each one's
// offset). Without a team, every process of the backend holds every tensor and computes the
// same header alone; with one, each process describes its tensors and metadata as text, the
// team's `exchange` hands every member's text to every member (one per group, in the groups'
// order: what each process of a group holds is the same), and each process merges them into
// the same header. `first` creates and commits the file; `barrier` orders the creation, the
// writes and the commit across every process of the team.
//
// The merge refuses a tensor two members both describe and metadata two members give different
// values (checkpoint_error): one file cannot hold both.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spmd/io/safetensors.hpp"

namespace spmd::io {

/// The processes writing one file together (see the header comment).
struct file_team {
  bool first = true;                   // creates the file and commits it
  std::function<void()> barrier;       // every process of the team
  /// This process's text in, every member's out (the same list on every process).
  std::function<std::vector<std::string>(const std::string&)> exchange;
};

namespace detail {

/// Length-prefixed fields ("5:hello"): names and values may hold any character.
inline void put_field(std::string& out, std::string_view s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}

inline std::string take_field(std::string_view& in) {
  const std::size_t colon = in.find(':');
  if (colon == std::string_view::npos || colon == 0)
    throw checkpoint_error("spmd::io: a file team's description is malformed");
  std::size_t n = 0;
  for (const char c : in.substr(0, colon)) {
    if (c < '0' || c > '9' || n > in.size()) throw checkpoint_error("spmd::io: a file team's description is malformed");
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  if (n > in.size() - colon - 1) throw checkpoint_error("spmd::io: a file team's description is malformed");
  std::string s(in.substr(colon + 1, n));
  in.remove_prefix(colon + 1 + n);
  return s;
}

inline std::string describe_header(const std::vector<tensor_entry>& entries,
                                   const std::map<std::string, std::string>& metadata) {
  std::string out;
  put_field(out, std::to_string(entries.size()));
  for (const tensor_entry& e : entries) {
    put_field(out, e.name);
    put_field(out, dtype_name(e.type));
    put_field(out, std::to_string(e.shape.size()));
    for (const index_t d : e.shape) put_field(out, std::to_string(d));
  }
  put_field(out, std::to_string(metadata.size()));
  for (const auto& [k, v] : metadata) {
    put_field(out, k);
    put_field(out, v);
  }
  return out;
}

inline index_t parse_count(std::string_view& in) {
  const std::string s = take_field(in);
  index_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9' || v > (index_t(1) << 56)) throw checkpoint_error("spmd::io: a file team's description is malformed");
    v = v * 10 + (c - '0');
  }
  return v;
}

/// Every member's entries and metadata, merged (see the header comment).
inline std::pair<std::vector<tensor_entry>, std::map<std::string, std::string>> merge_headers(
    const std::vector<std::string>& members) {
  std::vector<tensor_entry> entries;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::size_t> owner;  // tensor name -> member
  for (std::size_t m = 0; m < members.size(); ++m) {
    std::string_view in = members[m];
    for (index_t n = parse_count(in); n > 0; --n) {
      tensor_entry e;
      e.name = take_field(in);
      e.type = parse_dtype(take_field(in), "a file team's description");
      for (index_t d = parse_count(in); d > 0; --d) e.shape.push_back(parse_count(in));
      if (const auto [it, fresh] = owner.emplace(e.name, m); !fresh)
        throw checkpoint_error("spmd::io: tensor '" + e.name + "' is written by members " + std::to_string(it->second) +
                               " and " + std::to_string(m) + " of the file's team; one file holds it once");
      entries.push_back(std::move(e));
    }
    for (index_t n = parse_count(in); n > 0; --n) {
      std::string k = take_field(in), v = take_field(in);
      if (const auto [it, fresh] = metadata.emplace(k, v); !fresh && it->second != v)
        throw checkpoint_error("spmd::io: metadata '" + k + "' is '" + it->second + "' on one member of the file's team and '" +
                               v + "' on member " + std::to_string(m));
    }
    if (!in.empty()) throw checkpoint_error("spmd::io: a file team's description is malformed");
  }
  return {std::move(entries), std::move(metadata)};
}

}  // namespace detail

}  // namespace spmd::io
