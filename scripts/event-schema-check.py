#!/usr/bin/env python3
"""Checks real events of every event stream against openapi.yaml.

    scripts/event-schema-check.py OPENAPI_YAML URL

Against a running server at URL: creates a library with two books and a second library, opens
GET /libraries/{id}/events, GET /books/{id}/events, the collection streams GET /libraries/events
and GET /books/events?libraryId=…, and GET /events with four watches (a book, a library, that
library's books, every library); then changes the book and the library, adds a book and a
library, deletes the first book, changes the new book, and deletes both libraries. Every event
received must match its stream's event schema in openapi.yaml (`LibraryStreamEvent`,
`BookStreamEvent`, `LibraryCollectionStreamEvent`, `BookCollectionStreamEvent`,
`WatchStreamEvent`, and `PostedWatchStreamEvent` for the same watches opened by POST /events), and the `data` JSON the `contentSchema` of its branch. Each single stream must
send a snapshot, a change and a delete; each collection stream a snapshot spread over several
`data:` lines with at least two items and changes with `added`, `removed` and `changed`; the
multiplexed stream frames (no `event:` line, ids `<seq>.<tag>` strictly increasing, the tag the
watches' tags) with snapshot, change and delete entries, a multi-line collection snapshot
among them, for the watches given only. With LIBRARY_API_TOKEN set, writes carry it; with
LIBRARY_READ_TOKEN set, the library streams and the multiplexed one send it as `?access_token=`
(as a browser's EventSource would) and the book streams as a header.

Prints one line per event; exits 1 on any mismatch. Every wait is bounded (10 s per stream).
"""

import base64
import hashlib
import http.client
import json
import os
import sys
import threading
import urllib.parse

import jsonschema
import referencing
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import event_fields  # noqa: E402

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


def read_stream(url, path, headers, events, opened, done, body=None):
    """Reads events until `done(event)` (or 10 s of silence); appends each event's fields. With a
    `body`, the stream is opened by POST with that JSON body.

    An event without an `event:` line is a `message`, as EventSource and schemathesis name it."""
    conn = connection(url)
    if body is None:
        conn.request("GET", path, headers={"Accept": "text/event-stream", **headers})
    else:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Accept": "text/event-stream", "Content-Type": "application/json", **headers})
    response = conn.getresponse()
    if response.status != 200:
        events.append(("error", {"status": response.status}))
        opened.set()
        return
    opened.set()
    block = b""
    try:
        while True:
            line = response.readline()
            if not line:
                return
            line = line.rstrip(b"\r\n")
            if line:
                block += line + b"\n"
                continue
            kind, ident, data = event_fields(block.rstrip(b"\n"))
            block = b""
            if data:
                fields = {"event": kind, "data": b"\n".join(data).decode("utf-8")}
                if ident is not None:
                    fields["id"] = ident.decode("utf-8")
                events.append(fields)
                if done(fields):
                    return
    except TimeoutError:
        return
    finally:
        conn.close()


ORDER = ("snapshot", "change", "delete")


def watch_tag(text):
    """A watch's part of a frame id: the first 96 bits of the SHA-256 of its UTF-8, base64url."""
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode("utf-8")).digest()[:12]).decode("ascii")


def check_frames(events, watches, fail, tagged=True):
    """Checks what no schema can: every frame of GET /events names only the watches given, each
    with at most a snapshot, a change and a delete entry in that order, and its id is `<seq>.<tag>` with seq strictly increasing and the tag the sorted hashes of
    the watches. Returns the kinds of entries seen (and `multi-line snapshot` when a collection
    snapshot spread over several lines)."""
    tag = "".join(sorted(watch_tag(watch) for watch in watches)) if tagged else ""
    kinds, last = set(), -1
    for event in events:
        seq, _, frame_tag = event.get("id", "").partition(".")
        if frame_tag != tag:
            fail(f"WatchStreamEvent id={event.get('id')}: the tag is not {tag}")
        if not seq.isdigit() or int(seq) <= last:
            fail(f"WatchStreamEvent id={event.get('id')}: not after {last}")
        else:
            last = int(seq)
        try:
            entries = json.loads(event["data"])
        except ValueError:
            continue  # reported with the schema check
        per_watch = {}
        for entry in entries:
            if isinstance(entry, dict):
                per_watch.setdefault(entry.get("watch"), []).append(entry.get("event"))
        for watch, sequence in per_watch.items():
            # At most one entry of each kind per watch, in this order (a snapshot may be followed
            # by the change made while the other watches' snapshots were read).
            if watch not in watches or sequence != [kind for kind in ORDER if kind in sequence]:
                fail(f"WatchStreamEvent id={event.get('id')}: entries {sequence} for {watch!r}")
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            kinds.add(entry.get("event"))
            items = entry.get("data", {}).get("items") if isinstance(entry.get("data"), dict) else None
            if entry.get("event") == "snapshot" and items is not None and len(items) >= 2 and \
                    event["data"].count("\n") > len(entries):  # one line per entry and `]`, plus the items
                kinds.add("multi-line snapshot")
    return kinds


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
    # A second book, so the library has more than one.
    call(url, "POST", "/books", {"libraryId": library, "title": "Children of Dune"})
    spare = call(url, "POST", "/libraries", {"name": "Events spare"})["id"]
    token = f"access_token={urllib.parse.quote(READ_TOKEN)}" if READ_TOKEN else ""
    query = f"?{token}" if token else ""
    header = {"Authorization": f"Bearer {READ_TOKEN}"} if READ_TOKEN else {}
    watches = [f"/books?libraryId={library}&fields=title", f"/books/{book}?fields=title",
               f"/libraries/{library}?fields=name,books.title", "/libraries?fields=name"]
    watch_query = urllib.parse.urlencode([("watch", watch) for watch in watches] + ([("access_token", READ_TOKEN)]
                                                                                     if READ_TOKEN else []))
    added = {}  # the library created while the streams are open; its deletion is the last write

    def deleted(event):
        return event["event"] == "delete"

    def removed(ids):
        def done(event):
            data = json.loads(event["data"]) if event["event"] == "change" else {}
            return any(item in data.get("removed", []) for item in ids())
        return done

    def frame_removed(event):
        try:
            entries = json.loads(event["data"])
        except ValueError:
            return False
        return any(entry.get("event") == "change" and added.get("id") in entry["data"].get("removed", [])
                   for entry in entries if isinstance(entry, dict) and isinstance(entry.get("data"), dict))

    streams = {
        "LibraryStreamEvent": (f"/libraries/{library}/events{query}", {}, [], deleted),
        "BookStreamEvent": (f"/books/{book}/events", header, [], deleted),
        "LibraryStreamEvent (fields)": (f"/libraries/{library}/events?fields=name,books.title" +
                                        (f"&{token}" if token else ""), {}, [], deleted),
        "LibraryCollectionStreamEvent": ("/libraries/events?fields=name,bookCount" + (f"&{token}" if token else ""),
                                         {}, [], removed(lambda: [added.get("id")])),
        "BookCollectionStreamEvent": (f"/books/events?libraryId={library}&fields=title,author", header, [],
                                      removed(lambda: [added.get("book")])),
        "WatchStreamEvent": (f"/events?{watch_query}", {}, [], frame_removed),
        "PostedWatchStreamEvent": ("/events" + (f"?{token}" if token else ""), {}, [], frame_removed),
    }
    bodies = {"PostedWatchStreamEvent": {"watches": watches}}
    threads = []
    for name, (path, headers, events, done) in streams.items():
        opened = threading.Event()
        thread = threading.Thread(target=read_stream, args=(url, path, headers, events, opened, done, bodies.get(name)),
                                  daemon=True)
        thread.start()
        opened.wait(10)
        threads.append(thread)
    call(url, "PATCH", f"/books/{book}", {"title": "Dune Messiah", "available": False})
    call(url, "PATCH", f"/libraries/{library}", {"name": "Events II", "address": "1 Main St"})
    other = call(url, "POST", f"/libraries/{library}/books", {"title": "Emma", "isbn": None})["id"]
    added["book"] = other
    added["id"] = call(url, "POST", "/libraries", {"name": "Events added"})["id"]
    call(url, "DELETE", f"/books/{book}")
    call(url, "PATCH", f"/books/{other}", {"title": "Emma II"})
    call(url, "DELETE", f"/libraries/{library}")
    call(url, "DELETE", f"/libraries/{spare}")
    call(url, "DELETE", f"/libraries/{added['id']}")
    for thread in threads:
        thread.join(10)

    failures = 0

    def fail(message):
        nonlocal failures
        failures += 1
        print(f"FAIL - {message}")

    for name, (path, _, events, _) in streams.items():
        schema_name = name.split(" ")[0]
        envelope = validator(f"#/components/schemas/{schema_name}")
        definition = spec["components"]["schemas"][schema_name]
        if "oneOf" in definition:
            # A branch is inline, or a reference (`ExpiredStreamEvent`, which every stream shares).
            resolved = [spec["components"]["schemas"][branch["$ref"].split("/")[-1]] if "$ref" in branch else branch
                        for branch in definition["oneOf"]]
            branches = {branch["properties"]["event"]["const"]: branch["properties"]["data"]["contentSchema"]["$ref"]
                        for branch in resolved}
        else:
            branches = {definition["properties"]["event"]["const"]:
                        definition["properties"]["data"]["contentSchema"]["$ref"]}
        kinds = set()
        for event in events:
            errors = [error.message for error in envelope.iter_errors(event)]
            kind = event.get("event")
            data = None
            if not errors and kind in branches:
                try:
                    data = json.loads(event["data"])
                except ValueError as error:
                    errors = [f"data is not JSON: {error}"]
                else:
                    errors = [error.message for error in validator(branches[kind]).iter_errors(data)]
            kinds.add(kind)
            if data is not None and kind == "snapshot" and "items" in data:
                if "\n" in event["data"] and len(data["items"]) >= 2:
                    kinds.add("multi-line snapshot")
            if data is not None and kind == "change":
                kinds.update(part for part in ("added", "removed", "changed") if part in data)
            failures += bool(errors)
            status = "FAIL" if errors else "ok"
            print(f"{status} - {name} {kind} id={event.get('id')}: {event.get('data', '')[:120]!r}"
                  + (f" -> {errors[:3]}" if errors else ""))
        if schema_name.endswith("WatchStreamEvent"):
            kinds = check_frames(events, watches, fail, tagged=schema_name == "WatchStreamEvent")
            expected = {"snapshot", "change", "delete", "multi-line snapshot"}
        elif schema_name.endswith("CollectionStreamEvent"):
            expected = {"snapshot", "change", "added", "removed", "changed", "multi-line snapshot"}
        else:
            expected = {"snapshot", "change", "delete"}
        missing = expected - kinds
        if missing:
            fail(f"{name} ({path.split('?')[0]}): no {', '.join(sorted(missing))} within 10 s")
    print(f"event-schema-check: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
