// Template removal by brace matching, with the few inline templates we render.
#include "prepare/wikipedia_templates.h"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace sg {
namespace {

constexpr size_t kUnclosed = std::string_view::npos;

// A template ("{{", size 2) or parameter ("{{{", size 3) opener.
struct Opener {
  size_t at = 0;           // its first brace
  size_t end = kUnclosed;  // one past the braces that close it, or kUnclosed
  size_t size = 2;
};

// Pairs every opener of `text` with its closing braces, in one pass with a stack on the heap.
// A run of opening braces splits as MediaWiki's preprocessor splits it ("{{{{{" = "{{" + "{{{");
// a closing run closes the innermost open ones ("}}" closing a "{{{" closes it anyway, a "}}}"
// closing a "{{" leaves one brace as text); openers never closed keep kUnclosed. The openers
// come out in text order. This one pass replaces a scan from every "{{" to its end, which made
// a page of unclosed "{{" quadratic; the two agree except where an unclosed "{{{" heads a run
// of six or more braces (the scans re-split the rest of the run, the pass keeps its split).
std::vector<Opener> match_braces(std::string_view text) {
  std::vector<Opener> openers;
  std::vector<size_t> open;  // indices into openers, innermost last
  // The next '{' and the next '}', each found by memchr from where the last search stopped
  // (find_first_of("{}") would call memchr for every byte).
  size_t next_open = text.find('{'), next_close = text.find('}');
  for (size_t i = std::min(next_open, next_close); i != std::string_view::npos;
       i = std::min(next_open, next_close)) {
    const char c = text[i];
    size_t run = 1;
    while (i + run < text.size() && text[i + run] == c) ++run;
    if (c == '{') {
      for (size_t count = run, at = i; count >= 2;) {
        const size_t size = count % 3 == 0 ? 3 : 2;
        open.push_back(openers.size());
        openers.push_back({at, kUnclosed, size});
        at += size;
        count -= size;
      }
    } else {
      size_t left = run;
      while (left >= 2 && !open.empty()) {
        Opener& top = openers[open.back()];
        open.pop_back();
        left -= std::min(left, top.size);
        top.end = i + (run - left);
      }
    }
    if (next_open < i + run) next_open = text.find('{', i + run);
    if (next_close < i + run) next_close = text.find('}', i + run);
  }
  return openers;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// The name and positional arguments of a template's inside ("name|a|key=v|b" -> name, {a, b}),
// split at the '|' that are not inside nested templates or links.
struct Invocation {
  std::string name;  // lower-cased, '_' read as ' '
  std::vector<std::string_view> positional;
};

Invocation parse_invocation(std::string_view inner) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < inner.size(); ++i) {
    const char c = inner[i];
    if ((c == '{' || c == '[') && i + 1 < inner.size() && inner[i + 1] == c)
      ++depth, ++i;
    else if ((c == '}' || c == ']') && i + 1 < inner.size() && inner[i + 1] == c)
      --depth, ++i;
    else if (c == '|' && depth == 0) {
      parts.push_back(inner.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(inner.substr(start));
  Invocation call;
  for (char c : trim(parts[0]))
    call.name += c == '_' ? ' ' : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  for (size_t k = 1; k < parts.size(); ++k) {
    const size_t equals = parts[k].find('=');
    const bool named = equals != std::string_view::npos &&
                       parts[k].substr(0, equals).find_first_of("{[<") == std::string_view::npos;
    if (!named) call.positional.push_back(trim(parts[k]));
  }
  return call;
}

bool is_one_of(const std::string& name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The wikitext an inline template stands for, or "" for every other template.
std::string render(const Invocation& call) {
  const auto& p = call.positional;
  auto arg = [&](size_t k) { return k < p.size() ? std::string(p[k]) : std::string(); };
  if (is_one_of(call.name,
                {"nowrap", "nobr", "nobreak", "small", "smaller", "big", "large", "larger"}))
    return arg(0);
  if (call.name == "lang") return arg(1);
  if (call.name.starts_with("lang-")) return arg(0);
  if (call.name == "transl" || call.name == "transliteration")
    return p.empty() ? "" : arg(p.size() - 1);
  if (call.name == "ndash") return "\u2013";
  if (call.name == "mdash") return "\u2014";
  if (call.name == "convert" || call.name == "cvt") {
    if (p.size() >= 4 && is_one_of(arg(1), {"to", "-", "and", "or", "by", "x", "+/-", "to(-)"}))
      return arg(0) + " " + arg(1) + " " + arg(2) + " " + arg(3);
    if (p.size() >= 2) return arg(0) + " " + arg(1);
    return arg(0);
  }
  return "";
}

// Rendered inline templates are expanded again ({{nowrap|{{lang|fr|x}}}} -> x), each level a
// pass over its own text. A template nested deeper than kMaxDepth is dropped with its words:
// that bounds the work on a page of 60,000 nested {{nowrap|...}} to kMaxDepth passes over it,
// and the C++ stack to kMaxDepth frames. MediaWiki itself stops expanding at 40 to 100 levels
// ($wgMaxPPExpandDepth); articles nest inline templates a handful deep.
constexpr int kMaxDepth = 40;

// `text` with its templates removed or rendered; `depth` is the nesting level of its templates.
std::string expand(std::string_view text, int depth) {
  const std::vector<Opener> openers = match_braces(text);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  for (const Opener& opener : openers) {
    if (opener.at < i) continue;  // inside a template already removed
    out.append(text.substr(i, opener.at - i));
    if (opener.end == kUnclosed) {
      i = opener.at + 2;  // unclosed: drop just two braces (a "{{{" keeps its third)
      continue;
    }
    i = opener.end;
    const bool is_template = opener.size == 2 && text[opener.at + 2] != '{';  // not {{{param}}}
    const std::string shown =
        is_template && depth <= kMaxDepth
            ? expand(render(parse_invocation(text.substr(opener.at + 2, i - opener.at - 4))),
                     depth + 1)
            : std::string();
    out += shown;
    if (shown.empty() && i < text.size() &&
        std::string_view(".,;:!?)").find(text[i]) != std::string_view::npos)
      while (!out.empty() && out.back() == ' ') out.pop_back();
  }
  out.append(text.substr(std::min(i, text.size())));
  return out;
}

}  // namespace

std::string expand_templates(std::string_view text) { return expand(text, 1); }

}  // namespace sg
