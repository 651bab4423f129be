#!/usr/bin/env python3
"""test/tools/check_doc_links.py — every relative link in the docs resolves.

Reads README.md, CHANGELOG.md, docs/**/*.md, src/**/README.md and
test/README.md; for each Markdown link or image whose target is not a URL
(`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`, `[ref]: path`),
outside fenced code blocks and inline code, checks that the path exists
relative to the file and that the anchor is a heading of the target file,
slugged as GitHub does (lower case, punctuation but `-` and `_` dropped,
spaces to `-`, a repeated heading gets `-1`, `-2`, ...).

Also checks that the two indexes are complete: docs/design-notes.md links
every docs/design/*.md, and test/README.md names every test file
(test/e2e/*.sh, test/chaos/*.sh, test/pgtap/*.sql by file name, the
pg_regress files sql/*.sql by base name in backquotes).

Prints one line per broken link or missing entry (file:line: target: why)
and exits 1 if any; exits 0 silently otherwise. Run by the `regress` part of
test/run_tests.sh beside check_sql_scripts.sh and check_layers.py. It does
not fetch URLs and does not look at links inside HTML tags.
"""
import os
import re
import sys
import unicodedata

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def doc_files():
    out = []
    for name in ("README.md", "CHANGELOG.md", os.path.join("test", "README.md")):
        if os.path.isfile(os.path.join(ROOT, name)):
            out.append(name)
    for top, only_readme in (("docs", False), ("src", True)):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith(".md"):
                    continue
                if only_readme and f != "README.md":
                    continue
                out.append(os.path.relpath(os.path.join(d, f), ROOT))
    return out


def outside_fences(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, line


def lines_outside_code(text):
    """(line number, line) outside fenced blocks, inline code blanked."""
    for n, line in outside_fences(text):
        yield n, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda c: " " * len(c.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's text (github-slugger)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in "LNM":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for _, line in outside_fences(text):
            h = HEADING.match(line)
            if not h:
                continue
            s = slug(h.group(2))
            if s in seen:
                seen[s] += 1
                found.add("%s-%d" % (s, seen[s]))
            else:
                seen[s] = 0
                found.add(s)
        for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", text):
            found.add(m.group(1))
        _anchors[path] = found
    return _anchors[path]


def check(rel):
    bad = []
    src = os.path.join(ROOT, rel)
    with open(src, encoding="utf-8") as fh:
        text = fh.read()
    for n, line in lines_outside_code(text):
        targets = [m.group(1) for m in INLINE.finditer(line)]
        m = REFDEF.match(line)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if not t or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t):
                continue  # a URL (http:, mailto:, ...)
            path, _, frag = t.partition("#")
            if path:
                dest = os.path.normpath(os.path.join(os.path.dirname(src), path))
                if not dest.startswith(ROOT):
                    bad.append((n, t, "outside the repository"))
                    continue
                if not os.path.exists(dest):
                    bad.append((n, t, "no such file"))
                    continue
            else:
                dest = src
            if frag:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    continue
                if frag not in anchors(dest):
                    bad.append((n, t, "no heading with that anchor"))
    return ["%s:%d: %s: %s" % (rel, n, t, why) for n, t, why in bad]


def unindexed():
    """Design notes the index does not link, test files test/README.md does not name."""
    out = []
    index = os.path.join(ROOT, "docs", "design-notes.md")
    design = os.path.join(ROOT, "docs", "design")
    if os.path.isfile(index) and os.path.isdir(design):
        text = open(index, encoding="utf-8").read()
        for f in sorted(os.listdir(design)):
            if f.endswith(".md") and "(design/%s" % f not in text:
                out.append("docs/design-notes.md: design/%s: not in the index" % f)
    readme = os.path.join(ROOT, "test", "README.md")
    if os.path.isfile(readme):
        text = open(readme, encoding="utf-8").read()
        for folder, ext in (("test/e2e", ".sh"), ("test/chaos", ".sh"), ("test/pgtap", ".sql")):
            d = os.path.join(ROOT, folder)
            for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                if f.endswith(ext) and f != "common.psql" and "`%s`" % f not in text:
                    out.append("test/README.md: %s/%s: not listed" % (folder, f))
        d = os.path.join(ROOT, "sql")
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if f.endswith(".sql") and "`%s`" % f[:-4] not in text:
                out.append("test/README.md: sql/%s: not listed" % f)
    return out


def main():
    problems = []
    files = doc_files()
    for rel in files:
        problems.extend(check(rel))
    problems.extend(unindexed())
    for p in problems:
        print("check_doc_links: " + p)
    if not files:
        print("check_doc_links: no documentation found under " + ROOT)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
