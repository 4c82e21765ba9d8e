// read_wikipedia_dump: expat SAX callbacks collect each <page>'s title, namespace, redirect flag
// and text; a finished page is classified and, if an article, cleaned and handed to the sink.
#include "prepare/wikipedia_source.h"

#include <expat.h>
#include <fmt/format.h>

#include <charconv>
#include <exception>
#include <memory>
#include <string_view>
#include <vector>

#include "prepare/wikipedia_dump_stream.h"
#include "util/error.h"

namespace sg {
namespace {

constexpr size_t kXmlChunkBytes = 1 << 20;

bool starts_with_redirect(std::string_view text) {
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos || text.size() - start < 9) return false;
  constexpr std::string_view kKeyword = "#redirect";
  for (size_t i = 0; i < kKeyword.size(); ++i) {
    const char c = text[start + i];
    if ((c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) != kKeyword[i]) return false;
  }
  return true;
}

// Namespace number of a page; a page without <ns> (export schemas before 0.6) is taken as an
// article, one with an unreadable <ns> as not.
int namespace_of(std::string_view ns_text, bool has_ns) {
  if (!has_ns) return 0;
  const size_t start = ns_text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return -1;
  int ns = -1;
  const char* first = ns_text.data() + start;
  const auto result = std::from_chars(first, ns_text.data() + ns_text.size(), ns);
  if (result.ec != std::errc()) return -1;
  return ns;
}

class PageCollector {
 public:
  PageCollector(DocumentSink& sink, WikipediaStats& stats) : sink_(sink), stats_(stats) {}

  void start_element(std::string_view name, const XML_Char** attributes) {
    ++depth_;
    if (page_depth_ == 0) {
      if (name == "page") begin_page();
      // <siteinfo><namespaces><namespace key="14">Категория</namespace>: the dump's own names
      // of the namespaces whose links show no text (6 File, 14 Category).
      if (name == "namespace") {
        for (const XML_Char** a = attributes; a != nullptr && *a != nullptr; a += 2) {
          const std::string_view key = a[0], value = a[1];
          if (key == "key" && (value == "6" || value == "14")) capture(&namespace_name_);
        }
      }
      return;
    }
    if (depth_ == page_depth_ + 1) {
      if (name == "title")
        capture(&title_);
      else if (name == "ns")
        has_ns_ = true, capture(&ns_);
      else if (name == "redirect")
        is_redirect_ = true;
      else if (name == "revision")
        in_revision_ = true;
    } else if (depth_ == page_depth_ + 2 && in_revision_ && name == "text") {
      text_.clear();  // several revisions: the last one counts
      capture(&text_);
    }
  }

  void end_element(std::string_view name) {
    if (page_depth_ == 0 && name == "namespace" && capturing_ == &namespace_name_) {
      const std::string folded = fold_namespace_name(namespace_name_);
      if (!folded.empty()) hidden_link_prefixes_.push_back(folded);
    }
    if (depth_ == page_depth_ && name == "page") {
      finish_page();
      page_depth_ = 0;
    } else if (depth_ == page_depth_ + 1 && name == "revision") {
      in_revision_ = false;
    }
    capturing_ = nullptr;  // title, ns and text hold no child elements
    --depth_;
  }

  void character_data(const char* data, int length) {
    if (capturing_ != nullptr) capturing_->append(data, static_cast<size_t>(length));
  }

 private:
  void capture(std::string* field) {
    field->clear();
    capturing_ = field;
  }

  void begin_page() {
    page_depth_ = depth_;
    title_.clear();
    ns_.clear();
    text_.clear();
    has_ns_ = is_redirect_ = in_revision_ = false;
  }

  void finish_page() {
    ++stats_.pages;
    if (namespace_of(ns_, has_ns_) != 0) {
      ++stats_.other_namespaces;
      return;
    }
    if (is_redirect_ || starts_with_redirect(text_)) {
      ++stats_.redirects;
      return;
    }
    ++stats_.articles;
    std::string body = clean_wikitext(text_, hidden_link_prefixes_);
    if (body.empty()) {
      ++stats_.empty_articles;
      return;
    }
    std::string document;
    document.reserve(title_.size() + 2 + body.size());
    document.append(title_).append("\n\n").append(body);
    stats_.text_bytes += static_cast<int64_t>(document.size());
    sink_.add(std::move(document), title_);
  }

  DocumentSink& sink_;
  WikipediaStats& stats_;
  int depth_ = 0, page_depth_ = 0;  // page_depth_ == 0: outside any <page>
  std::string title_, ns_, text_, namespace_name_;
  std::vector<std::string> hidden_link_prefixes_;  // from <siteinfo>
  std::string* capturing_ = nullptr;
  bool has_ns_ = false, is_redirect_ = false, in_revision_ = false;
};

// Expat is C: an exception must not unwind through it, so the callbacks park it here, stop the
// parser, and the caller rethrows it once XML_Parse has returned.
struct ParseContext {
  XML_Parser parser;
  PageCollector* collector;
  std::exception_ptr failure;
};

template <typename F>
void guarded(void* user_data, F&& f) {
  auto* context = static_cast<ParseContext*>(user_data);
  if (context->failure) return;
  try {
    f(*context->collector);
  } catch (...) {
    context->failure = std::current_exception();
    XML_StopParser(context->parser, XML_FALSE);
  }
}

void XMLCALL on_start(void* user_data, const XML_Char* name, const XML_Char** attributes) {
  guarded(user_data, [&](PageCollector& c) { c.start_element(name, attributes); });
}
void XMLCALL on_end(void* user_data, const XML_Char* name) {
  guarded(user_data, [&](PageCollector& c) { c.end_element(name); });
}
void XMLCALL on_text(void* user_data, const XML_Char* data, int length) {
  guarded(user_data, [&](PageCollector& c) { c.character_data(data, length); });
}

}  // namespace

void read_wikipedia_dump(const std::string& path, DocumentSink& sink, WikipediaStats* stats,
                         const std::function<void(const WikipediaStats&)>& progress) {
  WikipediaStats local_stats;
  WikipediaStats& s = stats != nullptr ? *stats : local_stats;
  s = WikipediaStats{};
  WikipediaDumpStream input(path);
  PageCollector collector(sink, s);
  std::unique_ptr<XML_ParserStruct, void (*)(XML_Parser)> parser(XML_ParserCreate(nullptr),
                                                                 &XML_ParserFree);
  if (!parser)
    throw RunError(fmt::format("{}: cannot create an XML parser (out of memory?)", path));
  ParseContext context{parser.get(), &collector, nullptr};
  XML_SetUserData(parser.get(), &context);
  XML_SetElementHandler(parser.get(), on_start, on_end);
  XML_SetCharacterDataHandler(parser.get(), on_text);

  auto update_counts = [&] {
    s.bytes_in = input.bytes_in();
    s.xml_bytes = input.bytes_out();
  };
  for (;;) {
    void* buffer = XML_GetBuffer(parser.get(), static_cast<int>(kXmlChunkBytes));
    if (buffer == nullptr) throw RunError(fmt::format("{}: out of memory while parsing XML", path));
    size_t n = 0;
    try {
      n = input.read(static_cast<char*>(buffer), kXmlChunkBytes);
    } catch (const RunError&) {
      update_counts();
      s.errors = 1;
      throw;
    }
    const bool last = n == 0;
    const XML_Status status = XML_ParseBuffer(parser.get(), static_cast<int>(n), last);
    update_counts();
    if (context.failure) std::rethrow_exception(context.failure);
    if (status != XML_STATUS_OK) {
      s.errors = 1;
      throw RunError(fmt::format(
          "{}: broken XML at byte {} of the {}dump (line {}): {}; the dump is damaged, download "
          "it again",
          path, static_cast<int64_t>(XML_GetCurrentByteIndex(parser.get())),
          input.compressed() ? "decompressed " : "",
          static_cast<uint64_t>(XML_GetCurrentLineNumber(parser.get())),
          XML_ErrorString(XML_GetErrorCode(parser.get()))));
    }
    if (progress && !last) progress(s);
    if (last) break;
  }
  if (s.pages == 0) {
    s.errors = 1;
    throw RunError(fmt::format(
        "{}: well-formed XML but no <page> in it: pass a MediaWiki pages-articles dump", path));
  }
  if (progress) progress(s);
}

}  // namespace sg
