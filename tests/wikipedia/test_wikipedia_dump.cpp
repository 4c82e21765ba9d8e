// read_wikipedia_dump on the real dump in ../shared/data (counts, cleaned text) and on broken
// dumps made from it (truncated bzip2, broken XML, not a dump at all).
#include <bzlib.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tests/test_files.h"
#include "prepare/wikipedia_source.h"
#include "tests/error_of.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using sg::test::error_of;
using sg::test::TempDir;

namespace {

constexpr const char* kDumpName =
    "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2";

// The dump's path, or "" (with a MESSAGE saying why) when the test data is not there.
std::string real_dump() {
  const char* root = std::getenv("SINGULARITY_TEST_DATA");
  if (root == nullptr || *root == '\0') {
    MESSAGE(
        "SKIPPED: SINGULARITY_TEST_DATA is unset (meson setup -Dtest_data=/path/to/shared/data)");
    return "";
  }
  const std::string path = std::string(root) + "/" + kDumpName;
  if (!fs::exists(path)) MESSAGE("SKIPPED: " << path << " is absent");
  return fs::exists(path) ? path : "";
}

struct Collected : sg::DocumentSink {
  std::vector<std::string> titles;
  std::map<std::string, std::string> text_of;
  void add(std::string text, std::string origin) override {
    titles.push_back(origin);
    text_of[origin] = std::move(text);
  }
};

using sg::test::read_file;
using sg::test::write_file;

std::string decompress(const std::string& bz2) {
  std::string xml(8u << 20, '\0');
  unsigned size = static_cast<unsigned>(xml.size());
  REQUIRE(BZ2_bzBuffToBuffDecompress(xml.data(), &size, const_cast<char*>(bz2.data()),
                                     static_cast<unsigned>(bz2.size()), 0, 0) == BZ_OK);
  xml.resize(size);
  return xml;
}

std::string compress(const std::string& xml) {
  std::string bz2(xml.size() + xml.size() / 100 + 600, '\0');
  unsigned size = static_cast<unsigned>(bz2.size());
  REQUIRE(BZ2_bzBuffToBuffCompress(bz2.data(), &size, const_cast<char*>(xml.data()),
                                   static_cast<unsigned>(xml.size()), 9, 0, 0) == BZ_OK);
  bz2.resize(size);
  return bz2;
}

}  // namespace

TEST_CASE("the real dump: page counts, article texts") {
  const std::string dump = real_dump();
  if (dump.empty()) return;
  Collected sink;
  sg::WikipediaStats stats;
  int progress_calls = 0;
  sg::read_wikipedia_dump(dump, sink, &stats, [&](const sg::WikipediaStats&) { ++progress_calls; });

  // The counts the data README gives.
  CHECK(stats.pages == 206);
  CHECK(stats.articles == 106);
  CHECK(stats.redirects == 99);
  CHECK(stats.other_namespaces == 1);
  CHECK(stats.empty_articles == 0);
  CHECK(stats.errors == 0);
  CHECK(stats.xml_bytes == 6089746);
  CHECK(stats.bytes_in == static_cast<int64_t>(fs::file_size(dump)));
  CHECK(sink.titles.size() == 106);
  CHECK(progress_calls >= 6);  // about once per MiB of the 6 MB of XML, and at the end

  REQUIRE(sink.text_of.count("Anarchism") == 1);
  REQUIRE(sink.text_of.count("Autism") == 1);
  REQUIRE(sink.text_of.count("Algeria") == 1);
  CHECK(sink.titles.front() == "Anarchism");  // AccessibleComputing, before it, is a redirect
  CHECK(sink.text_of.count("AccessibleComputing") == 0);

  const std::string& anarchism = sink.text_of["Anarchism"];
  CHECK(anarchism.starts_with(
      "Anarchism\n\nAnarchism is a political philosophy that advocates self-governed societies "
      "based on voluntary institutions. These are often described as stateless societies, "
      "although several authors have defined them more specifically as institutions based on "
      "non-hierarchical free associations."));
  // Headings are lines of their own.
  CHECK(anarchism.find("\nEtymology and terminology\n") != std::string::npos);
  CHECK(anarchism.find("\nHistory\n") != std::string::npos);
  CHECK(sink.text_of["Autism"].starts_with("Autism\n\nAutism is a neurodevelopmental disorder"));

  int64_t text_bytes = 0;
  for (const auto& [title, text] : sink.text_of) {
    CAPTURE(title);
    text_bytes += static_cast<int64_t>(text.size());
    CHECK(text.starts_with(title + "\n\n"));
    for (const std::string markup : {"{{", "}}", "[[", "]]", "<ref", "</ref", "'''", "''", "<!--",
                                     "{|", "&amp;", "&nbsp;", "\n\n\n", "[http", "Category:"})
      CHECK_MESSAGE(text.find(markup) == std::string::npos,
                    "\"" << markup << "\" left in the text");
    CHECK(text.size() > 200);
  }
  CHECK(text_bytes == stats.text_bytes);

  // For eyeballing: the head of one article as it will be trained on.
  const std::string& algeria = sink.text_of["Algeria"];
  MESSAGE("Algeria, first 1500 bytes:\n" << algeria.substr(0, 1500));
}

TEST_CASE("a truncated bzip2 dump: an error naming file and offset, complete articles kept") {
  const std::string dump = real_dump();
  if (dump.empty()) return;
  TempDir dir;
  const std::string bytes = read_file(dump);
  // Cut inside the first bzip2 block (nothing decodable yet) and half way through.
  for (const size_t cut : {size_t{1000}, bytes.size() / 2}) {
    CAPTURE(cut);
    const std::string truncated = dir / "truncated.xml.bz2";
    write_file(truncated, bytes.substr(0, cut));
    Collected sink;
    sg::WikipediaStats stats;
    const std::string error = error_of([&] { sg::read_wikipedia_dump(truncated, sink, &stats); });
    CAPTURE(error);
    CHECK(error.find(truncated) != std::string::npos);
    CHECK(error.find("truncated") != std::string::npos);
    CHECK(error.find("ends at byte " + std::to_string(cut) + " ") != std::string::npos);
    CHECK(stats.errors == 1);
    CHECK(stats.bytes_in == static_cast<int64_t>(cut));
    CHECK(static_cast<int64_t>(sink.titles.size()) == stats.articles - stats.empty_articles);
    if (cut == 1000)
      CHECK(stats.pages == 0);
    else
      CHECK((stats.articles > 10 && stats.articles < 106));
  }
}

TEST_CASE("a corrupt bzip2 block is reported") {
  const std::string dump = real_dump();
  if (dump.empty()) return;
  TempDir dir;
  std::string bytes = read_file(dump);
  for (size_t i = 1000; i < 1100; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5A);
  const std::string corrupt = dir / "corrupt.xml.bz2";
  write_file(corrupt, bytes);
  Collected sink;
  const std::string error = error_of([&] { sg::read_wikipedia_dump(corrupt, sink, nullptr); });
  CAPTURE(error);
  CHECK(error.find(corrupt) != std::string::npos);
  CHECK(error.find("corrupt") != std::string::npos);
}

TEST_CASE("a multistream dump reads like the single stream, and a plain .xml too") {
  const std::string dump = real_dump();
  if (dump.empty()) return;
  TempDir dir;
  const std::string xml = decompress(read_file(dump));
  // Cut between pages, as the real multistream dumps do every 100 pages.
  const size_t cut = xml.find("  <page>", xml.size() / 3);
  REQUIRE(cut != std::string::npos);
  const std::string multistream = dir / "multi.xml.bz2";
  write_file(multistream, compress(xml.substr(0, cut)) + compress(xml.substr(cut)));
  const std::string plain = dir / "plain.xml";
  write_file(plain, xml);

  Collected single_sink, multi_sink, plain_sink;
  sg::WikipediaStats single_stats, multi_stats, plain_stats;
  sg::read_wikipedia_dump(dump, single_sink, &single_stats);
  sg::read_wikipedia_dump(multistream, multi_sink, &multi_stats);
  sg::read_wikipedia_dump(plain, plain_sink, &plain_stats);
  CHECK(multi_stats.pages == 206);
  CHECK(multi_stats.articles == 106);
  CHECK(multi_stats.xml_bytes == static_cast<int64_t>(xml.size()));
  CHECK(multi_sink.text_of == single_sink.text_of);
  CHECK(plain_stats.articles == 106);
  CHECK(plain_stats.bytes_in == static_cast<int64_t>(xml.size()));
  CHECK(plain_sink.text_of == single_sink.text_of);

  // Garbage after the last stream is damage, not a third stream.
  const std::string trailing = dir / "trailing.xml.bz2";
  write_file(trailing, read_file(dump) + "garbage");
  const std::string error =
      error_of([&] { sg::read_wikipedia_dump(trailing, multi_sink, nullptr); });
  CHECK(error.find("not bzip2") != std::string::npos);
}

TEST_CASE("broken XML: reported with its byte offset, earlier articles kept") {
  TempDir dir;
  const std::string page =
      "<page><title>Good</title><ns>0</ns><revision><text>'''Good''' [[text]] here."
      "</text></revision></page>\n";
  const std::string head = "<mediawiki>\n" + page;
  const std::string broken = dir / "broken.xml";
  write_file(broken, head + "<page><title>Bad</title><ns>0</ns><revision><text>a < b</text>");
  Collected sink;
  sg::WikipediaStats stats;
  const std::string error = error_of([&] { sg::read_wikipedia_dump(broken, sink, &stats); });
  CAPTURE(error);
  CHECK(error.find(broken) != std::string::npos);
  // Expat points at the byte it could not accept: the blank after "a <".
  const size_t bad =
      head.size() + std::string("<page><title>Bad</title><ns>0</ns><revision><text>a <").size();
  CHECK(error.find("broken XML at byte " + std::to_string(bad) + " ") != std::string::npos);
  CHECK(stats.errors == 1);
  REQUIRE(sink.titles.size() == 1);
  CHECK(sink.text_of["Good"] == "Good\n\nGood text here.");

  // The same, bzip2-compressed, and cut off inside the XML (not inside the bzip2 stream).
  const std::string cut = dir / "cut.xml.bz2";
  write_file(cut, compress(head + "<page><title>Cut</title>"));
  const std::string cut_error = error_of([&] { sg::read_wikipedia_dump(cut, sink, nullptr); });
  CAPTURE(cut_error);
  CHECK(cut_error.find("decompressed dump") != std::string::npos);
}

TEST_CASE("pages are classified: namespaces, redirects, empty articles") {
  TempDir dir;
  const std::string path = dir / "pages.xml";
  write_file(
      path,
      "<mediawiki>"
      "<page><title>A</title><ns>0</ns><revision><text>Old.</text></revision>"
      "<revision><text>New &amp;amp; ''better''.</text></revision></page>"
      "<page><title>R</title><ns>0</ns><redirect title=\"A\"/><revision><text>#REDIRECT "
      "[[A]]</text></revision></page>"
      "<page><title>R2</title><ns>0</ns><revision><text> #redirect [[A]]</text></revision></page>"
      "<page><title>Wikipedia:X</title><ns>4</ns><revision><text>x</text></revision></page>"
      "<page><title>E</title><ns>0</ns><revision><text>{{stub}}</text></revision></page>"
      "</mediawiki>");
  Collected sink;
  sg::WikipediaStats stats;
  sg::read_wikipedia_dump(path, sink, &stats);
  CHECK(stats.pages == 5);
  CHECK(stats.articles == 2);
  CHECK(stats.empty_articles == 1);
  CHECK(stats.redirects == 2);
  CHECK(stats.other_namespaces == 1);
  REQUIRE(sink.titles.size() == 1);
  CHECK(sink.text_of["A"] == "A\n\nNew & better.");  // the last revision
}

TEST_CASE("namespace names come from the dump's <siteinfo>, not an English list") {
  TempDir dir;
  const std::string path = dir / "bg.xml";
  write_file(path,
             "<mediawiki><siteinfo><sitename>Уикипедия</sitename><namespaces>"
             "<namespace key=\"6\" case=\"first-letter\">Файл</namespace>"
             "<namespace key=\"14\" case=\"first-letter\">Категория</namespace>"
             "<namespace key=\"10\" case=\"first-letter\">Шаблон</namespace>"
             "</namespaces></siteinfo>"
             "<page><title>София</title><ns>0</ns><revision><text>"
             "[[Файл:Sofia.jpg|мини|Изглед]]'''София''' е столица.\n"
             "[[Категория:Столици в Европа]]</text></revision></page></mediawiki>");
  Collected sink;
  sg::read_wikipedia_dump(path, sink, nullptr);
  CHECK(sink.text_of["София"] == "София\n\nСофия е столица.");
}

TEST_CASE("files that are not dumps are refused by name") {
  TempDir dir;
  const std::string gzip = dir / "dump.xml.bz2";
  write_file(gzip, std::string("\x1f\x8b\x08\x00 not bzip2", 14));
  std::string error = error_of([&] {
    Collected sink;
    sg::read_wikipedia_dump(gzip, sink, nullptr);
  });
  CAPTURE(error);
  CHECK(error.find(gzip) != std::string::npos);
  CHECK(error.find("neither a bzip2") != std::string::npos);
  CHECK(error.find("1f 8b") != std::string::npos);

  const std::string empty = dir / "empty.xml";
  write_file(empty, "");
  CHECK(error_of([&] {
          Collected sink;
          sg::read_wikipedia_dump(empty, sink, nullptr);
        }).find("empty") != std::string::npos);

  const std::string no_pages = dir / "no_pages.xml";
  write_file(no_pages, "<?xml version=\"1.0\"?><rss><channel/></rss>");
  CHECK(error_of([&] {
          Collected sink;
          sg::read_wikipedia_dump(no_pages, sink, nullptr);
        }).find("no <page>") != std::string::npos);

  const std::string missing = dir / "missing.xml.bz2";
  CHECK(error_of([&] {
          Collected sink;
          sg::read_wikipedia_dump(missing, sink, nullptr);
        }).find("cannot open") != std::string::npos);
}
