#pragma once
// GPT-2's byte-level BPE tokenizer, giving the reference ids (OpenAI's encoder.py, tiktoken's
// "gpt2"): text -> pre-tokenization pieces (tokenizer/pretokenizer.h) -> the bytes of each piece
// as byte tokens -> BPE merges by rank (tokenizer/bpe_merges.h).
//
// Loaded from OpenAI's two files: encoder.json (token string -> id, 50,257 entries, strings in
// GPT-2's byte-to-unicode alphabet) and vocab.bpe (50,000 merges by rank). Both are in
// ../shared/data/gpt2 for tests, and published with GPT-2 (openaipublic.blob.core.windows.net/
// gpt-2/models/124M/) and on the Hugging Face hub (openai-community/gpt2).
//
// Invalid UTF-8 in the input is repaired, not encoded raw: each maximal invalid subpart becomes
// U+FFFD, exactly what the reference sees after Python's decode("utf-8", "replace"). So
// decode(encode(x)) == x for valid UTF-8 x, and == repair_utf8(x) otherwise.
//
// encode() is const and thread-safe: each thread keeps its own cache of word -> tokens.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sg {

// Whether the text "<|endoftext|>" inside the input becomes the special token (id 50256) or is
// encoded as the ordinary characters it consists of. Ordinary is the default: web documents
// sometimes contain the string, and it must not become a document boundary.
enum class SpecialTokens { kAsText, kAllowed };

// The most tokens a vocabulary may have: ids are stored as uint16 in llm.c token shards
// (data/token_shard.h), so ids run 0..65535. load() refuses a larger encoder.json rather than
// let ids wrap around modulo 65,536 in the shards.
constexpr int kMaxVocabSize = 65536;

class Gpt2Tokenizer {
 public:
  // dir holds encoder.json and vocab.bpe. Throws sg::RunError naming a missing or malformed
  // file (a directory, a FIFO, more than kMaxVocabSize tokens) and where to get the files.
  static Gpt2Tokenizer load(const std::string& dir);

  std::vector<int32_t> encode(std::string_view text,
                              SpecialTokens special = SpecialTokens::kAsText) const;
  // Appends to out instead of returning a vector (the dataset writer's hot path).
  void encode_into(std::string_view text, std::vector<int32_t>& out,
                   SpecialTokens special = SpecialTokens::kAsText) const;
  // The bytes the ids stand for (not always valid UTF-8 for a slice of a sequence: a token may
  // hold part of a character). Throws sg::RunError for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;

  int eot_id() const { return eot_id_; }                    // 50256
  int vocab_size() const { return static_cast<int>(token_bytes_.size()); }  // 50257
  const std::string& token_bytes(int32_t id) const { return token_bytes_.at(id); }

 private:
  struct Tables;
  Gpt2Tokenizer() = default;
  void encode_ordinary(std::string_view valid_utf8, std::vector<int32_t>& out) const;

  std::shared_ptr<const Tables> tables_;  // immutable after load; copies share it
  std::vector<std::string> token_bytes_;  // id -> raw bytes
  int eot_id_ = -1;
  uint64_t serial_ = 0;                   // names this vocabulary for the per-thread caches
};

// GPT-2's bytes_to_unicode(): byte b -> the printable code point that stands for it in
// encoder.json and vocab.bpe.
char32_t gpt2_byte_to_unicode(uint8_t b);

}  // namespace sg
