// clean_wikitext: a sequence of linear passes, each removing one kind of markup. The order
// matters: comments and non-prose elements first (they may hold anything, including braces),
// then templates (they may hold tables and links), tables, links, external links, quotes, the
// remaining tags, entities (decoded late so "&lt;ref&gt;" stays text), and last the line rules.
#include "prepare/wikipedia_wikitext.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "prepare/wikipedia_entities.h"
#include "prepare/wikipedia_templates.h"

namespace sg {
namespace {

char lower_ascii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_alnum(char c) { return is_alpha(c) || (c >= '0' && c <= '9'); }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool starts_with_nocase(std::string_view text, size_t at, std::string_view prefix) {
  if (text.size() - at < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (lower_ascii(text[at + i]) != prefix[i]) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_blank(s.front()) || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (is_blank(s.back()) || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::string strip_comments(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find("<!--", i);
    if (open == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, open - i));
    const size_t close = text.find("-->", open + 4);
    if (close == std::string_view::npos) break;  // unclosed: hides the rest, as on the wiki
    i = close + 3;
  }
  return out;
}

// An HTML-like tag at text[at] == '<': "<name ...>", "</name>" or "<name .../>".
struct Tag {
  std::string name;  // lower-cased
  size_t end = 0;    // one past '>'
  bool closing = false, self_closing = false;
};

bool parse_tag(std::string_view text, size_t at, Tag* tag) {
  constexpr size_t kLongestTag = 2000;  // attributes of a real tag never come near this
  size_t i = at + 1;
  tag->closing = i < text.size() && text[i] == '/';
  if (tag->closing) ++i;
  if (i >= text.size() || !is_alpha(text[i])) return false;
  tag->name.clear();
  while (i < text.size() && is_alnum(text[i])) tag->name += lower_ascii(text[i++]);
  if (i < text.size() &&
      !(is_blank(text[i]) || text[i] == '\n' || text[i] == '/' || text[i] == '>'))
    return false;
  const size_t close = text.find_first_of("<>", i);
  if (close == std::string_view::npos || text[close] != '>' || close - at > kLongestTag)
    return false;
  tag->self_closing = text[close - 1] == '/';
  tag->end = close + 1;
  return true;
}

bool is_dropped_element(const std::string& name) {
  static const std::array<std::string_view, 19> kDropped = {
      "ref",      "references",   "math",     "chem",         "ce",
      "hiero",    "score",        "timeline", "gallery",      "imagemap",
      "graph",    "mapframe",     "maplink",  "templatedata", "templatestyles",
      "inputbox", "categorytree", "section",  "indicator"};
  return std::find(kDropped.begin(), kDropped.end(), name) != kDropped.end();
}

// A closing tag "</name>" (blanks allowed before '>'): where its "</" starts, and one past '>'.
struct ClosingTag {
  size_t start = std::string_view::npos, end = std::string_view::npos;  // npos: none
};

// The first "</name>" from `from`. Strict like MediaWiki's: "</ref name=x>" inside a reference
// does not close it.
ClosingTag find_closing_tag(std::string_view text, size_t from, const std::string& name) {
  for (size_t i = text.find("</", from); i != std::string_view::npos; i = text.find("</", i + 2)) {
    if (!starts_with_nocase(text, i + 2, name)) continue;
    size_t k = i + 2 + name.size();
    while (k < text.size() && (is_blank(text[k]) || text[k] == '\n')) ++k;
    if (k < text.size() && text[k] == '>') return {i, k + 1};
  }
  return {};
}

// find_closing_tag with the last answer for each element name kept: the searches go left to
// right, so an answer that starts at or after the next search's start is that search's answer
// too, and "none" stays "none". Without it a page of 100,000 unclosed <ref> was searched to its
// end 100,000 times; with it each name's searches cover the page once.
class ClosingTagFinder {
 public:
  explicit ClosingTagFinder(std::string_view text) : text_(text) {}

  size_t find(size_t from, const std::string& name) {
    auto known =
        std::find_if(known_.begin(), known_.end(), [&](const Known& k) { return k.name == name; });
    if (known == known_.end()) {
      known_.push_back({name, from, find_closing_tag(text_, from, name)});
      return known_.back().found.end;
    }
    const bool still_valid = known->from <= from && (known->found.end == std::string_view::npos ||
                                                     known->found.start >= from);
    if (!still_valid) {
      known->from = from;
      known->found = find_closing_tag(text_, from, name);
    }
    return known->found.end;
  }

 private:
  struct Known {
    std::string name;
    size_t from;  // where the search that found `found` started
    ClosingTag found;
  };
  std::string_view text_;
  std::vector<Known> known_;  // a handful of names: a vector beats a map
};

std::string strip_dropped_elements(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  ClosingTagFinder closing(text);
  Tag tag;
  size_t i = 0;
  while (i < text.size()) {
    const size_t lt = text.find('<', i);
    if (lt == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, lt - i));
    if (!parse_tag(text, lt, &tag) || !is_dropped_element(tag.name)) {
      out += '<';
      i = lt + 1;
      continue;
    }
    i = tag.end;
    if (tag.closing || tag.self_closing) continue;  // a stray </ref> or a <ref name=x />
    const size_t end = closing.find(tag.end, tag.name);
    if (end != std::string_view::npos) i = end;  // unclosed: only the opening tag goes
  }
  return out;
}

// Tables open with "{|" and close with "|}" at the start of a line (after indentation).
std::string strip_tables(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  int depth = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    const std::string_view line = text.substr(start, end - start);
    size_t k = 0;
    while (k < line.size() && (is_blank(line[k]) || line[k] == ':')) ++k;
    const std::string_view head = line.substr(k);
    if (head.starts_with("{|"))
      ++depth;
    else if (depth > 0 && head.starts_with("|}")) {
      --depth;
      if (depth == 0) out += '\n';  // the table stood between paragraphs
    } else if (depth == 0)
      out.append(line);
    start = end;
  }
  return out;
}

// Language codes of interlanguage links: "de", "zh-min-nan", "simple", "be-x-old".
bool is_language_prefix(std::string_view prefix) {
  if (prefix == "simple") return true;
  size_t i = 0;
  while (i < prefix.size() && prefix[i] >= 'a' && prefix[i] <= 'z') ++i;
  if (i < 2 || i > 3) return false;
  while (i < prefix.size()) {
    if (prefix[i] != '-') return false;
    const size_t part = ++i;
    while (i < prefix.size() && prefix[i] >= 'a' && prefix[i] <= 'z') ++i;
    if (i == part) return false;
  }
  return true;
}

// What a link shows: either text to write as it is, or a part of the page ([[a|shown]]'s
// "shown") that is cleaned in its turn, since it may hold links itself.
struct LinkShows {
  std::string text;
  std::string_view cleaned;  // when not empty, shown instead of `text`
};

// What [[inner]] shows in the text; nothing for the links that show none.
LinkShows link_text(std::string_view inner, const std::vector<std::string>& hidden) {
  inner = trim(inner);
  const bool colon_trick = !inner.empty() && inner.front() == ':';
  if (colon_trick) inner.remove_prefix(1);
  const size_t pipe = inner.find('|');
  std::string_view target = trim(inner.substr(0, pipe));
  const size_t colon = target.find(':');
  if (!colon_trick && colon != std::string_view::npos) {
    const std::string prefix = fold_namespace_name(trim(target.substr(0, colon)));
    if (prefix == "file" || prefix == "image" || prefix == "category" || is_language_prefix(prefix) ||
        std::find(hidden.begin(), hidden.end(), prefix) != hidden.end())
      return {};
  }
  if (pipe == std::string_view::npos) return {std::string(target), {}};
  const std::string_view shown = trim(inner.substr(pipe + 1));
  if (!shown.empty()) return {{}, shown};
  // The pipe trick: [[Help:Foo (bar)|]] shows "Foo".
  if (colon != std::string_view::npos) target = trim(target.substr(colon + 1));
  const size_t paren = target.find(" (");
  if (paren != std::string_view::npos && target.back() == ')') target = target.substr(0, paren);
  return {std::string(target), {}};
}

constexpr size_t kUnclosedLink = std::string_view::npos;

// The "[[" of `text` in order, each with the end (one past "]]") of its link or kUnclosedLink,
// found in one pass with a stack on the heap: "[[" and "]]" pair up like parentheses. This
// replaces a scan from every "[[" to its end, which made a page of unclosed "[[" quadratic.
struct LinkOpeners {
  std::vector<size_t> at, end;
};

LinkOpeners match_links(std::string_view text) {
  LinkOpeners links;
  std::vector<size_t> open;  // indices of the links not closed yet, innermost last
  // The next '[' and the next ']', each found by memchr from where the last search stopped.
  size_t next_open = text.find('['), next_close = text.find(']');
  for (size_t i = std::min(next_open, next_close);
       i != std::string_view::npos && i + 1 < text.size(); i = std::min(next_open, next_close)) {
    size_t after = i + 1;
    if (text[i] == '[' && text[i + 1] == '[') {
      open.push_back(links.at.size());
      links.at.push_back(i);
      links.end.push_back(kUnclosedLink);
      after = i + 2;
    } else if (text[i] == ']' && text[i + 1] == ']') {
      if (!open.empty()) {
        links.end[open.back()] = i + 2;
        open.pop_back();
      }
      after = i + 2;
    }
    if (next_open < after) next_open = text.find('[', after);
    if (next_close < after) next_close = text.find(']', after);
  }
  return links;
}

// [[target|shown]] -> shown, [[target]] -> target, and no text for hidden links. A link's shown
// text may hold links in turn ("[[a|see [[b]]]]"); they are cleaned with a stack on the heap of
// the parts still to write instead of recursion, so a page of 40,000 nested "[[a|" needs no
// deeper C++ stack than one link. Every part is a range of the page and the ranges are written
// left to right, so match_links's one pass serves them all.
std::string clean_links(std::string_view text, const std::vector<std::string>& hidden) {
  const LinkOpeners links = match_links(text);
  std::string out;
  out.reserve(text.size());
  struct Part {
    size_t pos, end;  // still to write: text[pos, end)
  };
  std::vector<Part> parts = {{0, text.size()}};
  size_t next = 0;  // the first of links.at not before the current position
  while (!parts.empty()) {
    Part& part = parts.back();
    while (next < links.at.size() && links.at[next] < part.pos) ++next;
    if (next == links.at.size() || links.at[next] + 2 > part.end) {
      out.append(text.substr(part.pos, part.end - part.pos));
      parts.pop_back();
      continue;
    }
    const size_t open = links.at[next], end = links.end[next];
    out.append(text.substr(part.pos, open - part.pos));
    if (end == kUnclosedLink || end > part.end) {
      part.pos = open + 2;  // unclosed: drop just the brackets
      continue;
    }
    part.pos = end;
    const LinkShows shows = link_text(text.substr(open + 2, end - open - 4), hidden);
    if (shows.cleaned.empty()) {
      out += shows.text;
    } else {
      const size_t from = static_cast<size_t>(shows.cleaned.data() - text.data());
      parts.push_back({from, from + shows.cleaned.size()});  // `part` is not used after this
    }
  }
  return out;
}

bool starts_with_url(std::string_view text, size_t at) {
  static const std::array<std::string_view, 14> kSchemes = {
      "http://", "https://", "ftp://",  "ftps://", "//",     "mailto:",   "news:",
      "irc://",  "ircs://",  "sftp://", "git://",  "svn://", "gopher://", "telnet://"};
  for (std::string_view scheme : kSchemes)
    if (starts_with_nocase(text, at, scheme)) return true;
  return false;
}

// [http://x label] -> label; [http://x] -> nothing; other brackets ("[sic]") stay.
std::string clean_external_links(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  // The first ']' or line break after the last '[' looked at, kept: the brackets come left to
  // right, so a line of unclosed "[http://" is searched once, not once per bracket.
  size_t close = text.find_first_of("]\n");
  while (i < text.size()) {
    const size_t open = text.find('[', i);
    if (open == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, open - i));
    if (close != std::string_view::npos && close < open) close = text.find_first_of("]\n", open);
    if (!starts_with_url(text, open + 1) || close == std::string_view::npos || text[close] != ']') {
      out += '[';
      i = open + 1;
      continue;
    }
    const std::string_view inside = text.substr(open + 1, close - open - 1);
    const size_t space = inside.find_first_of(" \t");
    if (space != std::string_view::npos) out.append(trim(inside.substr(space)));
    i = close + 1;
  }
  return out;
}

// '' italic, ''' bold, ''''' both; four quotes are an apostrophe then bold; longer runs keep
// their extra apostrophes.
std::string strip_quote_markup(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '\'') {
      out += text[i++];
      continue;
    }
    size_t run = 1;
    while (i + run < text.size() && text[i + run] == '\'') ++run;
    if (run == 1)
      out += '\'';
    else if (run == 4)
      out += '\'';
    else if (run > 5)
      out.append(run - 5, '\'');
    i += run;
  }
  return out;
}

bool is_block_tag(const std::string& name) {
  static const std::array<std::string_view, 13> kBlock = {
      "br", "p", "div", "li", "ul", "ol", "dl", "dd", "dt", "blockquote", "poem", "pre", "center"};
  return std::find(kBlock.begin(), kBlock.end(), name) != kBlock.end();
}

std::string strip_tags(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  Tag tag;
  size_t i = 0;
  while (i < text.size()) {
    const size_t lt = text.find('<', i);
    if (lt == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, lt - i));
    if (parse_tag(text, lt, &tag)) {
      if (is_block_tag(tag.name)) out += '\n';
      i = tag.end;
    } else {
      out += '<';
      i = lt + 1;
    }
  }
  return out;
}

// Behaviour switches such as __TOC__ and __NOTOC__.
std::string strip_behaviour_switches(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find("__", i);
    if (open == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    size_t k = open + 2;
    while (k < text.size() && text[k] >= 'A' && text[k] <= 'Z') ++k;
    const bool is_switch = k > open + 2 && text.substr(k, 2) == "__";
    out.append(text.substr(i, open - i));
    if (!is_switch) out.append("__");
    i = is_switch ? k + 2 : open + 2;
  }
  return out;
}

struct Line {
  std::string text;
  int heading_level = 0;  // 0 for body text
};

// Parentheses that removed templates or references left empty, on one line whose blanks are
// already collapsed: " ()" and " ( )" go with the space before them; "(; x" and "(, x" lose the
// separator, "x; )" too. "f()" (right after a word) is left alone.
void tidy_parentheses(std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '(') {
      if ((text[i] == ';' || text[i] == ',') && i + 1 < text.size()) {
        size_t j = i + 1;
        if (j < text.size() && text[j] == ' ') ++j;
        if (j < text.size() && text[j] == ')') {  // "x; )": the separator goes
          while (!out.empty() && out.back() == ' ') out.pop_back();
          i = j - 1;
          continue;
        }
      }
      out += text[i];
      continue;
    }
    size_t j = i + 1;
    if (j < text.size() && text[j] == ' ') ++j;
    const bool after_word = i > 0 && text[i - 1] != ' ';
    if (j < text.size() && text[j] == ')' && !after_word) {  // " ()" or " ( )"
      while (!out.empty() && out.back() == ' ') out.pop_back();
      const bool gap = !out.empty() && j + 1 < text.size() && text[j + 1] != ' ' &&
                       std::string_view(".,;:!?").find(text[j + 1]) == std::string_view::npos;
      if (gap) out += ' ';
      i = j;
      continue;
    }
    out += '(';
    if (j < text.size() && (text[j] == ';' || text[j] == ',')) {  // "(; x" -> "(x"
      size_t k = j + 1;
      if (k < text.size() && text[k] == ' ') ++k;
      i = k - 1;
    }
  }
  text = std::move(out);
}

Line clean_line(std::string_view line) {
  line = trim(line);
  Line result;
  if (line.size() >= 2 && line.front() == '=' && line.back() == '=') {
    const size_t leading = line.find_first_not_of('=');
    if (leading == std::string_view::npos) return result;  // "====": nothing to show
    const size_t trailing = line.size() - 1 - line.find_last_not_of('=');
    const size_t level = std::min({leading, trailing, size_t{6}});
    result.heading_level = static_cast<int>(level);
    line = trim(line.substr(level, line.size() - 2 * level));
  } else if (line.find_first_not_of('-') == std::string_view::npos && line.size() >= 4) {
    return result;  // "----": a horizontal rule
  } else {
    const size_t text_start = line.find_first_not_of("*#:; \t");
    line = text_start == std::string_view::npos ? std::string_view() : line.substr(text_start);
  }
  for (char c : line) {  // collapse blanks: removed markup leaves doubled spaces behind
    const char d = c == '\t' ? ' ' : c;
    if (d == ' ' && (result.text.empty() || result.text.back() == ' ')) continue;
    result.text += d;
  }
  while (!result.text.empty() && result.text.back() == ' ') result.text.pop_back();
  // "(, )" -> "()" -> "": each pass empties one more level of parentheses. Real text needs two
  // or three passes; the cap keeps a line of 100,000 nested "( ( ( ) ) )" linear (the pairs
  // around its 16 innermost levels stay).
  constexpr size_t kMaxParenthesisPasses = 16;
  for (size_t before = 0, pass = 0; before != result.text.size() && pass < kMaxParenthesisPasses;
       ++pass) {
    before = result.text.size();
    tidy_parentheses(result.text);
  }
  if (result.text.empty()) result.heading_level = 0;
  return result;
}

// Joins cleaned lines: one blank line at most between paragraphs, none at the ends, one before
// each heading and none after it, and no heading whose section (up to the next heading of the
// same or a higher level) has no text.
std::string join_lines(std::string_view text) {
  std::vector<Line> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(clean_line(text.substr(start, end - start)));
    start = end + 1;
  }
  std::string out;
  out.reserve(text.size());
  bool pending_blank = false, after_heading = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& line = lines[i];
    if (line.text.empty()) {
      pending_blank = true;
      continue;
    }
    if (line.heading_level > 0) {
      bool has_text = false;
      for (size_t k = i + 1; k < lines.size() && !has_text; ++k) {
        if (lines[k].heading_level > 0 && lines[k].heading_level <= line.heading_level) break;
        has_text = lines[k].heading_level == 0 && !lines[k].text.empty();
      }
      if (!has_text) continue;
    }
    // Headings open a paragraph and hold on to their first line, whatever markup stood between.
    const bool blank = line.heading_level > 0 || (pending_blank && !after_heading);
    if (!out.empty()) out += blank ? "\n\n" : "\n";
    out += line.text;
    pending_blank = false;
    after_heading = line.heading_level > 0;
  }
  return out;
}

}  // namespace

std::string fold_namespace_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x80) {
      out += c == '_' ? ' ' : lower_ascii(name[i]);
      continue;
    }
    // Two-byte UTF-8 capitals: Latin-1 U+00C0-U+00DE (not U+00D7), Greek U+0391-U+03AB,
    // Cyrillic U+0400-U+042F.
    if (i + 1 < name.size() && (c & 0xE0) == 0xC0) {
      unsigned cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(name[i + 1]) & 0x3Fu);
      if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) || (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) ||
          (cp >= 0x410 && cp <= 0x42F)) {
        cp += 0x20;
      } else if (cp >= 0x400 && cp <= 0x40F) {
        cp += 0x50;
      }
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
      ++i;
      continue;
    }
    out += name[i];
  }
  return out;
}

std::string clean_wikitext(std::string_view wikitext,
                           const std::vector<std::string>& hidden_link_prefixes) {
  std::string text = strip_comments(wikitext);
  text = strip_dropped_elements(text);
  text = expand_templates(text);
  text = strip_tables(text);
  text = clean_links(text, hidden_link_prefixes);
  text = clean_external_links(text);
  text = strip_quote_markup(text);
  text = strip_tags(text);
  text = strip_behaviour_switches(text);
  text = decode_html_entities(text);
  return join_lines(text);
}

}  // namespace sg
