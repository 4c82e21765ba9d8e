// clean_wikitext on hostile pages: markup nested tens of thousands deep must not overflow the
// stack, and unclosed markup repeated over a page must cost time in proportion to the page.
#include <doctest/doctest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "prepare/wikipedia_source.h"
#include "prepare/wikipedia_wikitext.h"
#include "tests/temp_dir.h"
#include "tests/test_files.h"

using sg::clean_wikitext;
using sg::test::TempDir;
using sg::test::write_file;

namespace {

std::string repeat(std::string_view piece, size_t times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

// `piece` repeated to fill about `bytes`.
std::string fill(std::string_view piece, size_t bytes) {
  return repeat(piece, std::max<size_t>(1, bytes / piece.size()));
}

// CPU seconds of this thread: unlike the wall clock, they leave out the time other processes of
// a busy machine took the core.
double thread_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct Collected : sg::DocumentSink {
  std::string text;
  void add(std::string document, std::string) override { text += document; }
};

double seconds_to_clean(const std::string& page) {
  const double start = thread_seconds();
  const std::string cleaned = clean_wikitext(page);
  const double seconds = thread_seconds() - start;
  CHECK(cleaned.size() <= page.size());
  return seconds;
}

constexpr std::string_view kProse =
    "Some prose about the subject, with a [[link|label]] and '''bold''' text. ";

}  // namespace

// These pages crashed with SIGSEGV: link cleaning and template expansion recursed once per level.
// The binary runs on the normal 8 MiB stack.
TEST_CASE("markup nested tens of thousands deep cleans without deep recursion") {
  // 40,000 nested links, 240 KB: every level shows the next, the innermost [[a|]] shows "a".
  CHECK(clean_wikitext(repeat("[[a|", 40000) + repeat("]]", 40000)) == "a");
  CHECK(clean_wikitext("x " + repeat("[[a|", 40000)) == "x " + repeat("a|", 40000));  // unclosed

  // 60,000 nested {{nowrap|}}, 660 KB; it took minutes before it crashed.
  const auto start = std::chrono::steady_clock::now();
  CHECK(clean_wikitext(repeat("{{nowrap|", 60000) + "x" + repeat("}}", 60000) + " y") == "y");
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0);
  CHECK(clean_wikitext(repeat("{{nowrap|", 60000)) == repeat("nowrap|", 60000));  // unclosed

  // Inline templates render down to 40 levels (wikipedia_templates.h); deeper ones are dropped
  // with their words.
  CHECK(clean_wikitext(repeat("{{nowrap|", 40) + "x" + repeat("}}", 40) + " y") == "x y");
  CHECK(clean_wikitext(repeat("{{nowrap|", 41) + "x" + repeat("}}", 41) + " y") == "y");
  CHECK(clean_wikitext(repeat("{{lang|fr|", 40) + "[[a|b]]" + repeat("}}", 40)) == "b");

  // Parentheses left empty are tidied 16 levels deep (wikipedia_wikitext.h): one pass a level.
  CHECK(clean_wikitext("a " + repeat("( ", 16) + repeat(") ", 16) + "b") == "a b");
  CHECK(clean_wikitext("a " + repeat("( ", 17) + repeat(") ", 17) + "b") == "a ( ) b");

  // Both at once, and links inside rendered templates.
  CHECK(clean_wikitext(repeat("[[a|{{nowrap|", 30000) + repeat("}}]]", 30000)) == "a");
}

// Unclosed openers cost a scan from each to the page's end before: at 400 KB, 22 s for 80,000
// unclosed <ref> (the dump's XML "&lt;ref&gt;" is the wikitext "<ref>"), 22 s for unclosed "[[",
// over 150 s for unclosed "{{", 41 s for "[http://", over 150 s for nested "( )". Now each pass
// is linear: a page 4x as long must take less than 10x as long (16x if quadratic; caches make
// linear work on the larger page look up to 1.5x slower still). Thread CPU time, best of 5
// runs, the two sizes interleaved, so that a busy machine disturbs both alike; 5 ms of slack for
// times of a few ms.
TEST_CASE("unclosed markup repeated over a page costs time in proportion to the page") {
  struct Hostile {
    const char* name;
    std::function<std::string(size_t bytes)> page;
    std::string_view expected_start;  // of the cleaned 400 KB page
  };
  const Hostile pages[] = {
      {"unclosed {{", [](size_t n) { return fill("{{a ", n); }, "a a a"},
      {"unclosed [[", [](size_t n) { return fill("[[a ", n); }, "a a a"},
      {"unclosed <ref>", [](size_t n) { return "x" + fill("<ref>", n * 5 / 4); }, "x"},  // 100,000
      {"unclosed <math> and <ref>", [](size_t n) { return fill("<math>a<ref>b", n); }, "abab"},
      {"&lt;ref&gt; as text", [](size_t n) { return fill("&lt;ref&gt;", n); }, "<ref><ref>"},
      {"unclosed [http://", [](size_t n) { return fill("[http://x ", n); }, "[http://x [http"},
      {"& with no ;", [](size_t n) { return fill("AT&T ", n); }, "AT&T AT&T"},
      {"nested {{nowrap| unclosed", [](size_t n) { return fill("{{nowrap|", n); }, "nowrap|now"},
      {"nested [[a| unclosed", [](size_t n) { return fill("[[a|", n); }, "a|a|a|"},
      {"nested empty ( )", [](size_t n) { return fill("( ", n / 2) + fill(") ", n / 2); }, "( ( "},
      // The review's own pages: one unclosed opener before prose full of links.
      {"one unclosed {{", [](size_t n) { return "Intro {{" + fill(kProse, n); }, "Intro Some"},
      {"one unclosed [[", [](size_t n) { return "Intro [[" + fill(kProse, n); }, "Intro Some"},
  };
  constexpr size_t kBytes = 400 * 1000;
  for (const Hostile& hostile : pages) {
    const std::string name = hostile.name;
    CAPTURE(name);
    const std::string small = hostile.page(kBytes / 4), large = hostile.page(kBytes);
    const std::string cleaned = clean_wikitext(large);
    CHECK(cleaned.starts_with(hostile.expected_start));
    double t_small = 1e30, t_large = 1e30;
    for (int run = 0; run < 5; ++run) {
      t_small = std::min(t_small, seconds_to_clean(small));
      t_large = std::min(t_large, seconds_to_clean(large));
      if (t_large > 2.0) break;  // quadratic: no need to wait for four more runs
    }
    CAPTURE(t_small);
    CAPTURE(t_large);
    CHECK(t_large < 2.0);
    CHECK(t_large < 10 * t_small + 0.005);
  }
}

TEST_CASE("a dump page of 100,000 &lt;ref&gt; is read in linear time") {
  // The review's page as the dump stores it: the XML escapes decode to 100,000 unclosed <ref>,
  // 23 s before.
  TempDir dir;
  const std::string path = dir / "refs.xml";
  write_file(path, "<mediawiki><page><title>R</title><ns>0</ns><revision><text>Fact." +
                       repeat("&lt;ref&gt;", 100000) +
                       " More.</text></revision></page></mediawiki>");
  Collected sink;
  const double start = thread_seconds();
  sg::read_wikipedia_dump(path, sink, nullptr);
  CHECK(thread_seconds() - start < 2.0);
  CHECK(sink.text == "R\n\nFact. More.");
}

TEST_CASE("a large page of ordinary markup cleans as its parts do") {
  // The realistic paragraph of test_wikitext.cpp, 2,000 times (about 1 MB): the passes that now
  // share their searches across the page give each copy the text it gives alone.
  const std::string part =
      "'''Anarchism''' is a [[political philosophy]] that advocates [[self-governance|"
      "self-governed]] societies.<ref>&quot;ANARCHISM&quot; [http://x.org Kropotkin]</ref>"
      "<ref name=\"iaf\">{{cite web|url=http://x}}</ref> {{nowrap|{{lang|fr|[[a|b]]}}}}\n\n"
      "== Etymology ==\n[[File:A.svg|thumb|The [[A]] symbol]]\nThe term ''anarchism'' "
      "&ndash; from [[Ancient Greek]] {{lang|grc|ἀναρχία}}.\n[[fr:Anarchisme]]\n\n";
  const std::string one = clean_wikitext(part);
  REQUIRE(!one.empty());
  const std::string all = clean_wikitext(repeat(part, 2000));
  CHECK(all == repeat(one + "\n\n", 1999) + one);
}
