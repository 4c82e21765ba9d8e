// Template removal by brace matching, with the few inline templates we render.
#include "prepare/wikipedia_templates.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

namespace sg {
namespace {

// Splits a run of `count` opening braces into template ("{{", 2) and parameter ("{{{", 3)
// openers, as MediaWiki's preprocessor pairs "{{{{{" = "{{" + "{{{".
void push_brace_openers(std::vector<int>& stack, size_t count) {
  while (count >= 2) {
    const int size = count % 3 == 0 ? 3 : 2;
    stack.push_back(size);
    count -= size;
  }
}

// The end (one past the last brace) of the template or parameter opened by the run of braces
// at `at`, or npos when it is never closed.
size_t find_template_end(std::string_view text, size_t at) {
  std::vector<int> stack;
  size_t i = at;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '{' && c != '}') {
      i = text.find_first_of("{}", i);
      if (i == std::string_view::npos) break;
      continue;
    }
    size_t run = 1;
    while (i + run < text.size() && text[i + run] == c) ++run;
    if (c == '{') {
      push_brace_openers(stack, run);
      i += run;
      continue;
    }
    size_t left = run;
    while (left >= 2 && !stack.empty()) {
      const size_t top = static_cast<size_t>(stack.back());
      stack.pop_back();
      left -= std::min(left, top);  // "}}" closing a "{{{" closes it anyway
    }
    if (stack.empty()) return i + (run - left);
    i += run;
  }
  return std::string_view::npos;
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

}  // namespace

std::string expand_templates(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find("{{", i);
    if (open == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, open - i));
    const size_t end = find_template_end(text, open);
    if (end == std::string_view::npos) {
      i = open + 2;  // unclosed: drop just the braces
      continue;
    }
    i = end;
    const bool is_template = end - open >= 4 && text[open + 2] != '{';  // not a {{{parameter}}}
    const std::string shown =
        is_template
            ? expand_templates(render(parse_invocation(text.substr(open + 2, end - open - 4))))
            : std::string();
    out += shown;
    if (shown.empty() && i < text.size() &&
        std::string_view(".,;:!?)").find(text[i]) != std::string_view::npos)
      while (!out.empty() && out.back() == ' ') out.pop_back();
  }
  return out;
}

}  // namespace sg
