// The resolved job spec as YAML: what `plan` prints and every run directory keeps. Written by
// hand rather than with YAML::Emitter so floats come out in their shortest exact form and
// strings always quoted (a name like "null" or "1e3" must read back as that string).
#include <charconv>
#include <fmt/format.h>
#include <type_traits>

#include "config/job_spec_keys.h"
#include "config/load_job_spec.h"

namespace sg {
namespace {

// std::to_chars without a precision gives the shortest text that reads back to the same bits.
template <typename T>
std::string format_float(T value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string format_value(JobSpec& spec, const JobSpecKey& key) {
  return std::visit(
      [&](auto accessor) -> std::string {
        const auto& field = accessor(spec);
        using Field = std::remove_cvref_t<decltype(field)>;
        if constexpr (std::is_same_v<Field, bool>)
          return field ? "true" : "false";
        else if constexpr (std::is_integral_v<Field>)
          return key.zero_is_auto && field == 0 ? "auto" : std::to_string(field);
        else if constexpr (std::is_floating_point_v<Field>)
          return format_float(field);
        else if constexpr (std::is_same_v<Field, std::string>)
          return quote(field);
        else if constexpr (SpecEnum<Field>)
          return quote(std::string(to_string(field)));
        else
          return "[" + format_float(field[0]) + ", " + format_float(field[1]) + "]";
      },
      key.field);
}

}  // namespace

std::string job_spec_to_yaml(const JobSpec& spec) {
  JobSpec copy = spec;  // the accessors hand out mutable references
  std::string out = "# Resolved job spec (every key, defaults included)\n";
  std::string_view section;
  for (const JobSpecKey& key : job_spec_keys(spec.model.arch)) {
    if (key.section() != section) {
      section = key.section();
      out += std::string(section) + ":\n";
    }
    out += fmt::format("{}{}: {}\n", section.empty() ? "" : "  ", key.leaf(),
                       format_value(copy, key));
  }
  return out;
}

}  // namespace sg
