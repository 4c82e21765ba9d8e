#pragma once
// GPT-2's tokenizer from the shared sample data, loaded once per test executable (parsing
// encoder.json takes a noticeable fraction of a second); tests skip where the data is absent.
#include <doctest/doctest.h>

#include <string>

#include "tests/tokenizer/test_data_dir.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace sg::test {

inline const Gpt2Tokenizer* shared_tokenizer() {
  static const std::string dir = test_data_path("gpt2");
  if (dir.empty()) return nullptr;
  static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(dir);
  return &tok;
}

}  // namespace sg::test

#define REQUIRE_TOKENIZER(tok)                                                             \
  const ::sg::Gpt2Tokenizer* tok = ::sg::test::shared_tokenizer();                         \
  if (tok == nullptr) {                                                                    \
    MESSAGE("skipped: SINGULARITY_TEST_DATA/gpt2 not found (set SINGULARITY_TEST_DATA)"); \
    return;                                                                                \
  }
