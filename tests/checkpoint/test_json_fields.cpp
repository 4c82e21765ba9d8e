// The bounded JSON reading shared by manifests, safetensors headers, config.json and
// sweep_status.json: the nesting scan skips strings, echoes are cut whole characters at a time,
// and a huge or deep value is echoed without walking all of it.
#include <doctest/doctest.h>

#include <string>

#include "checkpoint/json_fields.h"
#include "error_of.h"

using namespace sg;
using sg::test::error_of;

TEST_CASE("the nesting scan counts brackets outside strings only") {
  const auto npos = std::string_view::npos;
  CHECK(json_depth_exceeded_at("[[[]]]", 3) == npos);
  CHECK(json_depth_exceeded_at("[[[[]]]]", 3) == 3);
  CHECK(json_depth_exceeded_at(R"({"a": [{"b": 1}]})", 3) == npos);
  CHECK(json_depth_exceeded_at(R"({"a": [{"b": [1]}]})", 3) == 13);
  CHECK(json_depth_exceeded_at(R"(["[[[[", "\"[[[["])", 1) == npos);  // brackets in strings
  CHECK(json_depth_exceeded_at(R"(["\\", [[]]])", 2) == 8);           // an escaped backslash
  CHECK(json_depth_exceeded_at(std::string(64, '[') + std::string(64, ']')) == npos);
  CHECK(json_depth_exceeded_at(std::string(65, '[') + std::string(65, ']')) == 64);
}

TEST_CASE("parse_bounded_json names the file, what it is and where; echoes are short") {
  CHECK(parse_bounded_json(R"({"a": [1, 2]})", "f.json", "", "fix it")["a"][1] == 2);
  CHECK(error_of([] { parse_bounded_json("{\"a\": ", "f.json", "", "fix it"); }) ==
        "f.json: not valid JSON (error at byte 6); fix it");
  CHECK(error_of([] {
          parse_bounded_json(std::string(100000, '['), "h.bin", "header", "fix it", 8);
        }) == "h.bin: header is nested deeper than 64 levels (at byte 72); fix it");
  // Valid syntax past what a double holds (the fuzzer's find): a RunError, not an abort.
  CHECK(error_of([] { parse_bounded_json(R"({"shape": [1e400]})", "h.bin", "header", "fix it"); })
            .rfind("h.bin: header is not readable JSON (", 0) == 0);

  CHECK(excerpt("short") == "short");
  CHECK(excerpt(std::string(200, 'x')) == std::string(80, 'x') + "\u2026");
  // A 2-byte character across the cut is left out whole, not split.
  const std::string accents = std::string(79, 'x') + "\u00e9\u00e9";
  CHECK(excerpt(accents) == std::string(79, 'x') + "\u2026");
  nlohmann::json wide = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) wide.push_back(i);
  const std::string echoed = json_excerpt(wide);
  CHECK(echoed.rfind("[0,1,2,3,", 0) == 0);
  CHECK(echoed.size() == 80 + std::string("\u2026").size());
  nlohmann::json deep = 1;  // deeper than any file may be: echoed, not walked to the bottom
  for (int i = 0; i < 1000; ++i) deep = nlohmann::json::array({std::move(deep)});
  CHECK(json_excerpt(deep) == std::string(80, '[') + "\u2026");
  CHECK(json_excerpt(nlohmann::json{{"k", "v"}}) == R"({"k":"v"})");
}

TEST_CASE("JsonFields: typed, ranged fields whose errors name the file and the field") {
  const nlohmann::json j = {{"n", 5},    {"big", 18446744073709551615ULL},
                            {"f", 2.5},  {"s", "text"},
                            {"o", {{"inner", -1}}}};
  const JsonFields f(j, "x.json", "fix it");
  CHECK(f.integer("n", 0, 10) == 5);
  CHECK(f.unsigned_integer("big") == 18446744073709551615ULL);
  CHECK(f.number("f", 0, 3) == 2.5);
  CHECK(f.number("n", 0, 10) == 5);  // an integer is a number
  CHECK(f.string("s") == "text");
  CHECK(f.integer_or("absent", 7, 0, 10) == 7);
  CHECK(f.object("o").integer("inner", -5, 5) == -1);
  CHECK(error_of([&] { f.integer("n", 6, 10); }) ==
        "x.json: field n is 5 but must be an integer from 6 to 10; fix it");
  CHECK(error_of([&] { f.integer("big", 0, 10); }) ==
        "x.json: field big is 18446744073709551615 but must be an integer from 0 to 10; fix it");
  CHECK(error_of([&] { f.integer("f", 0, 10); }) ==
        "x.json: field f is 2.5 but must be an integer from 0 to 10; fix it");
  CHECK(error_of([&] { f.unsigned_integer("s"); }).find("field s is \"text\" but must be") !=
        std::string::npos);
  CHECK(error_of([&] { f.object("o").unsigned_integer("inner"); }) ==
        "x.json: field o.inner is -1 but must be an integer from 0 to 18446744073709551615; "
        "fix it");
  CHECK(error_of([&] { f.string("missing"); }) == "x.json: field missing is missing; fix it");
  CHECK(error_of([&] { f.object("s"); }) ==
        "x.json: field s is \"text\" but must be a JSON object; fix it");
  CHECK(error_of([] { JsonFields(nlohmann::json::array(), "y.json", "fix it"); }) ==
        "y.json: the top level is [] but must be a JSON object; fix it");
  CHECK(is_xxh3_hex("0123456789abcdef"));
  CHECK_FALSE(is_xxh3_hex("0123456789ABCDEF"));
  CHECK_FALSE(is_xxh3_hex("0123456789abcde"));
}
