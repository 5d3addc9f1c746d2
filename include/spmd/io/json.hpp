// spmd/io/json.hpp — the JSON a safetensors header is: a strict reader (RFC 8259) into a small
// tree, and the compact writer.
//
//   const spmd::io::json::value v = spmd::io::json::parse(text);   // throws json::error
//   if (const auto* e = v.find("w1")) ... e->items[0].as_size() ...
//   std::string out; spmd::io::json::put_string(out, name);         // "name", escaped
//
// Why not nlohmann/json: including it costs 2.5–3 s of every unit that includes a checkpoint
// header (g++ 12, -O2; bench/RESULTS.md, "Compile time"), for a format this small, and it made
// the checkpoint headers need a library spmd's package does not declare. This reader keeps what
// a checkpoint needs: objects in file order, strings decoded (escapes, surrogate pairs, UTF-8
// checked), numbers kept as written (a size is a literal of digits that fits in 64 bits).
// Every malformed input is a json::error naming the byte where it went wrong; nesting deeper
// than max_depth is refused rather than recursed into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace spmd::io::json {

/// Malformed JSON: what was expected and the byte offset where it was not found.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int max_depth = 128;

struct member;

/// One JSON value. Numbers keep their literal text (`text`); strings their decoded UTF-8.
struct value {
  enum class kind : unsigned char { null, boolean, number, string, array, object };
  kind type = kind::null;
  bool flag = false;             // boolean
  std::string text;              // number (as written) or string (decoded)
  std::vector<value> items;      // array
  std::vector<member> members;   // object, in file order

  bool is_object() const { return type == kind::object; }
  bool is_array() const { return type == kind::array; }
  bool is_string() const { return type == kind::string; }
  /// A non-negative integer literal (digits only) that fits in 64 bits: a size or an offset.
  bool is_size() const {
    if (type != kind::number || text.empty() || text.size() > 20) return false;
    for (char c : text)
      if (c < '0' || c > '9') return false;
    return text.size() < 20 || text <= "18446744073709551615";
  }
  /// @pre is_size()
  std::uint64_t as_size() const {
    std::uint64_t n = 0;
    for (char c : text) n = n * 10 + static_cast<std::uint64_t>(c - '0');
    return n;
  }
  /// The last member named `key` of an object (nullptr: none, or not an object).
  inline const value* find(std::string_view key) const;
};

struct member {
  std::string key;
  value val;
};

inline const value* value::find(std::string_view key) const {
  const value* found = nullptr;
  for (const member& m : members)
    if (m.key == key) found = &m.val;
  return found;
}

namespace detail {

/// Appends code point c as UTF-8.
inline void put_utf8(std::string& out, std::uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

/// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
/// surrogates, nothing past U+10FFFF), or 0.
inline std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (s.size() - i < n || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

class reader {
 public:
  explicit reader(std::string_view s) : s_(s) {}

  value document() {
    value v = parse_value(0);
    // Whitespace may follow, and NUL bytes: padding some writers put after a header (JSON
    // has no NUL outside a string, so nothing is hidden by accepting it).
    while (i_ < s_.size() && (s_[i_] == '\0' || s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
    if (i_ != s_.size()) fail("the end of the text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* expected) const {
    throw error(std::string("syntax error at byte ") + std::to_string(i_) + ": expected " + expected +
                (i_ < s_.size() ? "" : " (the text ended)"));
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) fail("a value");
    i_ += word.size();
  }

  value parse_value(int depth) {
    skip_space();
    if (i_ == s_.size()) fail("a value");
    value v;
    const char c = s_[i_];
    if (c == '{' || c == '[') {
      if (depth >= max_depth) throw error("nested deeper than " + std::to_string(max_depth) + " levels at byte " + std::to_string(i_));
      ++i_;
      if (c == '{') {
        v.type = value::kind::object;
        if (eat('}')) return v;
        do {
          skip_space();
          if (i_ == s_.size() || s_[i_] != '"') fail("a string (an object's key)");
          member m;
          m.key = parse_string();
          if (!eat(':')) fail("':'");
          m.val = parse_value(depth + 1);
          v.members.push_back(std::move(m));
        } while (eat(','));
        if (!eat('}')) fail("',' or '}'");
      } else {
        v.type = value::kind::array;
        if (eat(']')) return v;
        do v.items.push_back(parse_value(depth + 1));
        while (eat(','));
        if (!eat(']')) fail("',' or ']'");
      }
    } else if (c == '"') {
      v.type = value::kind::string;
      v.text = parse_string();
    } else if (c == 't' || c == 'f') {
      v.type = value::kind::boolean;
      v.flag = c == 't';
      literal(v.flag ? "true" : "false");
    } else if (c == 'n') {
      literal("null");
    } else {
      v.type = value::kind::number;
      v.text = parse_number();
    }
    return v;
  }

  std::string parse_number() {
    const std::size_t start = i_;
    const auto digits = [&] {
      const std::size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') ++i_;  // no leading zeros
    else if (digits() == 0) fail("a value");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) fail("a digit after '.'");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) fail("a digit in the exponent");
    }
    return std::string(s_.substr(start, i_ - start));
  }

  std::uint32_t hex4() {
    if (s_.size() - i_ < 4) fail("four hex digits after \\u");
    std::uint32_t u = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      const char h = s_[i_];
      u <<= 4;
      if (h >= '0' && h <= '9') u |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') u |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') u |= static_cast<std::uint32_t>(h - 'A' + 10);
      else fail("four hex digits after \\u");
    }
    return u;
  }

  /// @pre s_[i_] == '"'
  std::string parse_string() {
    ++i_;
    std::string out;
    while (true) {
      if (i_ == s_.size()) fail("'\"' (the string's end)");
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("an escape for a control character");
      if (c != '\\') {
        const std::size_t n = utf8_length(s_, i_);
        if (n == 0) fail("UTF-8");
        out.append(s_.substr(i_, n));
        i_ += n;
        continue;
      }
      if (++i_ == s_.size()) fail("an escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t u = hex4();
          if (u >= 0xD800 && u <= 0xDBFF) {  // a high surrogate: its low one must follow
            if (s_.substr(i_, 2) != "\\u") fail("a low surrogate after a high one");
            i_ += 2;
            const std::uint32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a low surrogate after a high one");
            u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00);
          } else if (u >= 0xDC00 && u <= 0xDFFF) {
            fail("a high surrogate before a low one");
          }
          put_utf8(out, u);
          break;
        }
        default: --i_; fail("an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace detail

/// The value `text` holds (nothing but whitespace around it, and NUL padding after it).
/// Throws json::error.
inline value parse(std::string_view text) { return detail::reader(text).document(); }

/// True when s is well-formed UTF-8 (what a JSON string must hold).
inline bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = detail::utf8_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// Appends s as a JSON string: quotes, the two-character escapes, \u00XX for the other
/// control characters, everything else as it is. @pre valid_utf8(s)
inline void put_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += hex[static_cast<unsigned char>(c) >> 4];
          out += hex[static_cast<unsigned char>(c) & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

/// v as compact JSON (no spaces; numbers as written).
inline void put(std::string& out, const value& v) {
  switch (v.type) {
    case value::kind::null: out += "null"; break;
    case value::kind::boolean: out += v.flag ? "true" : "false"; break;
    case value::kind::number: out += v.text; break;
    case value::kind::string: put_string(out, v.text); break;
    case value::kind::array:
      out += '[';
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        put(out, v.items[i]);
      }
      out += ']';
      break;
    case value::kind::object:
      out += '{';
      for (std::size_t i = 0; i < v.members.size(); ++i) {
        if (i) out += ',';
        put_string(out, v.members[i].key);
        out += ':';
        put(out, v.members[i].val);
      }
      out += '}';
      break;
  }
}
inline std::string dump(const value& v) {
  std::string out;
  put(out, v);
  return out;
}

}  // namespace spmd::io::json
