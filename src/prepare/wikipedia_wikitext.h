#pragma once
// Wikitext (MediaWiki markup) to plain text for language-model training.
#include <string>
#include <string_view>
#include <vector>

namespace sg {

// Returns the readable prose of one article's wikitext. What goes and what stays:
//   dropped, contents and all: templates {{...}} (nested, with {{{params}}}), tables {| ... |}
//     (nested), HTML comments, <ref>...</ref> and <ref .../>, <references>, and the elements
//     whose contents are not prose (<math>, <chem>, <gallery>, <timeline>, <imagemap>, <score>,
//     <graph>, <hiero>, <mapframe>, <templatedata>, ...); [[File:]] / [[Image:]] with their
//     captions, [[Category:]], interlanguage links ([[de:...]]), behaviour switches (__TOC__);
//   kept as their text: [[target|text]] -> text, [[target]] -> target, the pipe trick
//     [[Foo (bar)|]] -> Foo, [[:Category:X]] -> Category:X; [http://x text] -> text (a bare
//     [http://x] goes); ''italic'' and '''bold''' lose their quotes; other HTML tags go and keep
//     their text (<br> and block tags become line breaks); <nowiki> is treated like any tag;
//   lines: "== Heading ==" becomes the line "Heading", and a heading whose section ends up empty
//     (e.g. "References" once its {{reflist}} is gone) is dropped; list and indent markers
//     (* # : ;) at line starts go; "----" rules go; spaces are collapsed and lines trimmed; runs
//     of blank lines become one; no blank lines at either end;
//   HTML character references are decoded last (see wikipedia_entities.h).
// Unbalanced markup never swallows the rest of the article: an unclosed "{{" or "[[" loses only
// its brackets; an unclosed comment or table runs to the end, as MediaWiki renders it.
//   parentheses a removal left empty go: "born ({{birth date|...}}) in" -> "born in", and
//   "({{lang|..}}; born 1950)" -> "(born 1950)" (an empty "()" right after a word, as in "f()",
//   stays).
// Hostile markup costs time in proportion to the page and no stack: links nested to any depth
// are unwound with a stack on the heap, inline templates render down to 40 levels
// (wikipedia_templates.h), and parentheses left empty are tidied 16 levels deep (any outer
// pairs stay).
// hidden_link_prefixes: namespace names whose links show nothing, folded by fold_namespace_name:
// the dump's local names of the File and Category namespaces (from its <siteinfo>), besides the
// canonical "file", "image" and "category" that every wiki accepts.
std::string clean_wikitext(std::string_view wikitext,
                           const std::vector<std::string>& hidden_link_prefixes = {});

// A namespace name as links may spell it: MediaWiki matches namespace names without regard to
// case, so ASCII, Latin-1, Greek and Cyrillic capitals are lowered, and '_' is a space.
std::string fold_namespace_name(std::string_view name);

}  // namespace sg
