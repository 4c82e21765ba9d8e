#include "tokenizer/gpt2_tokenizer.h"

#include <array>
#include <atomic>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "data/file_io.h"
#include "tokenizer/bpe_merges.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace sg {
namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";
constexpr const char* kWhereToGet =
    "encoder.json and vocab.bpe are GPT-2's tokenizer files (from "
    "https://openaipublic.blob.core.windows.net/gpt-2/models/124M/ or the Hugging Face model "
    "openai-community/gpt2)";

// Regular files only: a directory would read as empty ("not valid JSON") and a FIFO would block.
std::string read_whole_file(const std::string& path) {
  std::string text, why;
  if (!read_regular_file(path, text, why)) throw RunError(path + ": " + why + "; " + kWhereToGet);
  return text;
}

std::array<char32_t, 256> make_byte_to_unicode() {
  // Printable Latin-1 bytes stand for themselves; the other 68 map to U+0100 onwards in order.
  std::array<char32_t, 256> table{};
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
  }
  return table;
}

const std::array<char32_t, 256>& byte_to_unicode_table() {
  static const std::array<char32_t, 256> table = make_byte_to_unicode();
  return table;
}

// A token string from encoder.json / vocab.bpe (UTF-8 in the byte-to-unicode alphabet) -> the
// raw bytes it stands for. Returns false for a character outside that alphabet.
bool token_string_to_bytes(std::string_view s, std::string& out) {
  static const auto inverse = [] {
    std::array<int, 324> inv;
    inv.fill(-1);
    const auto& forward = byte_to_unicode_table();
    for (int b = 0; b < 256; ++b) inv[forward[b]] = b;
    return inv;
  }();
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    char32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
      cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;  // the alphabet stops at U+0143: one or two bytes
    }
    if (cp >= inverse.size() || inverse[cp] < 0) return false;
    out.push_back(static_cast<char>(inverse[cp]));
  }
  return true;
}

std::atomic<uint64_t> next_serial{1};

// word bytes -> its tokens, per thread. Bounded: cleared when full, which costs a few misses
// and keeps a long run over web text from growing without limit.
struct WordCache {
  uint64_t serial = 0;
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> index;  // -> (offset, count)
  std::vector<int32_t> pool;
  std::vector<int32_t> scratch;
  static constexpr size_t kMaxWords = 1 << 18;

  void reset(uint64_t owner) {
    serial = owner;
    index.clear();
    pool.clear();
  }
};

WordCache& thread_word_cache(uint64_t owner) {
  thread_local WordCache cache;
  if (cache.serial != owner) cache.reset(owner);
  return cache;
}

}  // namespace

char32_t gpt2_byte_to_unicode(uint8_t b) { return byte_to_unicode_table()[b]; }

struct Gpt2Tokenizer::Tables {
  Pretokenizer pretokenizer;
  BpeMergeTable merges;
  std::array<int32_t, 256> byte_token{};  // byte -> id of the one-byte token
};

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& dir) {
  const std::string encoder_path = dir + "/encoder.json";
  const std::string merges_path = dir + "/vocab.bpe";
  auto tables = std::make_shared<Tables>();
  Gpt2Tokenizer tok;

  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(read_whole_file(encoder_path));
  } catch (const nlohmann::json::exception& e) {
    throw RunError(encoder_path + ": not valid JSON (" + e.what() + "); " + kWhereToGet);
  }
  if (!encoder.is_object() || encoder.empty())
    throw RunError(encoder_path + ": expected an object of token -> id; " + kWhereToGet);
  if (encoder.size() > static_cast<size_t>(kMaxVocabSize))
    throw RunError(encoder_path + ": " + std::to_string(encoder.size()) +
                   " tokens, more than the " + std::to_string(kMaxVocabSize) +
                   " that token shards hold (llm.c's version 1 stores ids as uint16); use a " +
                   "vocabulary of at most " + std::to_string(kMaxVocabSize) +
                   " tokens, such as GPT-2's 50,257");
  std::unordered_map<std::string, int32_t> id_of_bytes;
  id_of_bytes.reserve(encoder.size() * 2);
  tok.token_bytes_.assign(encoder.size(), std::string());
  std::vector<bool> seen(encoder.size(), false);
  std::string bytes;
  for (const auto& [key, value] : encoder.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= static_cast<int64_t>(encoder.size()))
      throw RunError(encoder_path + ": id of \"" + key + "\" is not an integer in 0.." +
                     std::to_string(encoder.size() - 1) + "; " + kWhereToGet);
    const auto id = value.get<int32_t>();
    if (seen[id]) throw RunError(encoder_path + ": id " + std::to_string(id) + " appears twice");
    seen[id] = true;
    if (key == kEndOfText) {
      tok.eot_id_ = id;
      tok.token_bytes_[id] = key;
      continue;
    }
    if (!token_string_to_bytes(key, bytes))
      throw RunError(encoder_path + ": token \"" + key +
                     "\" uses a character outside GPT-2's byte alphabet; " + kWhereToGet);
    tok.token_bytes_[id] = bytes;
    id_of_bytes.emplace(bytes, id);
  }
  if (tok.eot_id_ < 0) throw RunError(encoder_path + ": no \"<|endoftext|>\" token; " + kWhereToGet);
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == id_of_bytes.end())
      throw RunError(encoder_path + ": no token for byte " + std::to_string(b) + "; " + kWhereToGet);
    tables->byte_token[b] = it->second;
  }

  const std::string merges_text = read_whole_file(merges_path);
  std::istringstream lines(merges_text);
  std::string line, left, right;
  int line_number = 0;
  int32_t rank = 0;
  tables->merges.reserve(encoder.size());
  while (std::getline(lines, line)) {
    ++line_number;
    if (line_number == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const auto where = merges_path + ":" + std::to_string(line_number) + ": ";
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      throw RunError(where + "expected two tokens separated by one space; " + kWhereToGet);
    if (!token_string_to_bytes(std::string_view(line).substr(0, space), left) ||
        !token_string_to_bytes(std::string_view(line).substr(space + 1), right))
      throw RunError(where + "a character outside GPT-2's byte alphabet; " + kWhereToGet);
    const auto l = id_of_bytes.find(left), r = id_of_bytes.find(right),
               m = id_of_bytes.find(left + right);
    if (l == id_of_bytes.end() || r == id_of_bytes.end() || m == id_of_bytes.end())
      throw RunError(where + "merge of tokens not in encoder.json; the two files do not belong "
                     "together");
    if (!tables->merges.insert(l->second, r->second, BpeMerge{rank, m->second}))
      throw RunError(where + "this pair was already listed; " + kWhereToGet);
    ++rank;
  }
  if (rank == 0) throw RunError(merges_path + ": no merges; " + kWhereToGet);

  tok.tables_ = std::move(tables);
  tok.serial_ = next_serial.fetch_add(1);
  return tok;
}

void Gpt2Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  const Tables& t = *tables_;
  WordCache& cache = thread_word_cache(serial_);
  t.pretokenizer.split(text, [&](std::string_view piece) {
    if (piece.size() == 1) {
      out.push_back(t.byte_token[static_cast<unsigned char>(piece[0])]);
      return;
    }
    // Transparent lookup would avoid this string; the copy is cheap next to the regex match.
    std::string key(piece);
    if (const auto it = cache.index.find(key); it != cache.index.end()) {
      out.insert(out.end(), cache.pool.begin() + it->second.first,
                 cache.pool.begin() + it->second.first + it->second.second);
      return;
    }
    std::vector<int32_t>& word = cache.scratch;
    word.clear();
    for (const char c : piece) word.push_back(t.byte_token[static_cast<unsigned char>(c)]);
    bpe_merge_word(t.merges, word);
    out.insert(out.end(), word.begin(), word.end());
    if (piece.size() > 256) return;  // rare long runs are not worth remembering
    if (cache.index.size() >= WordCache::kMaxWords) cache.reset(serial_);
    cache.index.emplace(std::move(key), std::make_pair(static_cast<uint32_t>(cache.pool.size()),
                                                       static_cast<uint32_t>(word.size())));
    cache.pool.insert(cache.pool.end(), word.begin(), word.end());
  });
}

void Gpt2Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& out,
                                SpecialTokens special) const {
  std::string repaired;
  if (find_invalid_utf8(text) != kValidUtf8) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  if (special == SpecialTokens::kAsText) {
    encode_ordinary(text, out);
    return;
  }
  for (;;) {
    const size_t at = text.find(kEndOfText);
    if (at == std::string_view::npos) break;
    encode_ordinary(text.substr(0, at), out);
    out.push_back(eot_id_);
    text.remove_prefix(at + kEndOfText.size());
  }
  encode_ordinary(text, out);
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text, SpecialTokens special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  encode_into(text, ids, special);
  return ids;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw RunError("token id " + std::to_string(id) + " is outside GPT-2's vocabulary (0.." +
                     std::to_string(vocab_size() - 1) + ")");
    out += token_bytes_[id];
  }
  return out;
}

}  // namespace sg
