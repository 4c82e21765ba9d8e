// libFuzzer target: loading a GPT-2 vocabulary (src/tokenizer/gpt2_tokenizer.cpp
// Gpt2Tokenizer::load, docs/faults.md "Fuzzing"). Input: encoder.json, then optionally a NUL
// byte and vocab.bpe (default: no merges).
// Contract (src/tokenizer/gpt2_tokenizer.h): a vocabulary is loaded or refused with a RunError
// (more than kMaxVocabSize tokens included); a loaded one has every id below 65,536 and
// decode(encode(x)) == x for valid UTF-8 x.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_files.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = sg::fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  sg::fuzz::write_scratch_file("vocab/encoder.json", input.substr(0, nul));
  sg::fuzz::write_scratch_file(
      "vocab/vocab.bpe", nul == std::string_view::npos ? "#version: 0.2\n" : input.substr(nul + 1));
  try {
    const sg::Gpt2Tokenizer tok = sg::Gpt2Tokenizer::load(sg::fuzz::scratch_dir() + "/vocab");
    if (tok.vocab_size() > sg::kMaxVocabSize || tok.eot_id() < 0 ||
        tok.eot_id() >= tok.vocab_size())
      sg::fuzz::contract_broken("loaded a vocabulary of " + std::to_string(tok.vocab_size()) +
                                " tokens, end of text " + std::to_string(tok.eot_id()));
    const std::string text = "Hello world, it's 2024!  \xc3\xa9t\xc3\xa9 \xe2\x82\xac<|endoftext|>";
    const auto ids = tok.encode(text);
    for (const int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size() || id > 65535)
        sg::fuzz::contract_broken("encode gave id " + std::to_string(id));
    if (tok.decode(ids) != text) sg::fuzz::contract_broken("decode(encode(x)) != x");
    sg::fuzz::note("accepted: " + std::to_string(tok.vocab_size()) + " tokens");
  } catch (const sg::RunError& e) {
    sg::fuzz::note(std::string("refused: ") + e.what());
  }
  return 0;
}
