#!/usr/bin/env python3
"""Checks real events of both event streams against openapi.yaml.

    scripts/event-schema-check.py OPENAPI_YAML URL

Against a running server at URL: creates a library and a book, opens GET /libraries/{id}/events
and GET /books/{id}/events, changes both, adds a book to the library, then deletes the book and
the library. Every event received (snapshot, change, delete, on both streams) must match its
stream's event schema in openapi.yaml (`LibraryStreamEvent`, `BookStreamEvent`), and the `data`
JSON the `contentSchema` of its branch; each stream must send each of the three kinds. With
LIBRARY_API_TOKEN set, writes carry it; with LIBRARY_READ_TOKEN set, the library stream sends it
as `?access_token=` (as a browser's EventSource would) and the book stream as a header.

Prints one line per event; exits 1 on any mismatch. Every wait is bounded (10 s per stream).
"""

import http.client
import json
import os
import sys
import threading
import urllib.parse

import jsonschema
import referencing
import yaml

API_TOKEN = os.environ.get("LIBRARY_API_TOKEN")
READ_TOKEN = os.environ.get("LIBRARY_READ_TOKEN")


def connection(url):
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)


def call(url, method, path, body=None):
    headers = {"Authorization": f"Bearer {API_TOKEN}"} if API_TOKEN else {}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body)
    conn = connection(url)
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    if response.status >= 300:
        raise SystemExit(f"event-schema-check: {method} {path} answered {response.status} {payload[:200]!r}")
    return json.loads(payload) if payload else None


def read_stream(url, path, headers, events, opened):
    """Reads events until `delete` (or 10 s of silence); appends (event, fields) pairs."""
    conn = connection(url)
    conn.request("GET", path, headers={"Accept": "text/event-stream", **headers})
    response = conn.getresponse()
    if response.status != 200:
        events.append(("error", {"status": response.status}))
        opened.set()
        return
    opened.set()
    fields, data = {}, []
    try:
        while True:
            line = response.readline()
            if not line:
                return
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data:
                    fields["data"] = "\n".join(data)
                    events.append(fields)
                    if fields.get("event") == "delete":
                        return
                fields, data = {}, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "data":
                    data.append(value)
                elif name == "retry":
                    fields["retry"] = int(value)
                else:
                    fields[name] = value
    except TimeoutError:
        return
    finally:
        conn.close()


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as file:
        spec = yaml.safe_load(file)
    url = sys.argv[2]
    resource = referencing.Resource.from_contents(spec, default_specification=referencing.jsonschema.DRAFT202012)
    registry = referencing.Registry().with_resource("urn:spec", resource)

    def validator(schema):
        return jsonschema.Draft202012Validator({"$ref": "urn:spec" + schema}, registry=registry)

    library = call(url, "POST", "/libraries", {"name": "Events"})["id"]
    book = call(url, "POST", "/books", {"libraryId": library, "title": "Dune", "author": "Herbert"})["id"]
    query = f"?access_token={urllib.parse.quote(READ_TOKEN)}" if READ_TOKEN else ""
    header = {"Authorization": f"Bearer {READ_TOKEN}"} if READ_TOKEN else {}
    streams = {
        "LibraryStreamEvent": (f"/libraries/{library}/events{query}", {}, []),
        "BookStreamEvent": (f"/books/{book}/events", header, []),
        "LibraryStreamEvent (fields)": (f"/libraries/{library}/events?fields=name,books.title" +
                                        (f"&access_token={urllib.parse.quote(READ_TOKEN)}" if READ_TOKEN else ""),
                                        {}, []),
    }
    threads = []
    for path, headers, events in streams.values():
        opened = threading.Event()
        thread = threading.Thread(target=read_stream, args=(url, path, headers, events, opened), daemon=True)
        thread.start()
        opened.wait(10)
        threads.append(thread)
    call(url, "PATCH", f"/books/{book}", {"title": "Dune Messiah", "available": False})
    call(url, "PATCH", f"/libraries/{library}", {"name": "Events II", "address": "1 Main St"})
    other = call(url, "POST", f"/libraries/{library}/books", {"title": "Emma", "isbn": None})["id"]
    call(url, "DELETE", f"/books/{book}")
    call(url, "PATCH", f"/books/{other}", {"title": "Emma II"})
    call(url, "DELETE", f"/libraries/{library}")
    for thread in threads:
        thread.join(10)

    failures = 0
    for name, (path, _, events) in streams.items():
        envelope = validator(f"#/components/schemas/{name.split(' ')[0]}")
        branches = {branch["properties"]["event"]["const"]: branch["properties"]["data"]["contentSchema"]["$ref"]
                    for branch in spec["components"]["schemas"][name.split(' ')[0]]["oneOf"]}
        kinds = set()
        for event in events:
            errors = [error.message for error in envelope.iter_errors(event)]
            kind = event.get("event")
            if not errors and kind in branches:
                errors = [error.message for error in validator(branches[kind]).iter_errors(json.loads(event["data"]))]
            kinds.add(kind)
            failures += bool(errors)
            status = "FAIL" if errors else "ok"
            print(f"{status} - {name} {kind} id={event.get('id')}: {event.get('data', '')[:120]}"
                  + (f" -> {errors[:3]}" if errors else ""))
        missing = {"snapshot", "change", "delete"} - kinds
        if missing:
            failures += 1
            print(f"FAIL - {name} ({path.split('?')[0]}): no {', '.join(sorted(missing))} event within 10 s")
    print(f"event-schema-check: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
