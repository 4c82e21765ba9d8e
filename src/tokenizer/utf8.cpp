#include "tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

namespace sg {
namespace {

// Length of the well-formed sequence starting at text[i] (1..4), or 0 when the bytes from i on
// are an ill-formed subpart, in which case *subpart is how many bytes that maximal subpart
// spans (Unicode 15, table 3-7; the same rule as Python's decoder).
size_t sequence_length(const unsigned char* s, size_t n, size_t* subpart) {
  const unsigned char lead = s[0];
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    *subpart = 1;  // C0, C1, F5..FF, or a stray continuation byte
    return 0;
  }
  size_t i = 1;
  for (; i < need; ++i) {
    if (i >= n) break;
    const unsigned char c = s[i];
    const bool ok = (i == 1) ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
  }
  if (i == need) return need;
  *subpart = i;
  return 0;
}

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII runs dominate real text: test eight bytes at a time.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    size_t subpart = 0;
    const size_t len = sequence_length(s + i, n - i, &subpart);
    if (len == 0) return i;
    i += len;
  }
  return kValidUtf8;
}

std::string repair_utf8(std::string_view text) {
  size_t bad = find_invalid_utf8(text);
  if (bad == kValidUtf8) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  out.append(text.substr(0, bad));
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = bad;
  while (i < n) {
    size_t subpart = 0;
    const size_t len = sequence_length(s + i, n - i, &subpart);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");
      i += subpart;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace sg
