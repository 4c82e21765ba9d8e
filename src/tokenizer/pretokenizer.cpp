#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "util/error.h"

namespace sg {
namespace {

// Unicode White_Space, written out (see the header for why not \s).
#define SG_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
constexpr const char* kPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" SG_WS "\\p{L}\\p{N}]+|[" SG_WS
    "]+(?![^" SG_WS "])|[" SG_WS "]+";
#undef SG_WS

// Per-thread matching state. A JIT stack larger than PCRE2's 32 KiB default lets a very long
// whitespace run (which `\s+(?!\S)` backtracks over) match instead of failing.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (data == nullptr || context == nullptr || stack == nullptr) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

MatchState& thread_match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

const char* Pretokenizer::pattern() { return kPattern; }

Pretokenizer::Pretokenizer() {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw RunError("GPT-2 pre-tokenization pattern: PCRE2 refuses it at offset " +
                   std::to_string(error_offset) + ": " + reinterpret_cast<char*>(message) +
                   "; PCRE2 must be built with Unicode support");
  }
  // Without JIT (a PCRE2 built without it) matching still works, only slower.
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = std::shared_ptr<void>(code, [](void* p) { pcre2_code_free(static_cast<pcre2_code*>(p)); });
}

void Pretokenizer::split(std::string_view text,
                         const std::function<void(std::string_view)>& piece) const {
  auto* code = static_cast<const pcre2_code*>(code_.get());
  MatchState& state = thread_match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE length = text.size();
  PCRE2_SIZE offset = 0;
  while (offset < length) {
    const int rc = jit_ ? pcre2_jit_match(code, subject, length, offset, 0, state.data, state.context)
                        : pcre2_match(code, subject, length, offset, PCRE2_NO_UTF_CHECK,
                                      state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;  // cannot happen: every character matches some branch
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw RunError("GPT-2 pre-tokenization failed at byte " + std::to_string(offset) + ": " +
                     reinterpret_cast<char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    piece(text.substr(ovector[0], ovector[1] - ovector[0]));
    offset = ovector[1];
  }
}

}  // namespace sg
