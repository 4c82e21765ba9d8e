#pragma once
// JSON that singularity reads back from files (a checkpoint's manifest.json, a safetensors
// header, a sweep point's sweep_status.json, a Hugging Face config.json): its nesting bounded
// before it is parsed, values echoed in errors only in part, and fields read one by one with a
// type and range check whose error names the file and the field. The limits are documented in
// docs/design-notes.md ("Checkpoint files").
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "util/error.h"

namespace sg {

// The deepest nesting of arrays and objects read. Our files nest 4 levels at most, Hugging Face
// configs a few more; a deeper file is refused before parsing, so no recursive walk of a parsed
// value (copy, comparison, dump) can run out of stack.
constexpr int kMaxJsonDepth = 64;
// The most characters of a value that an error message echoes; longer ones end in "…".
constexpr size_t kMaxEchoChars = 80;

// The byte offset of the first '[' or '{' (outside strings) nested deeper than max_depth, or
// std::string_view::npos when there is none. A single pass, no recursion.
size_t json_depth_exceeded_at(std::string_view text, int max_depth = kMaxJsonDepth);

// Parses `text`, the content of `file`, once its nesting is known to be within kMaxJsonDepth.
// RunError "<file>: <what> is not valid JSON (error at byte N); <advice>", or "<file>: <what> is
// nested deeper than 64 levels (at byte N); <advice>" ("<file>: not valid JSON ..." when what
// is empty). N is the offset in the file of the offending byte (the length at a premature end):
// byte_base, the position of text in the file, plus its offset in text.
nlohmann::json parse_bounded_json(std::string_view text, const std::string& file,
                                  const std::string& what, const std::string& advice,
                                  size_t byte_base = 0);

// At most kMaxEchoChars bytes of text (never splitting a UTF-8 character), then "…" if cut.
std::string excerpt(std::string_view text);
// The same for j's JSON text, written only as far as needed (a huge or deep value costs nothing).
std::string json_excerpt(const nlohmann::json& j);

// 16 lower-case hex digits, as the XXH3-64 checksums of checkpoints are written.
bool is_xxh3_hex(const std::string& text);

// Reads the fields of one JSON object of `file`. Every error is a RunError of one line,
// "<file>: field <prefix><key> <problem>; <advice>", e.g.
//   runs/a/checkpoints/step_00000010/manifest.json: field state.step is -5 but must be an
//   integer from 0 to 2147483647; delete this checkpoint or resume from another ...
class JsonFields {
 public:
  // `object` must outlive the reader. A value that is not an object is an error naming `prefix`
  // (or "the top level" when prefix is empty).
  JsonFields(const nlohmann::json& object, std::string file, std::string advice,
             std::string prefix = "");

  bool has(const std::string& key) const { return object_.contains(key); }
  const nlohmann::json& json() const { return object_; }
  // "<prefix><key>", as errors name the field.
  std::string name(const std::string& key) const { return prefix_ + key; }

  // Required fields: missing is an error. Integers must be JSON integers (not 4.0 or 1e300).
  const nlohmann::json& value(const std::string& key) const;
  int64_t integer(const std::string& key, int64_t min, int64_t max) const;
  uint64_t unsigned_integer(const std::string& key,
                            uint64_t max = std::numeric_limits<uint64_t>::max()) const;
  double number(const std::string& key, double min, double max) const;  // finite, in [min, max]
  std::string string(const std::string& key) const;
  JsonFields object(const std::string& key) const;

  // Optional fields: `fallback` when absent, checked as above when present.
  int64_t integer_or(const std::string& key, int64_t fallback, int64_t min, int64_t max) const;
  double number_or(const std::string& key, double fallback, double min, double max) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;

  // "<file>: field <prefix><key> <problem>; <advice>"
  RunError error(const std::string& key, const std::string& problem) const;
  // "<file>: field <prefix><key> is <excerpt of its value> but must be <want>; <advice>"
  RunError wrong(const std::string& key, const std::string& want) const;

 private:
  const nlohmann::json& object_;
  std::string file_, advice_, prefix_;
};

}  // namespace sg
