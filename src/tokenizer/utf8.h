#pragma once
// UTF-8 validation and repair for text that reaches the tokenizer. GPT-2's reference tokenizer
// works on Python str, so raw bytes that are not UTF-8 never reach it; here they can (a corrupt
// web page, a Latin-1 file). We repair them the way Python's bytes.decode("utf-8", "replace")
// does -- each maximal invalid subpart becomes one U+FFFD -- so a repaired document tokenizes
// exactly as the reference pipeline would tokenize it.
#include <cstddef>
#include <string>
#include <string_view>

namespace sg {

constexpr size_t kValidUtf8 = std::string_view::npos;

// Offset of the first byte that does not belong to a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points above U+10FFFF are ill-formed), or kValidUtf8.
size_t find_invalid_utf8(std::string_view text);

// text with every maximal invalid subpart replaced by U+FFFD (EF BF BD); valid text unchanged.
std::string repair_utf8(std::string_view text);

}  // namespace sg
