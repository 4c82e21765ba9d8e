#pragma once
// GPT-2's pre-tokenization: the text is cut into pieces by the reference pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// and BPE runs inside each piece. Compiled with PCRE2 (UTF + UCP, JIT). \s is spelled out as
// the Unicode White_Space set, which is what the reference's `regex` module (and tiktoken)
// mean by \s; PCRE2's own \s would also leave out U+0085.
// Thread-safe: the compiled pattern is shared read-only, each thread matches with its own
// match data.
#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

namespace sg {

class Pretokenizer {
 public:
  Pretokenizer();  // compiles the pattern; throws sg::RunError if PCRE2 refuses it

  // Calls piece(text.substr(begin, length)) for each match, left to right. text must be valid
  // UTF-8 (see tokenizer/utf8.h): it is matched without PCRE2's UTF check.
  void split(std::string_view text, const std::function<void(std::string_view)>& piece) const;

  // The pattern as given to PCRE2, for tests and error messages.
  static const char* pattern();

 private:
  std::shared_ptr<void> code_;  // pcre2_code_8*, freed by its deleter
  bool jit_ = false;
};

}  // namespace sg
