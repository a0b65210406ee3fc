#!/usr/bin/env python3
"""Checks the documentation's relative links.

    python3 scripts/check-links.py

Every relative link in README.md, CHANGELOG.md and docs/*.md (inline, image or reference
definition, outside code) must name a file or directory of the repository; a link with a
`#anchor` must name a Markdown file (or the page itself) with a heading whose GitHub slug is that
anchor. Links with a scheme (https:, mailto:) are not followed. Prints each broken link and exits
1; otherwise prints how many links it checked. Standard library only.
"""

import collections
import glob
import os
import re
import sys
import unicodedata
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
COMMENT = re.compile(r"<!--.*?-->", re.S)
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
INLINE = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]+(?:\([^\s()]*\))?)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)", re.M)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")
LINE_ANCHOR = re.compile(r"^L\d+(-L\d+)?$")


def blank(match):
    """The matched text with everything but its line breaks removed, so offsets keep their lines."""
    return "\n" * match.group(0).count("\n")


def without_code(text):
    """The text with fenced blocks, HTML comments and code spans blanked out."""
    lines, fence = [], None
    for line in text.split("\n"):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
            lines.append("")
        elif fence is not None:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            lines.append("")
        else:
            lines.append(line)
    text = COMMENT.sub(blank, "\n".join(lines))
    # A code span never crosses a blank line: strip them paragraph by paragraph.
    return "\n\n".join(CODE_SPAN.sub(lambda m: " " + blank(m), part) for part in text.split("\n\n"))


def slug(heading):
    """GitHub's anchor for a heading: its text, lowercased, without punctuation, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link or image: its text
    text = re.sub(r"`+", "", text)
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)  # emphasis markers
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    kept = (c for c in text.lower()
            if unicodedata.category(c)[0] in "LNM" or unicodedata.category(c) == "Pc" or c in " -")
    return "".join(kept).replace(" ", "-")


def anchors(path, cache={}):
    """The anchors of a Markdown file's headings, repeated slugs numbered as GitHub does."""
    if path not in cache:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        # Headings are read from the text with only fences and comments removed: a code span
        # in a heading still counts (its backticks are dropped by slug()).
        lines, fence = [], None
        for line in COMMENT.sub(blank, text).split("\n"):
            opening = FENCE.match(line)
            if fence is None and opening:
                fence = opening.group(1)
            elif fence is not None:
                if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                    fence = None
            elif match := HEADING.match(line):
                lines.append(match.group(2))
        seen, found = collections.Counter(), set()
        for heading in lines:
            base = slug(heading)
            found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
            seen[base] += 1
        cache[path] = found
    return cache[path]


def check(page):
    """The links of one page: how many were checked, and a line for each broken one."""
    with open(page, encoding="utf-8") as file:
        text = without_code(file.read())
    targets = [(m.start(), m.group(2)) for m in INLINE.finditer(text)]
    targets += [(m.start(), m.group(1)) for m in DEFINITION.finditer(text)]
    checked, broken = 0, []
    for offset, target in sorted(targets):
        target = target[1:-1] if target.startswith("<") else target
        if SCHEME.match(target):
            continue
        checked += 1
        where = f"{os.path.relpath(page, ROOT)}:{text.count(chr(10), 0, offset) + 1}: ({target})"
        path, _, anchor = target.partition("#")
        path, anchor = urllib.parse.unquote(path), urllib.parse.unquote(anchor)
        if not path:
            resolved = page
        elif path.startswith("/"):
            resolved = os.path.join(ROOT, path.lstrip("/"))
        else:
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
        if not os.path.exists(resolved):
            broken.append(f"{where} no such file: {os.path.relpath(resolved, ROOT)}")
        elif not anchor:
            continue
        elif resolved.endswith(".md") and os.path.isfile(resolved):
            if anchor not in anchors(resolved):
                broken.append(f"{where} no heading in {os.path.relpath(resolved, ROOT)} has the anchor #{anchor}")
        elif not (os.path.isfile(resolved) and LINE_ANCHOR.match(anchor)):
            broken.append(f"{where} #{anchor} can only name a heading of a Markdown file or a line (#L12)")
    return checked, broken


def main():
    pages = [os.path.join(ROOT, name) for name in ("README.md", "CHANGELOG.md")]
    pages += sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    total, broken = 0, []
    for page in pages:
        if not os.path.exists(page):
            broken.append(f"{os.path.relpath(page, ROOT)}: missing")
            continue
        checked, failures = check(page)
        total += checked
        broken += failures
    if broken:
        print(f"check-links: {len(broken)} broken of {total} relative links:", file=sys.stderr)
        for line in broken:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"check-links: {total} relative links in {len(pages)} pages, none broken")
    return 0


if __name__ == "__main__":
    sys.exit(main())
