#!/usr/bin/env python3
"""Over-observation: how many events field-level tracking delivers, against push-everything.

    Benchmarks/overobserve.py PORT BOOKS [SUBSCRIBERS=120] [WRITES=300] [SEED=7]
        [--collection-writes 400] [--copies 3] [--libraries N]

Against a running library-server on 127.0.0.1:PORT whose database was seeded by
Benchmarks/seed.py with BOOKS books. Opens SUBSCRIBERS event streams spread over 6 books, each
asking for one of 6 field sets, then makes WRITES PATCHes, each changing one field, picked
uniformly at random, of one of those books, picked uniformly at random.

It counts the change events and bytes the subscribers actually received, checks that no event
carries a field its subscriber did not ask for, and compares with what a push-everything design
(`ObservableObject`'s `objectWillChange`: every change of an object goes to every subscriber of
it, with the whole object) would have sent: WRITES x subscribers-per-book events, each with the
whole book.

Then (part 2, Benchmarks/lib/overobserve_collections.py) the live queries: `--copies` x 6
collection subscribers (`/books/events` with author / available / libraryId filters, and
`/libraries/events`) and `--copies` x 2 multiplexed ones (`/events` with book, library and
collection watches), under `--collection-writes` random writes: single-field book PATCHes (author
and available flips and libraryId moves take books in and out of the filters), book creations
and deletions, library renames, creations and deletions (which delete their books). The script
keeps a model of every book and library it touches and, after each write, waits for the events
the model says each subscriber must get, then checks each one exactly: no field the subscriber
did not ask for, no item that does not match its filters after that write, no missing or extra
change, no unchanged field in `changed`. At the end every subscriber's state rebuilt from its
events must equal the matching GET. Compared with push-everything: every change of every item
(a write changes a book, and the libraries whose bookCount it moves) to every subscriber, and to
every watch of a multiplexed one, each with the whole item.

The last line is `JSON {...}` for bench.py. Exits 1 if any check fails.
"""

import http.client
import json
import random
import selectors
import socket
import sys
import os
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from benchlib import dechunk, event_fields  # noqa: E402

FIELD_SETS = [["title"], ["author"], ["isbn"], ["publishedYear"], ["available"], ["title", "author"]]
FIELDS = ["title", "author", "isbn", "publishedYear", "available"]
BOOKS_WATCHED = 6


def book_id(n):
    return "00000000-0000-4000-9000-%012d" % n


def isbn13(rng):
    digits = [9, 7, 8] + [rng.randrange(10) for _ in range(9)]
    check = (10 - sum(d * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits)) % 10) % 10
    return "".join(map(str, digits + [check]))


class Stream:
    """One event stream read without blocking; parses `event:`/`id:`/`data:` blocks."""

    def __init__(self, port, book, fields):
        self.book, self.fields = book, set(fields)
        self.socket = socket.create_connection(("127.0.0.1", port))
        request = "GET /books/%s/events?fields=%s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n" % (
            book, ",".join(fields))
        self.socket.sendall(request.encode())
        self.socket.setblocking(False)
        self.raw = bytearray()
        self.body = bytearray()
        self.head_done = False
        self.snapshot = False
        self.changes = 0
        self.change_bytes = 0
        self.foreign = 0

    def feed(self, data):
        self.raw += data
        if not self.head_done:
            if b"\r\n\r\n" not in self.raw:
                return
            head, rest = bytes(self.raw).split(b"\r\n\r\n", 1)
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit("overobserve: stream refused: %r" % head[:100])
            self.head_done, self.raw = True, bytearray(rest)
        dechunk(self.raw, self.body)
        while True:
            end = self.body.find(b"\n\n")
            if end < 0:
                return
            block = bytes(self.body[:end])
            del self.body[:end + 2]
            kind, _, data = event_fields(block)
            if kind == "snapshot":
                self.snapshot = True
            elif kind == "change":
                self.changes += 1
                self.change_bytes += len(block) + 2
                keys = set(json.loads(b"\n".join(data))) - {"id"}
                self.foreign += len(keys - self.fields)


def main():
    positional, flags = [], {}
    arguments = sys.argv[1:]
    while arguments:
        argument = arguments.pop(0)
        if argument.startswith("--"):
            flags[argument[2:]] = int(arguments.pop(0))
        else:
            positional.append(argument)
    if len(positional) < 2:
        raise SystemExit(__doc__)
    port, books = int(positional[0]), int(positional[1])
    subscribers = int(positional[2]) if len(positional) > 2 else 120
    writes = int(positional[3]) if len(positional) > 3 else 300
    seed = int(positional[4]) if len(positional) > 4 else 7
    rng = random.Random(seed)
    watched = [book_id(1 + n * (books // BOOKS_WATCHED)) for n in range(BOOKS_WATCHED)]

    streams = [Stream(port, watched[n % BOOKS_WATCHED], FIELD_SETS[(n // BOOKS_WATCHED) % len(FIELD_SETS)])
               for n in range(subscribers)]
    selector = selectors.DefaultSelector()
    for stream in streams:
        selector.register(stream.socket, selectors.EVENT_READ, stream)

    def pump(until):
        quiet_since = time.monotonic()
        while time.monotonic() < until:
            events = selector.select(timeout=0.05)
            for key, _ in events:
                data = key.data.socket.recv(65536)
                if data:
                    key.data.feed(data)
                    quiet_since = time.monotonic()
            if not events and time.monotonic() - quiet_since > 0.5:
                return

    deadline = time.monotonic() + 30
    while not all(stream.snapshot for stream in streams):
        if time.monotonic() > deadline:
            raise SystemExit("overobserve: not every stream got its snapshot")
        pump(time.monotonic() + 0.2)

    client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    expected = 0
    push_events = 0
    push_bytes = 0
    per_book = {book: [s for s in streams if s.book == book] for book in watched}
    for n in range(writes):
        book = rng.choice(watched)
        field = rng.choice(FIELDS)
        value = {
            "title": "Title %d" % n, "author": "Author %d" % n, "isbn": isbn13(rng),
            "publishedYear": 1000 + n, "available": n % 2 == 0,
        }[field]
        client.request("PATCH", "/books/" + book, body=json.dumps({field: value}),
                       headers={"Content-Type": "application/json"})
        response = client.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit("overobserve: PATCH failed: %d %s" % (response.status, body[:200]))
        expected += sum(1 for s in per_book[book] if field in s.fields)
        # Push-everything: every subscriber of the book gets the whole book after every change
        # (framed like our events, with a 6-digit id).
        push_events += len(per_book[book])
        push_bytes += len(per_book[book]) * (len(body) + len("event: change\nid: 000000\ndata: \n\n"))
        pump(time.monotonic() + 0.001)
    pump(time.monotonic() + 10)

    delivered = sum(s.changes for s in streams)
    result = {
        "subscribers": subscribers,
        "books": BOOKS_WATCHED,
        "field_sets": " / ".join(",".join(f) for f in FIELD_SETS),
        "writes": writes,
        "delivered": delivered,
        "expected_without_coalescing": expected,
        "push_everything": push_events,
        "delivered_bytes": sum(s.change_bytes for s in streams),
        "push_bytes": push_bytes,
        "foreign_fields": sum(s.foreign for s in streams),
    }
    print("over-observation: %d subscribers on %d books, %d single-field writes: %d events delivered "
          "(%d without coalescing), push-everything would send %d (%.1fx); %d bytes vs %d (%.1fx); "
          "fields not asked for: %d" % (
              subscribers, BOOKS_WATCHED, writes, delivered, expected, result["push_everything"],
              result["push_everything"] / max(1, delivered), result["delivered_bytes"], push_bytes,
              push_bytes / max(1, result["delivered_bytes"]), result["foreign_fields"]))
    for stream in streams:
        stream.socket.close()
    failed = bool(result["foreign_fields"] or delivered > expected)

    import overobserve_collections
    collections = overobserve_collections.run(
        port, random.Random(seed + 1), writes=flags.get("collection-writes", 400), copies=flags.get("copies", 3))
    result["collections"] = collections
    failed = failed or collections["failures"] > 0
    print("JSON " + json.dumps(result))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
