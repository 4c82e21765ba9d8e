// `prepare openwebtext` reader: the official nested tar.xz, a directory of subsets, a directory
// of .txt files and JSONL (.jsonl, .gz, .zst) give the same documents; broken input is reported
// by file/member/line and skipped; the real WebText JSONL sample reads completely.
#include <doctest/doctest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "prepare/openwebtext_source.h"
#include "tests/prepare/archive_fixtures.h"
#include "tests/prepare/collecting_sink.h"
#include "tests/temp_dir.h"
#include "tests/tokenizer/test_data_dir.h"
#include "util/error.h"

using namespace sg;
using test::Filter;

namespace {

// Documents as the official .txt files hold them (before cleaning) and as they must come out.
const std::vector<std::string> kRaw = {
    "First document.\n\n\n\nAfter four newlines.\n", "  Second: ünïcödé 日本 🌍  \n",
    "Third\n\nparagraph two", "Fourth\r\nwith CRLF\n\n\n", "Fifth <|endoftext|> literal", "Sixth."};

std::vector<std::string> cleaned() {
  std::vector<std::string> out;
  for (const auto& r : kRaw) out.push_back(clean_openwebtext_document(r));
  return out;
}

std::string doc_name(size_t i) { return "0000" + std::to_string(i) + "-doc.txt"; }

// Two subsets of three documents, as urlsf_subsetNN-M_data.xz (xz tars of .txt).
test::Members subsets() {
  test::Members s;
  for (int k = 0; k < 2; ++k) {
    test::Members docs;
    for (size_t i = 3 * static_cast<size_t>(k); i < 3 * static_cast<size_t>(k) + 3; ++i) docs.push_back({doc_name(i), kRaw[i]});
    s.push_back({"openwebtext/urlsf_subset00-" + std::to_string(k + 1) + "_data.xz",
                 test::make_archive(docs, Filter::kXz)});
  }
  return s;
}

std::string jsonl_of(const std::vector<std::string>& docs) {
  std::string out;
  for (const auto& d : docs) out += nlohmann::json{{"text", d}}.dump() + "\n";
  return out;
}

std::vector<std::string> read_all(const std::string& src, ProblemLog& problems) {
  test::CollectingSink sink;
  read_openwebtext(src, sink, problems, nullptr);
  return sink.texts;
}

}  // namespace

TEST_CASE("cleaning follows the Hugging Face loader") {
  CHECK(clean_openwebtext_document("\n a\n\n\n\nb\n\nc \n") == "a\n\nb\n\nc");
  CHECK(clean_openwebtext_document(" \n\t ") == "");
}

TEST_CASE("the four input forms give the same documents") {
  test::TempDir dir;
  const auto expected = cleaned();

  // 1. openwebtext.tar.xz: a tar of the subset .xz files, itself xz-compressed.
  test::write_file(dir / "openwebtext.tar.xz", test::make_archive(subsets(), Filter::kXz));
  // 2. a directory of the subsets.
  std::filesystem::create_directories(dir / "subsets");
  for (const auto& [name, data] : subsets())
    test::write_file(dir / ("subsets/" + std::filesystem::path(name).filename().string()), data);
  // 3. a directory of .txt files.
  std::filesystem::create_directories(dir / "txt");
  for (size_t i = 0; i < kRaw.size(); ++i) test::write_file(dir / ("txt/" + doc_name(i)), kRaw[i]);
  // 4. JSONL, plain and compressed.
  const std::string jsonl = jsonl_of(expected);
  test::write_file(dir / "docs.jsonl", jsonl);
  test::write_file(dir / "docs.jsonl.gz", test::make_archive({{"docs.jsonl", jsonl}}, Filter::kGzip, true));
  test::write_file(dir / "docs.jsonl.zst", test::make_archive({{"docs.jsonl", jsonl}}, Filter::kZstd, true));

  for (const std::string src : {"openwebtext.tar.xz", "subsets", "txt", "docs.jsonl", "docs.jsonl.gz",
                                "docs.jsonl.zst"}) {
    CAPTURE(src);
    ProblemLog problems(false);
    CHECK(read_all(dir / src, problems) == expected);
    CHECK(problems.count() == 0);
  }
}

TEST_CASE("a truncated subset is reported and the other subsets are read") {
  test::TempDir dir;
  auto s = subsets();
  s[0].second.resize(s[0].second.size() / 2);  // cut the first subset's xz stream in half
  std::filesystem::create_directories(dir / "subsets");
  for (const auto& [name, data] : s)
    test::write_file(dir / ("subsets/" + std::filesystem::path(name).filename().string()), data);
  test::write_file(dir / "openwebtext.tar.xz", test::make_archive(s, Filter::kXz));
  const auto expected = cleaned();
  for (const std::string src : {"subsets", "openwebtext.tar.xz"}) {
    CAPTURE(src);
    ProblemLog problems(false);
    const auto docs = read_all(dir / src, problems);
    REQUIRE(docs.size() >= 3);
    // The second subset is intact whatever the first one yielded before the damage.
    CHECK(std::vector<std::string>(docs.end() - 3, docs.end()) ==
          std::vector<std::string>(expected.begin() + 3, expected.end()));
    REQUIRE(problems.count() >= 1);
    CHECK(problems.first()[0].find("urlsf_subset00-1_data.xz") != std::string::npos);
  }
}

TEST_CASE("a truncated outer archive keeps what came before and says where it broke") {
  test::TempDir dir;
  const std::string whole = test::make_archive(subsets(), Filter::kXz);
  test::write_file(dir / "openwebtext.tar.xz", whole.substr(0, whole.size() - 200));
  ProblemLog problems(false);
  const auto docs = read_all(dir / "openwebtext.tar.xz", problems);
  CHECK(docs.size() < kRaw.size());
  REQUIRE(problems.count() >= 1);
  CHECK(problems.first()[0].find("openwebtext.tar.xz") != std::string::npos);
}

TEST_CASE("bad JSONL lines are reported by line and skipped") {
  test::TempDir dir;
  test::write_file(dir / "bad.jsonl", "{\"text\": \"one\"}\n{\"text\": \"tw\n{\"title\": \"no text\"}\n"
                                      "\n{\"text\": 3}\n[1,2]\n{\"text\": \"bad \xff utf8\"}\n{\"text\": \"two\"}");
  ProblemLog problems(false);
  CHECK(read_all(dir / "bad.jsonl", problems) == std::vector<std::string>{"one", "two"});
  REQUIRE(problems.count() == 5);
  CHECK(problems.first()[0].find("bad.jsonl:2: not valid JSON") != std::string::npos);
  CHECK(problems.first()[1].find("bad.jsonl:3: no \"text\"") != std::string::npos);
  CHECK(problems.first()[2].find("bad.jsonl:5:") != std::string::npos);
}

TEST_CASE("a truncated .jsonl.gz is reported") {
  test::TempDir dir;
  std::string jsonl;
  for (int i = 0; i < 2000; ++i) jsonl += "{\"text\": \"document number " + std::to_string(i) + "\"}\n";
  const std::string gz = test::make_archive({{"d.jsonl", jsonl}}, Filter::kGzip, true);
  test::write_file(dir / "d.jsonl.gz", gz.substr(0, gz.size() / 2));
  ProblemLog problems(false);
  const auto docs = read_all(dir / "d.jsonl.gz", problems);
  CHECK(docs.size() < 2000);
  REQUIRE(problems.count() >= 1);
  CHECK(problems.first()[0].find("d.jsonl.gz") != std::string::npos);
}

TEST_CASE("a missing source is a RunError naming it") {
  ProblemLog problems(false);
  test::CollectingSink sink;
  CHECK_THROWS_AS(read_openwebtext("/nonexistent/owt", sink, problems, nullptr), RunError);
}

TEST_CASE("the real WebText JSONL sample reads completely") {
  const std::string path = test::test_data_path("webtext/webtext.test.truncated.jsonl");
  if (path.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/webtext/webtext.test.truncated.jsonl not found");
    return;
  }
  ProblemLog problems(false);
  const auto docs = read_all(path, problems);
  CHECK(docs.size() == 4723);
  CHECK(problems.count() == 0);
  for (const auto& d : docs) REQUIRE(!d.empty());
}
