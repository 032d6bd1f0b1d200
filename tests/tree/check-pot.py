#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# The message catalogue cannot fall behind the code:
#  - every C file with a marked string (_ (), N_ (), ngettext (), or a
#    message helper xgettext is told about) is in po/POTFILES.in;
#  - the template the build made from them (build/po/vblk.pot) has exactly
#    the messages of po/vblk.pot (a string marked and not in the template
#    fails: ninja -C build vblk-pot);
#  - every language of po/LINGUAS translates every message of the template,
#    none fuzzy, and msgfmt --check accepts it (formats, plural forms).
# Usage: check-pot.py SOURCE_ROOT BUILT_POT
import os
import re
import subprocess
import sys

src, built = sys.argv[1], sys.argv[2]
bad = []
marked = re.compile(r'\b(?:N?_|ngettext|C_) \("|^\s*(?:return )?(?:set_error|spec_error|schema_error|apply_step_new|because) \(', re.M)


def entries(path):
    """{(msgctxt, msgid): (msgstr list, fuzzy)} of a .po/.pot file."""
    out = {}
    cur = {}
    key = None
    fuzzy = False

    def flush():
        nonlocal cur, fuzzy
        if "msgid" in cur and cur["msgid"] != "":
            out[(cur.get("msgctxt"), cur["msgid"])] = (
                [v for k, v in sorted(cur.items()) if k.startswith("msgstr")], fuzzy)
        cur, fuzzy = {}, False

    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            key = None
            continue
        if line.startswith("#,") and "fuzzy" in line:
            fuzzy = True
        if line.startswith("#"):
            continue
        m = re.match(r'(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) "(.*)"$', line)
        if m:
            key = m.group(1)
            cur[key] = m.group(2)
        elif line.startswith('"') and key:
            cur[key] += line[1:-1]
    flush()
    return out


listed = {l.strip() for l in open(os.path.join(src, "po/POTFILES.in")) if l.strip() and not l.startswith("#")}
for top in ("src", "client"):
    for dp, _, files in os.walk(os.path.join(src, top)):
        for f in files:
            if f.endswith((".c", ".h")):
                path = os.path.join(dp, f)
                rel = os.path.relpath(path, src)
                if marked.search(open(path, encoding="utf-8").read()) and rel not in listed:
                    bad.append("%s has marked strings and is not in po/POTFILES.in" % rel)
for rel in listed:
    if not os.path.exists(os.path.join(src, rel)):
        bad.append("po/POTFILES.in names %s, which does not exist" % rel)

template = entries(os.path.join(src, "po/vblk.pot"))
made = entries(built)
for k in sorted(set(made) - set(template), key=str):
    bad.append("not in po/vblk.pot (ninja -C build vblk-pot): %r" % (k[1],))
for k in sorted(set(template) - set(made), key=str):
    bad.append("in po/vblk.pot, no longer in the code: %r" % (k[1],))

langs = [l.strip() for l in open(os.path.join(src, "po/LINGUAS")) if l.strip() and not l.startswith("#")]
for lang in langs:
    po = os.path.join(src, "po", lang + ".po")
    r = subprocess.run(["msgfmt", "--check", "--statistics", "-o", "/dev/null", po],
                       capture_output=True, text=True)
    if r.returncode != 0:
        bad.append("%s: msgfmt --check: %s" % (lang, r.stderr.strip()))
    have = entries(po)
    for k in template:
        if k not in have:
            bad.append("%s: no entry for %r" % (lang, k[1]))
        elif have[k][1]:
            bad.append("%s: fuzzy: %r" % (lang, k[1]))
        elif not all(have[k][0]):
            bad.append("%s: untranslated: %r" % (lang, k[1]))
for b in bad:
    print(b)
print("%d messages in the template, %d languages (%s), %d problems"
      % (len(template), len(langs), " ".join(langs), len(bad)))
sys.exit(1 if bad else 0)
