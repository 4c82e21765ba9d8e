#pragma once
// Templates ({{...}}) in wikitext. Expanding them for real needs the wiki's template pages, which
// a pages-articles dump of namespace 0 does not give us; so they are dropped, except a handful
// of inline ones whose words belong to the sentence around them.
#include <string>
#include <string_view>

namespace sg {

// Removes every template and template parameter ({{{1}}}), nested to any depth, and renders
//   {{lang|fr|texte}} -> texte, {{lang-ar|text}} -> text,
//   {{transl|ar|text}} -> text, {{nowrap|text}} (also nobr, nobreak,
//   small, smaller, big, large, larger) -> text, {{convert|5|km|mi}} -> 5 km,
//   {{convert|5|to|10|km}} -> 5 to 10 km (also cvt), {{ndash}} -> –, {{mdash}} -> —.
// A space left before punctuation by a removed template goes ("Greek {{lang|..}}." keeps its
// text; "identity {{sfn|x}}." becomes "identity."). An unclosed "{{" loses only its braces.
// Other markup (links, tags) passes through untouched for the later cleaning passes.
// Inline templates inside rendered ones render in turn down to 40 levels ({{nowrap|{{lang|..}}}});
// deeper ones are dropped with their words, so that however deep a page nests them, it costs
// about 40 passes over it and 40 stack frames at most (MediaWiki stops at 40-100 levels too).
// Each pass is linear in the text's length, unclosed braces included.
std::string expand_templates(std::string_view text);

}  // namespace sg
