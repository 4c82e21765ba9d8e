#pragma once
// `prepare wikipedia`'s reader: a MediaWiki pages-articles XML dump in, one plain-text document
// per article out.
#include <cstdint>
#include <functional>
#include <string>

#include "prepare/document_sink.h"
#include "prepare/wikipedia_wikitext.h"  // clean_wikitext

namespace sg {

struct WikipediaStats {
  // pages = articles + redirects + other_namespaces once a dump is read to its end.
  int64_t pages = 0;
  int64_t articles = 0;          // namespace 0, not a redirect
  int64_t redirects = 0;         // namespace 0 redirects (skipped)
  int64_t other_namespaces = 0;  // Wikipedia:, Template:, ... pages, redirects or not (skipped)
  int64_t empty_articles = 0;    // articles whose text cleans to nothing (counted, not passed on)
  int64_t bytes_in = 0;          // read from the file (compressed, for a .bz2)
  int64_t xml_bytes = 0;         // uncompressed XML parsed
  int64_t text_bytes = 0;        // cleaned text passed to the sink
  int errors = 0;                // 1 when the dump turned out malformed (see below)
};

// Streams a pages-articles dump (.xml.bz2, single- or multi-stream, or plain .xml; told apart by
// their first bytes) through expat in 1 MiB chunks; keeps namespace 0, skips redirects (a
// <redirect> element or text starting "#REDIRECT"); cleans each article's wikitext with
// clean_wikitext and calls sink.add(title + "\n\n" + text, title). The title leads the document
// because the prose alone often never names its subject ("It is a ..."), and it is the line
// a reader of the emitted text looks for. Of a page with several revisions, the last counts.
//
// A malformed dump (truncated or corrupt bzip2, broken XML, or an XML file with no <page>)
// throws RunError naming the file and byte offset, after the sink has received every article
// that was complete before the damage and *stats counts them (with errors = 1), so a caller may
// keep what was read. An exception from the sink propagates unchanged.
//
// `progress`, if given, is called about once per MiB of XML and once at the end.
void read_wikipedia_dump(const std::string& path, DocumentSink& sink, WikipediaStats* stats,
                         const std::function<void(const WikipediaStats&)>& progress = {});

}  // namespace sg
