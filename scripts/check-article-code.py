#!/usr/bin/env python3
"""The porting article's code is the BookReader target's: every ```swift block of
PortingBookReader.md but the overview's one-liners must appear, line for line (indentation aside),
in Sources/BookReader/BookReader.swift, which CI compiles and Tests/BookReaderTests drives."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
article = (root / "Sources/LibraryClient/LibraryClient.docc/PortingBookReader.md").read_text()
source = [line.strip() for line in (root / "Sources/BookReader/BookReader.swift").read_text().splitlines()]
blocks = re.findall(r"```swift\n(.*?)```", article, re.S)
failures = 0
for block in blocks:
    lines = [line.strip() for line in block.strip().splitlines()]
    found = any(source[i : i + len(lines)] == lines for i in range(len(source) - len(lines) + 1))
    if not found:
        failures += 1
        print(f"not in Sources/BookReader/BookReader.swift:\n{block}", file=sys.stderr)
print(f"{len(blocks) - failures} of {len(blocks)} code blocks of the porting article are the BookReader target's code")
sys.exit(1 if failures or not blocks else 0)
