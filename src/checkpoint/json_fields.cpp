#include "checkpoint/json_fields.h"

#include <cmath>
#include <fmt/format.h>

namespace sg {
namespace {

using Json = nlohmann::json;

// Appends j's compact JSON text to out until out is longer than limit. Each level of nesting
// writes a bracket first, so the recursion stops within limit + 1 levels whatever j holds.
void append_bounded(std::string& out, const Json& j, size_t limit) {
  if (out.size() > limit) return;
  const auto quoted = [&](const std::string& s) {
    // Cut first: dump escapes, and the replace handler mends a UTF-8 character cut in two.
    const Json cut = s.size() > limit + 1 ? s.substr(0, limit + 1) : s;
    out += cut.dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  if (j.is_array()) {
    out += '[';
    bool first = true;
    for (const Json& element : j) {
      if (out.size() > limit) return;
      if (!first) out += ',';
      first = false;
      append_bounded(out, element, limit);
    }
    out += ']';
  } else if (j.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, element] : j.items()) {
      if (out.size() > limit) return;
      if (!first) out += ',';
      first = false;
      quoted(key);
      out += ':';
      append_bounded(out, element, limit);
    }
    out += '}';
  } else if (j.is_string()) {
    quoted(j.get_ref<const std::string&>());
  } else {
    out += j.dump();
  }
}

}  // namespace

size_t json_depth_exceeded_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

Json parse_bounded_json(std::string_view text, const std::string& file, const std::string& what,
                        const std::string& advice, size_t byte_base) {
  const std::string subject = what.empty() ? std::string() : what + " is ";
  const size_t deep = json_depth_exceeded_at(text);
  if (deep != std::string_view::npos)
    throw RunError(fmt::format("{}: {}nested deeper than {} levels (at byte {}); {}", file,
                               subject, kMaxJsonDepth, byte_base + deep, advice));
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.byte counts the bytes read, the offending one included: its offset is one less.
    throw RunError(fmt::format("{}: {}not valid JSON (error at byte {}); {}", file, subject,
                               byte_base + (e.byte > 0 ? e.byte - 1 : 0), advice));
  } catch (const Json::exception& e) {
    // Valid syntax the library cannot hold, e.g. a number past a double's range (1e400).
    throw RunError(fmt::format("{}: {}not readable JSON ({}); {}", file, subject,
                               excerpt(e.what()), advice));
  }
}

std::string excerpt(std::string_view text) {
  if (text.size() <= kMaxEchoChars) return std::string(text);
  size_t cut = kMaxEchoChars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "\u2026";
}

std::string json_excerpt(const Json& j) {
  std::string out;
  append_bounded(out, j, kMaxEchoChars);
  return excerpt(out);
}

bool is_xxh3_hex(const std::string& text) {
  if (text.size() != 16) return false;
  for (const char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

JsonFields::JsonFields(const Json& object, std::string file, std::string advice,
                       std::string prefix)
    : object_(object), file_(std::move(file)), advice_(std::move(advice)),
      prefix_(std::move(prefix)) {
  if (object_.is_object()) return;
  const std::string what = prefix_.empty() ? std::string("the top level")
                                           : "field " + prefix_.substr(0, prefix_.size() - 1);
  throw RunError(fmt::format("{}: {} is {} but must be a JSON object; {}", file_, what,
                             json_excerpt(object_), advice_));
}

RunError JsonFields::error(const std::string& key, const std::string& problem) const {
  return RunError(fmt::format("{}: field {} {}; {}", file_, name(key), problem, advice_));
}

RunError JsonFields::wrong(const std::string& key, const std::string& want) const {
  return error(key, "is " + json_excerpt(object_.at(key)) + " but must be " + want);
}

const Json& JsonFields::value(const std::string& key) const {
  const auto it = object_.find(key);
  if (it == object_.end()) throw error(key, "is missing");
  return *it;
}

int64_t JsonFields::integer(const std::string& key, int64_t min, int64_t max) const {
  const Json& j = value(key);
  const std::string want = fmt::format("an integer from {} to {}", min, max);
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (max < 0 || v > static_cast<uint64_t>(max) || (min > 0 && v < static_cast<uint64_t>(min)))
      throw wrong(key, want);
    return static_cast<int64_t>(v);
  }
  if (!j.is_number_integer()) throw wrong(key, want);
  const int64_t v = j.get<int64_t>();
  if (v < min || v > max) throw wrong(key, want);
  return v;
}

uint64_t JsonFields::unsigned_integer(const std::string& key, uint64_t max) const {
  const Json& j = value(key);
  const std::string want = fmt::format("an integer from 0 to {}", max);
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > max) throw wrong(key, want);
    return j.get<uint64_t>();
  }
  if (!j.is_number_integer() || j.get<int64_t>() < 0 ||
      static_cast<uint64_t>(j.get<int64_t>()) > max)
    throw wrong(key, want);
  return static_cast<uint64_t>(j.get<int64_t>());
}

double JsonFields::number(const std::string& key, double min, double max) const {
  const Json& j = value(key);
  if (!j.is_number() || !std::isfinite(j.get<double>()) || j.get<double>() < min ||
      j.get<double>() > max)
    throw wrong(key, fmt::format("a number from {} to {}", min, max));
  return j.get<double>();
}

std::string JsonFields::string(const std::string& key) const {
  const Json& j = value(key);
  if (!j.is_string()) throw wrong(key, "a string");
  return j.get<std::string>();
}

JsonFields JsonFields::object(const std::string& key) const {
  return JsonFields(value(key), file_, advice_, prefix_ + key + ".");
}

int64_t JsonFields::integer_or(const std::string& key, int64_t fallback, int64_t min,
                               int64_t max) const {
  return has(key) ? integer(key, min, max) : fallback;
}

double JsonFields::number_or(const std::string& key, double fallback, double min,
                             double max) const {
  return has(key) ? number(key, min, max) : fallback;
}

std::string JsonFields::string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

}  // namespace sg
