#include "config/parse_job_value.h"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fmt/format.h>
#include <limits>
#include <type_traits>

#include "util/error.h"

namespace sg {
namespace {

enum class NumberParse { ok, not_a_number, out_of_range };

// std::from_chars is exact and locale-free; it rejects a leading '+', which YAML allows.
std::string_view without_plus(std::string_view text) {
  return text.size() > 1 && text[0] == '+' ? text.substr(1) : text;
}

template <typename T>
NumberParse parse_number(std::string_view text, T& out) {
  text = without_plus(text);
  if (text.empty()) return NumberParse::not_a_number;
  const char* end = text.data() + text.size();
  std::from_chars_result result;
  if constexpr (std::is_floating_point_v<T>)
    result = std::from_chars(text.data(), end, out, std::chars_format::general);
  else
    result = std::from_chars(text.data(), end, out, 10);
  if (result.ptr != end) return NumberParse::not_a_number;
  if (result.ec == std::errc::result_out_of_range) return NumberParse::out_of_range;
  if (result.ec != std::errc{}) return NumberParse::not_a_number;
  return NumberParse::ok;
}

[[noreturn]] void fail_type(const char* expected, const JobSpecKey& key, const YAML::Node& value) {
  throw SpecError(fmt::format("expected {} for '{}', got {}", expected, key.path,
                              describe_yaml_value(value)));
}

template <typename T>
T to_integer(const JobSpecKey& key, const YAML::Node& value) {
  const char* expected = key.zero_is_auto ? "an integer or auto"
                         : std::is_unsigned_v<T> ? "a non-negative integer"
                                                 : "an integer";
  if (!value.IsScalar()) fail_type(expected, key, value);
  if (key.zero_is_auto && value.Scalar() == "auto") return 0;
  T number{};
  switch (parse_number(value.Scalar(), number)) {
    case NumberParse::ok: return number;
    case NumberParse::out_of_range:
      throw SpecError(fmt::format("'{}' value {} is out of range [{}, {}]", key.path,
                                  value.Scalar(), std::numeric_limits<T>::min(),
                                  std::numeric_limits<T>::max()));
    case NumberParse::not_a_number: break;
  }
  fail_type(expected, key, value);
}

double to_double(const JobSpecKey& key, const YAML::Node& value, const char* expected) {
  if (!value.IsScalar()) fail_type(expected, key, value);
  double number = 0;
  switch (parse_number(value.Scalar(), number)) {
    case NumberParse::ok: return number;
    case NumberParse::out_of_range:
      throw SpecError(fmt::format("'{}' value {} is out of the range of a double", key.path,
                                  value.Scalar()));
    case NumberParse::not_a_number: break;
  }
  fail_type(expected, key, value);
}

bool to_bool(const JobSpecKey& key, const YAML::Node& value) {
  if (value.IsScalar()) {
    std::string word = value.Scalar();
    std::transform(word.begin(), word.end(), word.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (word == "true" || word == "yes" || word == "on") return true;
    if (word == "false" || word == "no" || word == "off") return false;
  }
  fail_type("a bool (true or false)", key, value);
}

std::string to_string(const JobSpecKey& key, const YAML::Node& value) {
  if (value.IsNull()) return {};  // "dir:" with nothing after it: take the default
  if (!value.IsScalar()) fail_type("a string", key, value);
  return value.Scalar();
}

// The same words and message as SpecChecks::one_of (the location is the caller's).
template <SpecEnum E>
E to_enum(const JobSpecKey& key, const YAML::Node& value) {
  const std::string text = value.IsScalar() ? value.Scalar() : std::string{};
  if (value.IsScalar())
    if (std::optional<E> parsed = parse_spec_enum<E>(text)) return *parsed;
  throw SpecError(not_one_of_message(key.path, describe_yaml_value(value), text,
                                     spec_enum_names<E>()));
}

std::array<double, 2> to_pair(const JobSpecKey& key, const YAML::Node& value) {
  const char* expected = "a list of 2 floats";
  if (!value.IsSequence()) fail_type(expected, key, value);
  if (value.size() != 2)
    throw SpecError(fmt::format("expected {} for '{}', got {} item{}", expected, key.path,
                                value.size(), value.size() == 1 ? "" : "s"));
  return {to_double(key, value[0], expected), to_double(key, value[1], expected)};
}

}  // namespace

std::string describe_yaml_value(const YAML::Node& value) {
  if (value.IsSequence()) return "a list";
  if (value.IsMap()) return "a map";
  if (value.IsScalar()) return "'" + value.Scalar() + "'";
  return "nothing";
}

std::string trim_spaces(const std::string& text) {
  size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

void set_job_spec_value(JobSpec& spec, const JobSpecKey& key, const YAML::Node& value) {
  std::visit(
      [&](auto accessor) {
        auto& field = accessor(spec);
        using Field = std::remove_reference_t<decltype(field)>;
        if constexpr (std::is_same_v<Field, bool>)
          field = to_bool(key, value);
        else if constexpr (std::is_integral_v<Field>)
          field = to_integer<Field>(key, value);
        else if constexpr (std::is_floating_point_v<Field>)
          field = static_cast<Field>(to_double(key, value, "a float"));
        else if constexpr (std::is_same_v<Field, std::string>)
          field = to_string(key, value);
        else if constexpr (SpecEnum<Field>)
          field = to_enum<Field>(key, value);
        else
          field = to_pair(key, value);
      },
      key.field);
}

std::string yaml_error_text(const YAML::Exception& error) {
  if (dynamic_cast<const YAML::DeepRecursion*>(&error) != nullptr) {
    return "nested too deeply (yaml-cpp stops past 2000 levels; a job spec needs a handful): "
           "flatten the value";
  }
  return error.msg;
}

YAML::Node parse_override_value(const std::string& text, const std::string& where) {
  std::string value = trim_spaces(text);
  if (value.empty()) return YAML::Node(YAML::NodeType::Null);
  if (value.front() == '[') {
    try {
      return YAML::Load(value);
    } catch (const YAML::Exception& e) {
      throw SpecError(where + ": YAML syntax error in the value: " + yaml_error_text(e));
    }
  }
  // Quoted strings, numbers, bools and null read as YAML would read them in the file.
  try {
    YAML::Node node = YAML::Load(value);
    if (node.IsScalar()) return node;
    if (node.IsNull() && (value == "~" || value == "null" || value == "Null" || value == "NULL"))
      return node;
  } catch (const YAML::Exception&) {
    // Not YAML on its own (a glob like *.bin reads as an alias): the text is the value.
  }
  return YAML::Node(value);
}

}  // namespace sg
