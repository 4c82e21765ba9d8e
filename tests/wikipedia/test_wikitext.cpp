// clean_wikitext, rule by rule, on small handcrafted snippets; and the entity decoder.
#include <doctest/doctest.h>

#include <string>

#include "prepare/wikipedia_entities.h"
#include "prepare/wikipedia_wikitext.h"

using sg::clean_wikitext;

TEST_CASE("templates go, nested ones and parameters too") {
  CHECK(clean_wikitext("a {{cite web|url=x|title={{lang|fr|t}}}} b") == "a b");
  CHECK(clean_wikitext("{{Infobox|name={{{name|{{PAGENAME}}}}}}}Text.") == "Text.");
  CHECK(clean_wikitext("x{{a|{{b|{{c}}}}}}y") == "xy");
  CHECK(clean_wikitext("{{{{{a}}}}}z") == "z");  // "{{" + "{{{"
  // An unclosed template loses its braces, not the rest of the article.
  CHECK(clean_wikitext("before {{oops after") == "before oops after");
  // Lone braces are text.
  CHECK(clean_wikitext("set {x} and }} and {y}") == "set {x} and }} and {y}");
}

TEST_CASE("inline templates keep their words; a removed one leaves no space before punctuation") {
  CHECK(clean_wikitext("Greek {{lang|grc|ἀναρχία}}, Arabic {{lang-ar|الجزائر}}") ==
        "Greek ἀναρχία, Arabic الجزائر");
  CHECK(clean_wikitext("({{lang-ar|{{large|الجزائر}}}} ''{{transl|ar|DIN|al-Jazā'ir}}'')") ==
        "(الجزائر al-Jazā'ir)");
  CHECK(clean_wikitext("{{nowrap|[[Louis XIV|Louis]] {{small|the}} Great}}") == "Louis the Great");
  CHECK(clean_wikitext("an area of {{convert|2381741|km2|sqmi|abbr=on}}, and "
                       "{{cvt|5|to|10|km}} or {{convert|3}}") ==
        "an area of 2381741 km2, and 5 to 10 km or 3");
  CHECK(clean_wikitext("1914{{ndash}}1918{{mdash}}war") == "1914\u20131918\u2014war");
  CHECK(clean_wikitext("Arab identity {{sfn|Ruedy|2005}}. Next {{citation needed}}, more") ==
        "Arab identity. Next, more");
  CHECK(clean_wikitext("{{Lang|fr|{{{1|x}}}}}y") == "y");  // parameters render to nothing
}

TEST_CASE("tables go, nested ones too, and so does an unclosed one") {
  CHECK(clean_wikitext("Intro.\n{| class=\"wikitable\"\n|-\n| a || b\n|}\nAfter.") ==
        "Intro.\n\nAfter.");
  CHECK(clean_wikitext("A\n{|\n| outer\n{|\n| inner\n|}\n| still outer\n|}\nB") == "A\n\nB");
  CHECK(clean_wikitext(":{|\n| indented\n|}\nC") == "C");
  CHECK(clean_wikitext("D\n{|\n| never closed\n") == "D");
  CHECK(clean_wikitext("x |} y") == "x |} y");  // not at a line start: text
}

TEST_CASE("references, comments and non-prose elements go") {
  CHECK(clean_wikitext("Fact.<ref>Source, p. 1.</ref> Next.") == "Fact. Next.");
  CHECK(clean_wikitext("Fact.<ref name=\"a\" group=b>{{cite|x}}</ref>") == "Fact.");
  CHECK(clean_wikitext("Fact.<ref name=a /> Again.<REF NAME=\"b\"/>") == "Fact. Again.");
  CHECK(clean_wikitext("A<!-- hidden [[link]] {{t}} -->B") == "AB");
  CHECK(clean_wikitext("A<!-- never closed\nB") == "A");
  CHECK(clean_wikitext("E = <math>mc^{2}</math>.") == "E = .");
  CHECK(clean_wikitext("a<gallery>\nFile:x.jpg|cap\n</gallery>b") == "ab");
  CHECK(clean_wikitext("a<timeline>\nImageSize = width:100\n</timeline>b") == "ab");
  CHECK(clean_wikitext("==Notes==\n<references />\nEnd") == "Notes\nEnd");
  // A <ref> that is never closed loses only its tag.
  CHECK(clean_wikitext("x<ref>y") == "xy");
  // "<reference" is not "<ref".
  CHECK(clean_wikitext("a <refx>b</refx>") == "a b");
}

TEST_CASE("links keep their text; files, categories and interlanguage links go") {
  CHECK(clean_wikitext("[[political philosophy]]") == "political philosophy");
  CHECK(clean_wikitext("[[self-governance|self-governed]] societies") == "self-governed societies");
  CHECK(clean_wikitext("[[bus]]es") == "buses");
  CHECK(clean_wikitext("[[Paris (band)|]] and [[Help:Contents|]]") == "Paris and Contents");
  CHECK(clean_wikitext("[[:Category:Algorithms]]") == "Category:Algorithms");
  CHECK(clean_wikitext("[[wikt:anarchy|anarchy]]") == "anarchy");
  CHECK(clean_wikitext("A[[File:Map.png|thumb|A map of [[Paris]] in {{year}}]]B") == "AB");
  CHECK(clean_wikitext("A[[Image:x.jpg|left|[[a|b]] [[c]]]]B") == "AB");
  CHECK(clean_wikitext("A[[ file : y.svg ]]B") == "AB");
  CHECK(clean_wikitext("Text.\n[[Category:Anarchism| ]]\n[[Category:Political ideologies]]") ==
        "Text.");
  CHECK(clean_wikitext("Text.\n[[de:Anarchismus]]\n[[zh-min-nan:Hui-thóng-tī-chú-gī]]\n"
                       "[[simple:Anarchism]]") == "Text.");
  CHECK(clean_wikitext("an [[unclosed link") == "an unclosed link");
}

TEST_CASE("external links keep their label") {
  CHECK(clean_wikitext("[http://example.org Example site] here") == "Example site here");
  CHECK(clean_wikitext("see [https://x.org/a?b=c]. More") == "see . More");
  CHECK(clean_wikitext("[//example.org/x protocol relative]") == "protocol relative");
  CHECK(clean_wikitext("he said [sic] and [1]") == "he said [sic] and [1]");
  CHECK(clean_wikitext("bare http://example.org stays") == "bare http://example.org stays");
}

TEST_CASE("bold and italic quotes go, apostrophes stay") {
  CHECK(clean_wikitext("'''Anarchism''' is ''a'' '''''word'''''") == "Anarchism is a word");
  CHECK(clean_wikitext("man's ''l'''''") == "man's l");
  CHECK(clean_wikitext("''''x'''") == "'x");
}

TEST_CASE("headings become lines; empty sections go") {
  CHECK(clean_wikitext("Lead.\n\n== History ==\nText.\n=== Early ===\nMore.") ==
        "Lead.\n\nHistory\nText.\n\nEarly\nMore.");
  CHECK(clean_wikitext("Lead.\n==See also==\n{{Portal|x}}\n== References ==\n{{reflist}}\n") ==
        "Lead.");
  // A section whose text sits only in a subsection keeps its heading.
  CHECK(clean_wikitext("== A ==\n=== B ===\nText") == "A\n\nB\nText");
  CHECK(clean_wikitext("==''Emphasis'' [[in|heading]]==\nx") == "Emphasis heading\nx");
}

TEST_CASE("list and indent markup at line starts goes, the text stays") {
  CHECK(clean_wikitext("* one\n** two\n# three\n#: four\n; term\n: def") ==
        "one\ntwo\nthree\nfour\nterm\ndef");
  CHECK(clean_wikitext("a * b # c") == "a * b # c");
  CHECK(clean_wikitext("x\n----\ny") == "x\n\ny");  // a rule separates paragraphs
}

TEST_CASE("whitespace: blank runs collapse, spaces collapse, ends are trimmed") {
  CHECK(clean_wikitext("\n\n a \n\n\n\nb  {{x}}  c\t \n\n") == "a\n\nb c");
  CHECK(clean_wikitext("{{only a template}}") == "");
  CHECK(clean_wikitext("") == "");
}

TEST_CASE("HTML tags go but keep their text; <br> breaks the line") {
  CHECK(clean_wikitext("a <span style=\"x\">b</span> <small>c</small>") == "a b c");
  CHECK(clean_wikitext("line1<br />line2<br>line3") == "line1\nline2\nline3");
  CHECK(clean_wikitext("H<sub>2</sub>O and 1 < 2 > 0") == "H2O and 1 < 2 > 0");
  CHECK(clean_wikitext("__NOTOC__Text __TOC__ here") == "Text here");
  CHECK(clean_wikitext("snake_case __init__") == "snake_case __init__");
}

TEST_CASE("HTML entities are decoded, after the markup is gone") {
  CHECK(clean_wikitext("&amp; &lt; &gt; &quot;q&quot; a&nbsp;b") == "& < > \"q\" a b");
  CHECK(clean_wikitext("1914&ndash;1918 &mdash; &#123;&#x1F600;&#X41;") ==
        "1914\u20131918 \u2014 {\U0001F600A");
  CHECK(clean_wikitext("caf&eacute; &alpha;&Omega; &hellip;") == "caf\u00e9 \u03b1\u03a9 \u2026");
  // An escaped tag is text, not a tag to strip.
  CHECK(clean_wikitext("&lt;ref&gt; is a tag") == "<ref> is a tag");
  CHECK(sg::decode_html_entities("&bogus; & &amp &#; &#xZZ; &#0; &#xD800; &#1114112;") ==
        "&bogus; & &amp &#; &#xZZ; \uFFFD \uFFFD \uFFFD");
  CHECK(sg::decode_html_entities("soft&shy;hy&#173;phen") == "softhyphen");
}

TEST_CASE("a realistic lead paragraph") {
  const std::string wikitext =
      "{{Redirect2|Anarchist|Anarchists|other uses}}\n{{pp-move-indef}}\n"
      "'''Anarchism''' is a [[political philosophy]] that advocates [[self-governance|"
      "self-governed]] societies.<ref>&quot;ANARCHISM&quot; [http://x.org Kropotkin]</ref>"
      "<ref name=\"iaf\">{{cite web|url=http://x}}</ref>\n\n"
      "== Etymology ==\n[[File:A.svg|thumb|The [[A]] symbol]]\nThe term ''anarchism'' "
      "&ndash; from [[Ancient Greek]] {{lang|grc|ἀναρχία}}.\n[[fr:Anarchisme]]";
  CHECK(clean_wikitext(wikitext) ==
        "Anarchism is a political philosophy that advocates self-governed societies.\n\n"
        "Etymology\nThe term anarchism \u2013 from Ancient Greek ἀναρχία.");
}

TEST_CASE("random markup soup never throws, hangs or grows") {
  // Every rule only removes or shortens (an entity's UTF-8 is shorter than its reference), so the
  // text can never come out longer than it went in.
  const std::string alphabet = "{{}}[[]]|<>/!=-'*#:;&x ab\n";
  const char* pieces[] = {"<ref>",      "</ref>", "<ref name=a/>", "<!--",        "-->",
                          "{|",         "|}",     "[[File:",       "[[Category:", "[http://x ",
                          "&amp;",      "&#x41;", "'''",           "== ",         "{{lang|",
                          "{{convert|", "<math>", "</math>",       "<br>",        "__TOC__"};
  uint64_t state = 12345;
  auto next = [&] {
    return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    const size_t length = next() % 120;
    for (size_t i = 0; i < length; ++i) {
      if (next() % 4 == 0)
        text += pieces[next() % std::size(pieces)];
      else
        text += alphabet[next() % alphabet.size()];
    }
    CAPTURE(text);
    const std::string cleaned = clean_wikitext(text);
    CHECK(cleaned.size() <= text.size());
  }
}

TEST_CASE("parentheses a removal left empty go, with their stray separators") {
  CHECK(clean_wikitext("Ann ({{birth date|1950|1|1}}) was born.") == "Ann was born.");
  CHECK(clean_wikitext("Ann ( {{IPA|a}} ), a poet") == "Ann, a poet");
  CHECK(clean_wikitext("Ann (<ref>x</ref>; born 1950) wrote") == "Ann (born 1950) wrote");
  CHECK(clean_wikitext("Ann (born 1950, {{circa}}) wrote") == "Ann (born 1950) wrote");
  CHECK(clean_wikitext("Ann ({{a}}, {{b}}) and Bob<ref>x</ref> ()") == "Ann and Bob");
  CHECK(clean_wikitext("call f() or g( )") == "call f() or g( )");  // right after a word: code
  CHECK(clean_wikitext("(a) (b)") == "(a) (b)");
}

TEST_CASE("links into the dump's own File and Category namespaces go, in any case") {
  const std::vector<std::string> bulgarian = {sg::fold_namespace_name("Файл"),
                                              sg::fold_namespace_name("Категория")};
  CHECK(clean_wikitext("Текст.\n[[Категория:Градове в България]]\n[[категория:X]]", bulgarian) ==
        "Текст.");
  CHECK(clean_wikitext("[[Файл:Sofia.jpg|мини|Надпис]]София", bulgarian) == "София");
  CHECK(clean_wikitext("[[Category:X]][[File:y.png]]ok", bulgarian) == "ok");  // canonical too
  CHECK(clean_wikitext("[[:Категория:X]] и [[Някой:Y|Y]]", bulgarian) == "Категория:X и Y");
  // Without the dump's names only the canonical ones go.
  CHECK(clean_wikitext("[[Категория:X]]") == "Категория:X");
  CHECK(sg::fold_namespace_name("КАТЕГОРИЯ") == sg::fold_namespace_name("категория"));
  CHECK(sg::fold_namespace_name("Ἀρχεῖο") == "Ἀρχεῖο");  // three-byte letters stay as written
  CHECK(sg::fold_namespace_name("Kategória_X") == "kategória x");
}
