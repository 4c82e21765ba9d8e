// GPT-2 tokenizer: the reference ids on the shared test vectors and prompts, the known token
// counts of the sample texts, decode(encode(x)) == x, special tokens, invalid UTF-8, threads,
// and the files it refuses: a vocabulary over 65,536 tokens, a directory or FIFO for a file.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/error_of.h"
#include "tests/fifo_guard.h"
#include "tests/temp_dir.h"
#include "tests/test_files.h"
#include "tests/tokenizer/shared_tokenizer.h"
#include "tests/tokenizer/synthetic_vocab.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/utf8.h"

using namespace sg;
using sg::test::read_file;

namespace {


}  // namespace

TEST_CASE("byte-to-unicode alphabet is GPT-2's") {
  CHECK(gpt2_byte_to_unicode('A') == U'A');
  CHECK(gpt2_byte_to_unicode(' ') == U'\u0120');  // the familiar "Ġ"
  CHECK(gpt2_byte_to_unicode('\n') == U'\u010A');  // "Ċ"
  CHECK(gpt2_byte_to_unicode(0) == U'\u0100');
  CHECK(gpt2_byte_to_unicode(0xAD) == U'\u0143');  // the last of the 68 remapped bytes
}

TEST_CASE("encoder test vectors give the reference ids") {
  REQUIRE_TOKENIZER(tok);
  CHECK(tok->vocab_size() == 50257);
  CHECK(tok->eot_id() == 50256);
  std::istringstream lines(read_file(test::test_data_path("gpt2/encoder_test_vectors.jsonl")));
  std::string line;
  int cases = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const std::string text = j.at("text");
    const auto expected = j.at("ids").get<std::vector<int32_t>>();
    CAPTURE(text);
    CHECK(tok->encode(text) == expected);
    CHECK(tok->decode(expected) == text);
    ++cases;
  }
  CHECK(cases == 7);
}

TEST_CASE("100 prompts give the reference ids") {
  REQUIRE_TOKENIZER(tok);
  std::istringstream lines(read_file(test::test_data_path("gpt2/prompts_with_ids.txt")));
  std::string line;
  int cases = 0;
  while (std::getline(lines, line)) {
    const size_t arrow = line.rfind(" => ");
    if (arrow == std::string::npos) continue;
    const std::string text = line.substr(0, arrow);
    std::vector<int32_t> expected;
    std::istringstream ids(line.substr(arrow + 4));
    for (std::string id; std::getline(ids, id, ',');) expected.push_back(std::stoi(id));
    CAPTURE(text);
    CHECK(tok->encode(text) == expected);
    ++cases;
  }
  CHECK(cases == 100);
}

TEST_CASE("token counts of the sample texts match the reference") {
  REQUIRE_TOKENIZER(tok);
  const std::string shakespeare_path = test::test_data_path("webtext/tinyshakespeare.txt");
  const std::string owt_path = test::test_data_path("webtext/openwebtext_first100docs.txt");
  if (shakespeare_path.empty() || owt_path.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/webtext not found");
    return;
  }
  // The 90% split is by characters (nanoGPT's shakespeare), not bytes.
  const std::string shakespeare = read_file(shakespeare_path);
  std::vector<size_t> char_starts;
  for (size_t i = 0; i < shakespeare.size(); ++i)
    if ((static_cast<unsigned char>(shakespeare[i]) & 0xC0) != 0x80) char_starts.push_back(i);
  const size_t split = char_starts[static_cast<size_t>(char_starts.size() * 0.9)];
  const auto train = tok->encode(std::string_view(shakespeare).substr(0, split));
  const auto val = tok->encode(std::string_view(shakespeare).substr(split));
  CHECK(train.size() == 301966);
  CHECK(val.size() == 36059);
  CHECK(tok->encode(shakespeare).size() == 338025);
  CHECK(tok->decode(train) + tok->decode(val) == shakespeare);

  const std::string owt = read_file(owt_path);
  const auto ids = tok->encode(owt);
  CHECK(ids.size() == 113570);
  REQUIRE(ids.size() >= 5);
  CHECK(std::vector<int32_t>(ids.begin(), ids.begin() + 5) ==
        std::vector<int32_t>{13924, 12, 559, 12, 35784});
  CHECK(tok->decode(ids) == owt);
}

TEST_CASE("decode(encode(x)) == x on awkward text") {
  REQUIRE_TOKENIZER(tok);
  const std::vector<std::string> texts = {
      "", "a", "   ", "\n\n\n", "  leading and trailing  ", "tabs\tand\r\nCRLF",
      "it's they're we've I'm you'll he'd IT'S", "numbers 1234567890 3.14159 ¾ ٣",
      "日本語のテキスト、中文文本。", "emoji 👩‍👩‍👧 flags 🇫🇷", "combining é vs é",
      "nbsp\u00a0and\u2003em space\u3000ideographic", "NEL\u0085line", "\x1c\x1d\x1e\x1f",
      std::string(5000, ' ') + "x", std::string(3000, '='), "base64 " + std::string(2000, 'A'),
  };
  for (const std::string& text : texts) {
    CAPTURE(text);
    CHECK(tok->decode(tok->encode(text)) == text);
  }
}

TEST_CASE("Unicode whitespace splits words like the reference's \\s") {
  REQUIRE_TOKENIZER(tok);
  // " hello" is one token (23748); a no-break space is whitespace, so "\u00a0hello" is the
  // whitespace piece then "hello" (31373), never " hello".
  CHECK(tok->encode(" hello") == std::vector<int32_t>{23748});
  const auto ids = tok->encode("\u00a0hello");
  REQUIRE(!ids.empty());
  CHECK(ids.back() == 31373);
  // Trailing whitespace before a word: "\s+(?!\S)" leaves the last space to the word.
  CHECK(tok->encode("a  b") == std::vector<int32_t>{64, 220, 275});
}

TEST_CASE("<|endoftext|> is the special id only when allowed") {
  REQUIRE_TOKENIZER(tok);
  const std::string text = "end<|endoftext|>start";
  const auto allowed = tok->encode(text, SpecialTokens::kAllowed);
  const auto as_text = tok->encode(text);
  CHECK(std::count(allowed.begin(), allowed.end(), 50256) == 1);
  CHECK(std::count(as_text.begin(), as_text.end(), 50256) == 0);
  CHECK(tok->decode(allowed) == text);
  CHECK(tok->decode(as_text) == text);
  CHECK(tok->encode("<|endoftext|>", SpecialTokens::kAllowed) == std::vector<int32_t>{50256});
}

TEST_CASE("invalid UTF-8 is repaired to U+FFFD, never a crash") {
  REQUIRE_TOKENIZER(tok);
  const std::string bad = std::string("caf\xE9 ok \xF0\x9F\x98 end \xFF\xC0\x80 ") + "\xED\xA0\x80";
  const auto ids = tok->encode(bad);
  CHECK(tok->decode(ids) == repair_utf8(bad));
  CHECK(tok->decode(ids).find("\xEF\xBF\xBD") != std::string::npos);
  CHECK(tok->encode(bad) == tok->encode(repair_utf8(bad)));
}

TEST_CASE("decode rejects ids outside the vocabulary") {
  REQUIRE_TOKENIZER(tok);
  const std::vector<int32_t> ids{15496, 50257};
  CHECK(test::error_of([&] { tok->decode(ids); }).find("50257") != std::string::npos);
}

TEST_CASE("concurrent encodes agree with a single thread") {
  REQUIRE_TOKENIZER(tok);
  const std::string path = test::test_data_path("webtext/openwebtext_first100docs.txt");
  if (path.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/webtext not found");
    return;
  }
  const std::string text = read_file(path).substr(0, 120000);
  const auto expected = tok->encode(text);
  std::vector<std::vector<int32_t>> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = tok->encode(text); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) CHECK(r == expected);
}

TEST_CASE("missing or malformed tokenizer files are reported by name") {
  test::TempDir dir;
  const std::string missing = test::error_of([&] { Gpt2Tokenizer::load(dir.path()); });
  CHECK(missing.find("encoder.json") != std::string::npos);
  CHECK(missing.find("cannot open") != std::string::npos);
  std::ofstream(dir / "encoder.json") << "{\"a\": 0, ";
  CHECK(test::error_of([&] { Gpt2Tokenizer::load(dir.path()); }).find("not valid JSON") !=
        std::string::npos);
  std::ofstream(dir / "encoder.json") << "{\"a\": 0}";
  CHECK(test::error_of([&] { Gpt2Tokenizer::load(dir.path()); }).find("<|endoftext|>") !=
        std::string::npos);
}

TEST_CASE("a vocabulary of more than 65,536 tokens is refused at load; 65,536 tokens load") {
  // llm.c's shards hold uint16 ids: id 69999 of 70,000 would be written as 69999 - 65536 = 4463.
  test::TempDir dir;
  test::write_synthetic_vocab(dir.path(), 70000);
  const std::string error = test::error_of([&] { Gpt2Tokenizer::load(dir.path()); });
  CHECK(error.find(dir / "encoder.json") != std::string::npos);
  CHECK(error.find("70000 tokens") != std::string::npos);
  CHECK(error.find("65536") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);

  test::write_synthetic_vocab(dir.path(), kMaxVocabSize);
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(dir.path());
  CHECK(tok.vocab_size() == 65536);
  CHECK(tok.encode("zz") == std::vector<int32_t>{65535});
  CHECK(tok.decode(std::vector<int32_t>{65535}) == "zz");
}

TEST_CASE("an encoder.json that is a directory or a FIFO is named as such, without blocking") {
  test::TempDir dir;
  std::filesystem::create_directory(dir / "encoder.json");
  std::string error = test::error_of([&] { Gpt2Tokenizer::load(dir.path()); });
  CHECK(error.find(dir / "encoder.json: is a directory") != std::string::npos);
  CHECK(error.find("not valid JSON") == std::string::npos);

  std::filesystem::remove(dir / "encoder.json");
  REQUIRE(::mkfifo((dir / "encoder.json").c_str(), 0600) == 0);
  const auto load = [&] { error = test::error_of([&] { Gpt2Tokenizer::load(dir.path()); }); };
  CHECK(test::returns_without_blocking(dir / "encoder.json", load));
  CHECK(error.find(dir / "encoder.json: is a FIFO") != std::string::npos);
}
