#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every interface, method, property and signal of the D-Bus XML has a doc
# comment gdbus-codegen reads (the comment right before it, its first line
# the element's name and a colon) with text in it, so the generated API
# reference (doc/meson.build, --generate-rst) has no empty entry and a new
# method fails here until it is documented.
# Usage: check-dbus-doc.py XML
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
element = re.compile(r'<(interface|method|property|signal) name="([^"]+)"')
comment = re.compile(r'<!--((?:(?!-->).)*)-->\s*$', re.S)
bad = []
n = 0
for m in element.finditer(text):
    n += 1
    kind, name = m.groups()
    before = comment.search(text[:m.start()])
    lines = [line.strip() for line in before.group(1).strip().split("\n")] if before else []
    if not lines or lines[0] != name + ":":
        bad.append("%s %s: no doc comment starting with '%s:'" % (kind, name, name))
    elif not any(lines[1:]):
        bad.append("%s %s: an empty doc comment" % (kind, name))
for b in bad:
    print(b)
print("%d elements, %d without documentation" % (n, len(bad)))
sys.exit(1 if bad else 0)
