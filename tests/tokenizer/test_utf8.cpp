// UTF-8 validation and Python-compatible repair (one U+FFFD per maximal invalid subpart).
#include <doctest/doctest.h>

#include "tokenizer/utf8.h"

using namespace sg;

TEST_CASE("valid UTF-8 is accepted unchanged") {
  for (const std::string s : {"", "plain ascii text that is longer than eight bytes", "é日本🌍",
                              "\xF4\x8F\xBF\xBF", "\xEF\xBF\xBD"}) {
    CHECK(find_invalid_utf8(s) == kValidUtf8);
    CHECK(repair_utf8(s) == s);
  }
}

TEST_CASE("the first invalid byte is found") {
  CHECK(find_invalid_utf8("abcdefghij\xFFz") == 10);
  CHECK(find_invalid_utf8("ab\xC0\x80") == 2);          // overlong
  CHECK(find_invalid_utf8("ab\xED\xA0\x80") == 2);      // surrogate
  CHECK(find_invalid_utf8("\xF4\x90\x80\x80") == 0);    // above U+10FFFF
  CHECK(find_invalid_utf8("ok\xE6\x97") == 2);          // truncated at the end
}

TEST_CASE("repair replaces each maximal subpart like Python's errors='replace'") {
  const std::string r = "\xEF\xBF\xBD";
  // b"\xe6\x97x".decode("utf-8", "replace") == "\ufffdx": a truncated sequence is one U+FFFD.
  CHECK(repair_utf8("\xE6\x97x") == r + "x");
  // b"\xc0\x80".decode(..., "replace") == "\ufffd\ufffd": C0 never starts a sequence.
  CHECK(repair_utf8("\xC0\x80") == r + r);
  // b"\xed\xa0\x80" -> three replacements (ED's second byte must be 80..9F).
  CHECK(repair_utf8("\xED\xA0\x80") == r + r + r);
  // b"\xf0\x9f\x98 " -> one replacement then the space.
  CHECK(repair_utf8("\xF0\x9F\x98 ") == r + " ");
  CHECK(repair_utf8("caf\xE9!") == "caf" + r + "!");
  CHECK(find_invalid_utf8(repair_utf8("\xFF\xFE\x80\xBF abc \xF8")) == kValidUtf8);
}
