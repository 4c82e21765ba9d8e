#include "config/duration.h"

#include <cctype>
#include <cstdlib>
#include <vector>

namespace sg {
namespace {

// A non-negative decimal number filling all of `text`.
std::optional<double> number(const std::string& text) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) {
    return std::nullopt;
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !(v >= 0) || v > 1e12) return std::nullopt;
  return v;
}

std::optional<double> clock_form(const std::string& text) {
  double days = 0;
  bool has_days = false;
  std::string rest = text;
  if (const size_t dash = text.find('-'); dash != std::string::npos) {
    const auto d = number(text.substr(0, dash));
    if (!d) return std::nullopt;
    days = *d;
    has_days = true;
    rest = text.substr(dash + 1);
  }
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = rest.find(':', start);
    parts.push_back(rest.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  // Slurm: "MM:SS" or "HH:MM:SS"; after "D-" also "HH" or "HH:MM".
  if (parts.size() > 3 || (parts.size() == 1 && !has_days)) return std::nullopt;
  static const double kScale[3][3] = {{3600, 0, 0}, {60, 1, 0}, {3600, 60, 1}};
  const double* scale = kScale[parts.size() - 1];
  if (has_days && parts.size() == 2) {  // "D-HH:MM"
    static const double kDayScale[2] = {3600, 60};
    scale = kDayScale;
  }
  double seconds = days * 86400;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto v = number(parts[i]);
    if (!v) return std::nullopt;
    seconds += *v * scale[i];
  }
  return seconds;
}

}  // namespace

std::optional<double> parse_duration_seconds(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text.find(':') != std::string::npos || text.find('-') != std::string::npos) {
    return clock_form(text);
  }
  double unit = 1;
  std::string digits = text;
  switch (text.back()) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    default: return number(text);
  }
  digits.pop_back();
  const auto v = number(digits);
  if (!v) return std::nullopt;
  return *v * unit;
}

}  // namespace sg
