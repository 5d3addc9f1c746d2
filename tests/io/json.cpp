// tests/io/json.cpp — spmd::io::json (the safetensors header's reader and writer) against
// nlohmann/json, the reference: the same documents accepted and rejected, the same compact
// text written, over generated documents and their mutations; then the rules spmd chooses
// where they differ (numbers kept as written, every member of an object kept, NUL padding
// after the value, a depth limit), the error positions, sizes and escapes.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "spmd/io/json.hpp"

namespace {

namespace json = spmd::io::json;

struct generator {
  std::mt19937 rng{20261126};
  int pick(int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); }
  std::string space() {
    static const char* ws[] = {"", " ", "\n", "\t ", "\r\n"};
    return ws[pick(5)];
  }
  std::string string() {
    static const char* parts[] = {"a", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0041",
                                  "\\u00e9", "\\u20ac", "\\ud83d\\ude00", "\xc3\xa9", "\xe2\x82\xac",
                                  "\xf0\x9f\x98\x80", " ", "__metadata__", "\\u0001", "\x7f"};
    std::string s = "\"";
    for (int i = pick(5); i > 0; --i) s += parts[pick(20)];
    return s + "\"";
  }
  // Integers only and distinct keys: where spmd and nlohmann agree by design.
  std::string doc(int depth) {
    const std::string w = space();
    switch (pick(depth > 5 ? 4 : 7)) {
      case 0: return w + std::to_string(static_cast<long long>(pick(100000)) * (pick(3) == 0 ? -1 : 1)) + w;
      case 1: return w + string() + w;
      case 2: return pick(2) ? "true" : "false";
      case 3: return "null";
      case 4:
      case 5: {
        std::string s = "[" + w;
        for (int i = 0, n = pick(4); i < n; ++i) s += (i ? "," : "") + doc(depth + 1);
        return s + "]";
      }
      default: {
        std::string s = "{" + w;
        for (int i = 0, n = pick(4); i < n; ++i)
          s += (i ? "," : "") + w + "\"k" + std::to_string(i) + "\"" + w + ":" + doc(depth + 1);
        return s + w + "}";
      }
    }
  }
  void mutate(std::string& s) {
    if (s.empty()) return;
    const auto p = static_cast<std::size_t>(pick(static_cast<int>(s.size())));
    switch (pick(3)) {
      case 0: s.erase(p, 1); break;
      case 1: s.insert(p, 1, "{}[]\",:\\0-tn"[pick(12)]); break;
      default: s[p] = static_cast<char>(s[p] ^ (1 << pick(8)));
    }
  }
};

bool has_duplicate_keys(const json::value& v) {
  for (std::size_t i = 0; i < v.members.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (v.members[i].key == v.members[j].key) return true;
    if (has_duplicate_keys(v.members[i].val)) return true;
  }
  for (const json::value& x : v.items)
    if (has_duplicate_keys(x)) return true;
  return false;
}

}  // namespace

TEST_CASE("json: the same documents as nlohmann/json, accepted, rejected and written", "[io][json]") {
  generator g;
  long accepted = 0, rejected = 0, differ = 0;
  for (int it = 0; it < 40000; ++it) {
    std::string s = g.doc(0);
    if (it % 3 == 0) g.mutate(s);
    bool mine = true, theirs = true;
    std::string my_text, their_text;
    json::value v;
    try {
      v = json::parse(s);
      my_text = json::dump(v);
    } catch (const json::error&) {
      mine = false;
    }
    try {
      their_text = nlohmann::ordered_json::parse(s).dump();
    } catch (const nlohmann::json::exception&) {
      theirs = false;
    }
    // Where the rules differ by choice (nlohmann stops at a NUL; a mutation can repeat a key:
    // nlohmann keeps one member, spmd every one), the case is left to the tests below.
    if (s.find('\0') != std::string::npos || (mine && has_duplicate_keys(v))) continue;
    if (mine != theirs || my_text != their_text) {
      if (++differ <= 5) {
        INFO("document: " << s << "\nspmd: " << (mine ? my_text : "rejected")
                          << "\nnlohmann: " << (theirs ? their_text : "rejected"));
        CHECK(false);
      }
      continue;
    }
    (mine ? accepted : rejected) += 1;
  }
  CHECK(differ == 0);
  CHECK(accepted > 20000);  // both kinds are exercised
  CHECK(rejected > 3000);
}

TEST_CASE("json: where spmd's rules differ from nlohmann's, and errors", "[io][json]") {
  // Numbers are kept as written (nlohmann would write -0 as 0 and 1.50 as 1.5).
  CHECK(json::dump(json::parse("[-0, 1.50, 2E+3]")) == "[-0,1.50,2E+3]");
  // Every member of an object is kept in file order; find() gives the last of a name.
  const json::value o = json::parse(R"({"a": 1, "b": 2, "a": 3})");
  REQUIRE(o.members.size() == 3);
  CHECK(o.find("a")->text == "3");
  CHECK(o.find("c") == nullptr);
  CHECK(json::parse("1").find("a") == nullptr);
  // NUL bytes may pad the text after the value, not appear inside it.
  CHECK(json::dump(json::parse(std::string("{}  \0\0 \0", 8))) == "{}");
  CHECK_THROWS_AS(json::parse(std::string("{\0}", 3)), json::error);
  CHECK_THROWS_AS(json::parse(std::string("1\0 2", 4)), json::error);
  // Nesting is refused past max_depth instead of recursing without bound.
  const std::string deep_ok = std::string(json::max_depth, '[') + std::string(json::max_depth, ']');
  CHECK(json::parse(deep_ok).is_array());
  CHECK_THROWS_WITH(json::parse("[" + deep_ok + "]"), Catch::Contains("nested deeper than 128 levels at byte 128"));
  CHECK_THROWS_WITH(json::parse(std::string(1000000, '[')), Catch::Contains("nested deeper than 128"));
  // Errors name the byte and what was expected there.
  CHECK_THROWS_WITH(json::parse("{nope"), "syntax error at byte 1: expected a string (an object's key)");
  CHECK_THROWS_WITH(json::parse(R"({"a" 1})"), "syntax error at byte 5: expected ':'");
  CHECK_THROWS_WITH(json::parse("[1,]"), "syntax error at byte 3: expected a value");
  CHECK_THROWS_WITH(json::parse("[1"), "syntax error at byte 2: expected ',' or ']' (the text ended)");
  CHECK_THROWS_WITH(json::parse("01"), "syntax error at byte 1: expected the end of the text after the value");
  CHECK_THROWS_WITH(json::parse("\"\\ud800\""), Catch::Contains("a low surrogate after a high one"));
  CHECK_THROWS_WITH(json::parse("\"\\udc00\""), Catch::Contains("a high surrogate before a low one"));
  CHECK_THROWS_WITH(json::parse("\"\xc0\xaf\""), "syntax error at byte 1: expected UTF-8");  // overlong '/'
  CHECK_THROWS_WITH(json::parse("\"\xed\xa0\x80\""), Catch::Contains("expected UTF-8"));      // a surrogate
  CHECK_THROWS_WITH(json::parse("\"a\tb\""), Catch::Contains("an escape for a control character"));
  CHECK_THROWS_AS(json::parse(""), json::error);
  CHECK_THROWS_AS(json::parse("tru"), json::error);
}

TEST_CASE("json: sizes, strings and the writer", "[io][json]") {
  const auto size_of = [](const char* t) { return json::parse(t); };
  CHECK(size_of("0").is_size());
  CHECK(size_of("18446744073709551615").is_size());
  CHECK(size_of("18446744073709551615").as_size() == 18446744073709551615ull);
  CHECK_FALSE(size_of("18446744073709551616").is_size());
  CHECK_FALSE(size_of("99999999999999999999").is_size());
  CHECK_FALSE(size_of("100000000000000000000").is_size());
  CHECK_FALSE(size_of("-1").is_size());
  CHECK_FALSE(size_of("1.0").is_size());
  CHECK_FALSE(size_of("1e3").is_size());
  CHECK_FALSE(size_of("\"7\"").is_size());
  // Escapes decoded, surrogate pairs joined, UTF-8 kept.
  CHECK(json::parse(R"("a\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00")").text ==
        "a\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  std::string out;
  json::put_string(out, std::string("q\"b\\\b\f\n\r\t\x01\x1f\x7f\xc3\xa9/", 15));
  CHECK(out == "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xc3\xa9/\"");
  CHECK(json::parse(out).text == std::string("q\"b\\\b\f\n\r\t\x01\x1f\x7f\xc3\xa9/", 15));
  CHECK(json::valid_utf8("plain \xc3\xa9 \xf0\x9f\x98\x80"));
  CHECK_FALSE(json::valid_utf8("\xc3"));
  CHECK_FALSE(json::valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(json::valid_utf8("\xff"));
}
