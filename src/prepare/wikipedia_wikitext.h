#pragma once
// Wikitext (MediaWiki markup) to plain text for language-model training.
#include <string>
#include <string_view>

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
std::string clean_wikitext(std::string_view wikitext);

}  // namespace sg
