#pragma once
// A made-up byte-level BPE vocabulary of any size, in GPT-2's file format, for the limits on
// vocabulary size (gpt2_tokenizer.h kMaxVocabSize): the 256 byte tokens (ids 0..255), filler
// tokens, "<|endoftext|>" (id tokens - 2) and "zz" (id tokens - 1, from the one merge "z z"), so
// the text "zz" encodes to the highest id.
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/gpt2_tokenizer.h"

namespace sg::test {

inline std::string utf8_of(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else {  // the byte alphabet stops at U+0143: two bytes
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

inline void write_synthetic_vocab(const std::string& dir, int tokens) {
  nlohmann::json encoder = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) encoder[utf8_of(gpt2_byte_to_unicode(static_cast<uint8_t>(b)))] = b;
  for (int id = 256; id < tokens - 2; ++id) encoder["#" + std::to_string(id)] = id;
  encoder["<|endoftext|>"] = tokens - 2;
  encoder["zz"] = tokens - 1;
  std::ofstream(dir + "/encoder.json", std::ios::trunc) << encoder.dump();
  std::ofstream(dir + "/vocab.bpe", std::ios::trunc) << "#version: 0.2\nz z\n";
}

}  // namespace sg::test
