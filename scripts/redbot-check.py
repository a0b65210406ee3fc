#!/usr/bin/env python3
"""Runs REDbot (https://redbot.org, `pip install redbot`) against every GET route of a server.

    scripts/redbot-check.py URL

URL is a running server without a read token (REDbot's command line cannot send
`Authorization`). Creates one library and one book (with LIBRARY_API_TOKEN if set), then asks
REDbot about each GET route with them; prints every note with its level, and fails on any note of
level WARN or BAD. The event streams are left out: REDbot reads a response to its end, and a
stream never ends (tests/LiveUpdateTests and scripts/sse-clients.sh cover their headers).
"""

import http.client
import json
import os
import subprocess
import sys
import urllib.parse

FAILING_LEVELS = {"WARN", "BAD"}


def call(url, method, path, body):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if os.environ.get("LIBRARY_API_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['LIBRARY_API_TOKEN']}"
    conn.request(method, path, body=json.dumps(body), headers=headers)
    response = conn.getresponse()
    payload = json.loads(response.read())
    if response.status != 201:
        raise SystemExit(f"redbot-check: {method} {path} answered {response.status}")
    return payload["id"]


def notes(url):
    """REDbot's notes for one URL, as (level, summary) pairs, from its HAR output."""
    result = subprocess.run(["redbot", "-o", "har", url], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise SystemExit(f"redbot-check: redbot failed on {url}: {result.stderr.strip()[:300]}")
    har = json.loads(result.stdout)
    return [(note.get("level", "?"), note.get("summary", "")) for entry in har["log"]["entries"]
            for note in entry.get("_red_messages", [])]


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    url = sys.argv[1].rstrip("/")
    library = call(url, "POST", "/libraries", {"name": "REDbot"})
    book = call(url, "POST", "/books", {"libraryId": library, "title": "Dune"})
    paths = ["/libraries", f"/libraries/{library}", f"/libraries/{library}/books", "/books",
             f"/books/{book}", f"/books?libraryId={library}&available=true", "/healthz", "/metrics",
             "/openapi.yaml"]
    failures = 0
    for path in paths:
        for level, summary in notes(url + path):
            failing = level.upper() in FAILING_LEVELS
            failures += failing
            print(f"{'FAIL' if failing else 'ok'} - GET {path}: [{level}] {summary}")
    print(f"redbot-check: {'FAILED' if failures else 'passed'} ({len(paths)} routes)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
