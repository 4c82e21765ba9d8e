#!/usr/bin/env python3
"""Writes a C++ file defining `const char* const NAME` with the bytes of a text file.

Usage: embed_text.py INPUT OUTPUT NAMESPACE::NAME
"""
import sys

src, dst, qualified = sys.argv[1:4]
namespace, name = qualified.rsplit("::", 1)
data = open(src, "rb").read()
body = "".join("\\x%02x" % b for b in data)
chunks = [body[i:i + 96] for i in range(0, len(body), 96)] or [""]
with open(dst, "w") as out:
    out.write("// Generated from %s by embed_text.py; do not edit.\n" % src)
    out.write("namespace %s {\nextern const char* const %s;\nconst char* const %s =\n" % (namespace, name, name))
    out.write("\n".join('    "%s"' % c for c in chunks))
    out.write(";\n}\n")
