// libFuzzer target: the wikitext cleaner (src/prepare/wikipedia_wikitext.cpp clean_wikitext,
// docs/faults.md "Fuzzing"). Input: one article's wikitext.
// Contract (src/prepare/wikipedia_wikitext.h): any text, however unbalanced its markup, cleans
// without crashing, in time about linear in its size (libFuzzer's -timeout catches quadratic
// cases); the output stays within a small multiple of the input's size (a sanity bound, not a
// documented limit: markup only ever shrinks, save a few templates and entities).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_files.h"
#include "prepare/wikipedia_wikitext.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> hidden = {sg::fold_namespace_name("Datei"),
                                                  sg::fold_namespace_name("Kategorie")};
  const std::string_view text = sg::fuzz::as_text(data, size);
  const std::string clean = sg::clean_wikitext(text, hidden);
  (void)sg::fold_namespace_name(text.substr(0, 64));
  sg::fuzz::note(std::to_string(size) + " bytes cleaned to " + std::to_string(clean.size()));
  if (clean.size() > 4 * size + 16)
    sg::fuzz::contract_broken("cleaning " + std::to_string(size) + " bytes gave " +
                              std::to_string(clean.size()));
  return 0;
}
