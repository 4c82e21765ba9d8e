#pragma once
// HTML character references in wikitext (&amp; &nbsp; &mdash; &#233; &#x1F600; ...) decoded to
// UTF-8. The XML layer has already decoded one level (the dump stores "&amp;nbsp;" for the
// wikitext "&nbsp;"), so this is the second, wiki-level decoding, applied once.
#include <string>
#include <string_view>

namespace sg {

// Decodes named references from HTML's common set (Latin-1, Greek, punctuation, arrows, maths)
// and every numeric one. Unknown names and malformed references stay as they are, as MediaWiki
// shows them. Invalid code points (0, surrogates, > U+10FFFF) become U+FFFD.
// Space-like references (&nbsp; &ensp; &emsp; &thinsp; &#160;) become a plain space and soft
// hyphens / zero-width joiners vanish: this text feeds a tokenizer, for which a no-break space
// is an odd two-byte token and the layout hints mean nothing.
std::string decode_html_entities(std::string_view text);

// Appends the UTF-8 encoding of a code point (U+FFFD for invalid ones).
void append_utf8(std::string& out, char32_t code_point);

}  // namespace sg
