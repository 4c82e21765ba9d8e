// The driver of scripts/bench/wikitext-clean: times clean_wikitext on one page.
//   wikitext_clean_bench CASE KB [REPS]     a made-up page of about KB kilobytes
//   wikitext_clean_bench file:PATH 0 [REPS]  the wikitext in PATH as one page
// Prints "CASE BYTES SECONDS": the page's size and the best of REPS (default 3) cleanings, in
// CPU seconds of the thread. The cases are the hostile pages of tests/wikipedia/
// test_wikitext_hostile.cpp and an ordinary one.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "prepare/wikipedia_wikitext.h"

namespace {

std::string repeat(std::string_view piece, size_t times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

std::string fill(std::string_view piece, size_t bytes) {
  return repeat(piece, std::max<size_t>(1, bytes / piece.size()));
}

constexpr std::string_view kOrdinary =
    "'''Anarchism''' is a [[political philosophy]] and [[Political movement|movement]] that is "
    "against all forms of [[authority]].<ref name=\"McLaughlin\">{{cite book |last=McLaughlin "
    "|first=Paul |title=Anarchism and Authority |year=2007 |isbn=978-0-7546-6196-2}}</ref> "
    "It was born ({{circa|1840}}) in [[France]] &ndash; see {{lang|fr|anarchisme}}, "
    "{{convert|5|km|mi}} away.<ref>[http://example.org A source], p. 3.</ref>\n\n"
    "== History ==\n{{Main|History of anarchism}}\n[[File:Map.png|thumb|A map of [[Paris]]]]\n"
    "The ''term'' appears in '''1642'''.<!-- a comment -->\n"
    "{| class=\"wikitable\"\n|-\n! Year !! Event\n|-\n| 1840 || [[Proudhon]]\n|}\n"
    "* a point with <math>x^2</math>\n* another<br />line\n\n";

std::string make_page(const std::string& name, size_t bytes) {
  if (name == "ordinary") return fill(kOrdinary, bytes);
  if (name == "unclosed-braces") return fill("{{a ", bytes);
  if (name == "unclosed-links") return fill("[[a ", bytes);
  if (name == "unclosed-refs") return fill("<ref>", bytes);
  if (name == "unclosed-extlinks") return fill("[http://x ", bytes);
  if (name == "ampersands") return fill("AT&T ", bytes);
  if (name == "nested-links") return repeat("[[a|", bytes / 6) + repeat("]]", bytes / 6);
  if (name == "nested-nowrap") return repeat("{{nowrap|", bytes / 11) + repeat("}}", bytes / 11);
  if (name == "nested-parens") return fill("( ", bytes / 2) + fill(") ", bytes / 2);
  if (name.starts_with("file:")) {
    std::ifstream in(name.substr(5), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      std::fprintf(stderr, "wikitext_clean_bench: cannot read %s; pass a wikitext file\n",
                   name.c_str() + 5);
      std::exit(2);
    }
    return text.str();
  }
  std::fprintf(stderr,
               "wikitext_clean_bench: unknown case '%s'; see scripts/bench/wikitext-clean\n",
               name.c_str());
  std::exit(2);
}

double thread_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: wikitext_clean_bench CASE KB [REPS]; see scripts/bench/wikitext-clean\n");
    return 2;
  }
  const std::string page = make_page(argv[1], std::strtoul(argv[2], nullptr, 10) * 1000);
  const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double start = thread_seconds();
    const std::string cleaned = sg::clean_wikitext(page);
    best = std::min(best, thread_seconds() - start);
  }
  std::printf("%s %zu %.6f\n", argv[1], page.size(), best);
  return 0;
}
