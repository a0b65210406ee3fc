#!/usr/bin/env python3
"""Every public symbol of LibraryClient has a documentation comment: reads the symbol graphs that
`swift package generate-documentation --target LibraryClient` extracted (run it first) and lists
the public symbols declared in Sources/LibraryClient without one. Members a protocol or a
conformance supplies (`==`, `hash(into:)`, `id`, `init(fieldValue:)` ...) take the protocol's
documentation and are not counted."""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
graphs = sorted(root.glob(".build/*/extracted-symbols/*/LibraryClient/LibraryClient*.symbols.json"))
if not graphs:
    sys.exit("no symbol graph of LibraryClient: run swift package generate-documentation --target LibraryClient")
missing, counted = [], 0
for graph in graphs:
    data = json.loads(graph.read_text())
    implementing = {r["source"] for r in data.get("relationships", []) if r["kind"] in ("defaultImplementationOf", "requirementOf", "overrides")}
    conforming_members = {r["source"] for r in data.get("relationships", []) if r["kind"] == "memberOf" and r.get("sourceOrigin")}
    for symbol in data["symbols"]:
        location = symbol.get("location", {}).get("uri", "")
        # An extension of another module's type is no symbol of its own: its members are counted.
        if symbol["kind"]["identifier"] == "swift.extension":
            continue
        if symbol.get("accessLevel") != "public" or "Sources/LibraryClient/" not in location:
            continue
        if symbol["identifier"]["precise"] in implementing or symbol["identifier"]["precise"] in conforming_members:
            continue
        counted += 1
        if not symbol.get("docComment"):
            missing.append(f"{location.split('Sources/')[-1]}:{symbol['location']['position']['line'] + 1}: {'.'.join(symbol['pathComponents'])}")
for line in sorted(set(missing)):
    print("undocumented:", line)
print(f"{counted - len(missing)} of {counted} public symbols of LibraryClient documented")
sys.exit(1 if missing else 0)
