#!/usr/bin/env python3
"""Soak test for library-server: sustained REST load and churning event streams, then invariants.

Starts its own server (``--port 0``, a temporary database, ``--log-level warning``), seeds a few
libraries and a couple of hundred books, and for the requested duration runs, all on 127.0.0.1:

  * REST load from LOAD_THREADS threads on keep-alive connections: creates, GETs (some with
    ``fields=`` or ``If-None-Match``), paged lists (no item may repeat across pages), PATCHes
    (title, author, available, isbn and publishedYear set or cleared with null, moves to another
    library), PUTs, deletes of books and, every LIBRARY_DELETE_EVERY seconds, of a whole library;
    plus invalid requests (broken JSON, unknown ids and fields, failed validation, stale If-Match,
    wrong method or media type), each of which must get its own 4xx;
  * SUBSCRIBERS threads, each following random books' and libraries' event streams with random
    ``fields=`` selections (none at all, a few fields, ``books``, ``books.title`` style member
    fields). Each keeps the model from its events (snapshot, then ``change`` events, for libraries
    the ``books`` added/removed/changed parts) and drops after a random time: by closing (some with
    a reset), or by reconnecting with ``Last-Event-ID`` (header or ``?lastEventId=``) and going on
    with the same model. Some read slowly through a small receive buffer so the server has to
    coalesce their events. WATCHERS of them instead follow one library's name or address for as
    long as it lives, so a library stays watched while the others' field selections on it change;
  * every SAMPLE_EVERY seconds a sample of the server's RSS (VmRSS, split into RssAnon and
    RssFile), open file descriptors, CPU time, and the gauges ``library_http_open_connections``,
    ``library_sse_subscribers``, ``library_heap_in_use_bytes``, ``library_heap_free_bytes`` and
    ``library_sqlite_memory_bytes``.

Every event is checked as it arrives: it carries ``id`` plus only requested fields (a snapshot all
of them), a change is not empty, event ids grow strictly on one subscription (across resumes too),
a resume gets no snapshot while the server's history still covers its Last-Event-ID, member
additions are new members and removals/changes name current ones, and a ``delete`` carries just
the id and is followed by the end of the stream.

At the end the load stops, the subscribers still connected read until no event has come for
QUIET_SECONDS, and then:
  (a) each one's model equals the resource read back with GET, for exactly its fields (a lost,
      duplicated or misapplied event shows up here), and no event ever broke the rules above;
  (b) a subscriber whose resource is gone got a ``delete`` event and its stream ended, also when
      it was reconnecting at that moment: a resume across the deletion replays it (a 404 is
      accepted, and checked against GET, only once the change log may no longer hold it);
  (c) memory, CPU and descriptors are flat: the median of malloc's bytes in use in the last third
      of the load samples is at most 10 % + 3 MiB above that of the middle third (the first third
      is warm-up), and so is the resident heap beyond malloc's free pool (RssAnon minus the bytes
      malloc holds freed for reuse, which the heap trimmer bounds: checked under 72 MiB); the
      cheapest sample of server CPU time per request in the last third at most CPU_GROWTH times
      the median of the middle third (work that grows with the number of writes served raises
      every later sample; a busy neighbour only some), the median FD count of the
      last third at most FD_SLACK above the middle third, and once every client is gone the FD
      count is back within FD_SLACK_IDLE of the count before the load;
  (d) with every client gone, ``library_sse_subscribers`` is 0 and
      ``library_http_open_connections`` at most 2 (the scrape's own connection counts);
  (e) no response was a 5xx (as seen by the clients and by the server's request counters), no
      request got a status it should not have, no connection broke under a request, and the server
      logged no ``error`` or ``critical`` line;
  (f) the server exits 0 on SIGTERM.
A soak is what finds leaks (memory, descriptors, subscribers never unregistered) and races between
writes and streams that short tests miss; the state check is what proves no event was lost.

Usage: scripts/soak.py SERVER_BINARY [--seconds N] [--seed S]   (default 600 s; CI uses about 60)
Prints the samples as a table, one ``ok - ...`` or ``FAIL - ...`` line per check, then
``soak: N passed, M failed``; exits 1 when anything failed. A watchdog stops everything (exit 2)
if the run takes more than N + WATCHDOG_MARGIN seconds.
"""

import argparse
import http.client
import json
import os
import random
import re
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid
from collections import deque
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (  # noqa: E402
    HOST, Report, Server, dechunk, next_event, parse_headers, parse_metrics, shorten, start_watchdog)

NAME = "soak"
IO_TIMEOUT = 10.0  # seconds for any one socket operation
WATCHDOG_MARGIN = 240  # seconds allowed beyond --seconds for seeding, settling and checks
SAMPLE_EVERY = 5.0
LOAD_THREADS = 3
SUBSCRIBERS = 16
WATCHERS = 2  # of the subscribers, those that follow one library's name for as long as it lives
LIBRARIES = 5
SEED_BOOKS = 200
TARGET_BOOKS = 300
LIBRARY_DELETE_EVERY = 20.0  # seconds between deletions of a whole library
QUIET_SECONDS = 3.0  # no event for this long after the load means the subscribers caught up
SETTLE_LIMIT = 60.0  # seconds the subscribers get to catch up
FD_SLACK = 8  # FDs the last third of the load may hold above the middle third
FD_SLACK_IDLE = 2  # FDs the idle server may hold above the count before the load
CPU_GROWTH = 1.3  # how much more CPU per request the last third of the load may cost than the middle
MAX_EXAMPLES = 5  # examples printed per kind of problem
HISTORY = 10_000  # changes the server keeps for resuming (its --history default)
LATEST_SEEN = [0]  # the highest event id any subscriber has seen: a lower bound of the server's latest

BOOK_FIELDS = ["libraryId", "title", "author", "isbn", "publishedYear", "available", "version",
               "createdAt", "updatedAt"]
LIBRARY_FIELDS = ["name", "address", "bookCount", "version", "createdAt", "updatedAt"]
WORDS = ["Dune", "Emma", "Ulysses", "Émile", "Война", "書物", "🦉 Owl", 'Quote"d', "back\\slash",
         "Mañana", "Kafka", "Zürich", "naïve", "Ἰλιάς"]
AUTHORS = ["", "Frank Herbert", "Jane Austen", "James Joyce", "Лев Толстой", "紫式部", "O'Brien"]


# --- reporting ------------------------------------------------------------------------------


class Tally:
    """Thread-safe counts, and the first few examples of each kind of problem."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.examples = {}

    def add(self, kind, example=None):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if example is not None and len(self.examples.setdefault(kind, [])) < MAX_EXAMPLES:
                self.examples[kind].append(example)

    def count(self, kind):
        with self.lock:
            return self.counts.get(kind, 0)

    def kinds(self, prefix):
        with self.lock:
            return {kind: count for kind, count in self.counts.items() if kind.startswith(prefix)}

    def describe(self, kind):
        with self.lock:
            examples = self.examples.get(kind, [])
        return "; ".join(shorten(example, 300) for example in examples)


# Kinds counted in the shared tally:
#   status:<code>         every response status seen by a client (REST, metrics, stream openings)
#   unexpected-status     a response whose status the request should not have got
#   transport             a request that broke (reset, timeout, garbage) or a stream that could not open
#   violation:<what>      an event or list that broke the contract
#   thread-crash          a client thread died of an exception
#   5xx                   a 5xx response (REST or stream)
#   events:<kind>, deletes seen, gone when resuming, resumes, subscriptions, ...: for the report


# --- REST client ----------------------------------------------------------------------------


@dataclass
class Response:
    status: int  # 0 when the request broke
    headers: dict
    body: object  # parsed JSON, or None
    text: str = ""


class Api:
    """One keep-alive connection; every status goes into the tally, every breakage too."""

    def __init__(self, port, tally):
        self.port = port
        self.tally = tally
        self.connection = None

    def call(self, method, path, body=None, headers=None, raw=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        sent = {"Content-Type": "application/json"} if data is not None else {}
        sent.update(headers or {})
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(HOST, self.port, timeout=IO_TIMEOUT)
            self.connection.request(method, path, body=data, headers=sent)
            response = self.connection.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as error:
            self.close()
            self.tally.add("transport", f"{method} {path}: {error!r}")
            return Response(0, {}, None)
        received = {name.lower(): value for name, value in response.getheaders()}
        if received.get("connection", "").lower() == "close":
            self.close()
        self.tally.add(f"status:{response.status}")
        if response.status >= 500:
            self.tally.add("5xx", f"{method} {path} -> {response.status} {payload[:200]!r}")
        parsed = None
        if payload and "json" in received.get("content-type", ""):
            try:
                parsed = json.loads(payload)
            except ValueError:
                self.tally.add("violation:unparsable JSON response", f"{method} {path}: {payload[:100]!r}")
        return Response(response.status, received, parsed, payload.decode("utf-8", "replace"))

    def expect(self, response, allowed, what):
        """Notes `response` as unexpected unless its status is one of `allowed` (a broken request
        is already counted as a transport problem)."""
        if response.status and response.status not in allowed:
            detail = response.body.get("detail") if isinstance(response.body, dict) else response.body
            self.tally.add("unexpected-status", f"{what}: got {response.status}, expected {sorted(allowed)} ({detail})")
        return response.status in allowed

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def all_pages(api, path, limit=500):
    """Every item of a list (None if it is gone); an item repeated across pages is a violation."""
    items, seen, cursor = [], set(), None
    separator = "&" if "?" in path else "?"
    while True:
        query = f"{separator}limit={limit}" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
        response = api.call("GET", path + query)
        if response.status != 200:
            return None
        for item in response.body["items"]:
            if item["id"] in seen:
                api.tally.add("violation:list repeated an item", f"{path}: {item['id']}")
            seen.add(item["id"])
            items.append(item)
        cursor = response.body.get("nextCursor")
        if not cursor:
            return items


# --- what the load knows --------------------------------------------------------------------


class World:
    """The ids the load believes exist; the server is the truth, so a stale id just gets a 404."""

    def __init__(self):
        self.lock = threading.Lock()
        self.libraries = []
        self.books = {}  # id -> library id
        self.last_library_delete = time.monotonic()

    def add_library(self, library_id):
        with self.lock:
            self.libraries.append(library_id)

    def remove_library(self, library_id):
        with self.lock:
            if library_id in self.libraries:
                self.libraries.remove(library_id)
            self.books = {book: library for book, library in self.books.items() if library != library_id}

    def library_count(self):
        with self.lock:
            return len(self.libraries)

    def claim_library_delete(self):
        """Whether it is time to delete a library (at most one per LIBRARY_DELETE_EVERY seconds)."""
        with self.lock:
            if time.monotonic() - self.last_library_delete < LIBRARY_DELETE_EVERY:
                return False
            self.last_library_delete = time.monotonic()
            return True

    def set_book(self, book_id, library_id):
        with self.lock:
            self.books[book_id] = library_id

    def forget_book(self, book_id):
        with self.lock:
            self.books.pop(book_id, None)

    def book_count(self):
        with self.lock:
            return len(self.books)

    def random_library(self, rng):
        with self.lock:
            return rng.choice(self.libraries) if self.libraries else None

    def random_book(self, rng):
        with self.lock:
            return rng.choice(list(self.books)) if self.books else None


# --- request bodies ---------------------------------------------------------------------------


def isbn13(rng):
    digits = [9, 7, 8] + [rng.randrange(10) for _ in range(9)]
    digits.append(-sum(d * (3 if i % 2 else 1) for i, d in enumerate(digits)) % 10)
    text = "".join(map(str, digits))
    return rng.choice([text, f"{text[:3]}-{text[3]}-{text[4:8]}-{text[8:12]}-{text[12]}"])


def isbn10(rng):
    digits = [rng.randrange(10) for _ in range(9)]
    check = -sum((10 - i) * d for i, d in enumerate(digits)) % 11
    return "".join(map(str, digits)) + ("X" if check == 10 else str(check))


def title(rng):
    return f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randrange(1000)}"


BOOK_VALUES = {
    "title": title,
    "author": lambda rng: rng.choice(AUTHORS),
    "isbn": lambda rng: rng.choice([None, isbn13(rng), isbn10(rng)]),
    "publishedYear": lambda rng: rng.choice([None, rng.randint(-9999, 9999)]),
    "available": lambda rng: rng.random() < 0.5,
}


def book_patch(rng):
    """A merge patch of 1 to 3 writable fields (nulls included)."""
    return {name: BOOK_VALUES[name](rng) for name in rng.sample(sorted(BOOK_VALUES), rng.randint(1, 3))}


def book_replacement(rng, library_id):
    """A full PUT body: title, library and some optional fields (the rest take their defaults)."""
    body = {"libraryId": library_id, "title": title(rng)}
    for name in rng.sample(["author", "isbn", "publishedYear", "available"], rng.randint(0, 4)):
        body[name] = BOOK_VALUES[name](rng)
    return body


def library_body(rng):
    return {"name": f"{rng.choice(WORDS)} Library {rng.randrange(100)}",
            "address": rng.choice([None, f"{rng.randrange(1, 999)} {rng.choice(WORDS)} Street"])}


# --- the REST load ----------------------------------------------------------------------------


class ClientThread(threading.Thread):
    """A thread whose uncaught exception is a failure of the run, not a silent death."""

    def __init__(self, tally, name):
        super().__init__(name=name, daemon=True)
        self.tally = tally

    def run(self):
        try:
            self.body()
        except Exception:  # noqa: BLE001 - reported as a failed check
            self.tally.add("thread-crash", f"{self.name}: {traceback.format_exc()}")


class LoadThread(ClientThread):
    """Valid and invalid REST requests in a weighted random mix until `stop` is set."""

    def __init__(self, index, port, world, tally, stop, seed):
        super().__init__(tally, f"load-{index}")
        self.rng = random.Random(f"{seed}-load-{index}")
        self.api = Api(port, tally)
        self.world = world
        self.stop = stop
        self.operations = [
            (self.create_book, 10), (self.get_book, 14), (self.list_books, 4), (self.patch_book, 20),
            (self.put_book, 6), (self.move_book, 4), (self.change_library, 5), (self.delete_book, 4),
            (self.delete_library, 1), (self.conditional, 4), (self.invalid, 8),
        ]

    def body(self):
        functions, weights = zip(*self.operations)
        while not self.stop.is_set():
            self.rng.choices(functions, weights)[0]()
        self.api.close()

    def book_or_none(self):
        return self.world.random_book(self.rng)

    def create_book(self):
        library = self.world.random_library(self.rng)
        if library is None or self.world.book_count() >= TARGET_BOOKS:
            return
        body = book_replacement(self.rng, library)
        if self.rng.random() < 0.5:
            del body["libraryId"]
            response = self.api.call("POST", f"/libraries/{library}/books", body)
            self.api.expect(response, {201, 404}, "POST /libraries/{id}/books")
        else:
            response = self.api.call("POST", "/books", body)
            self.api.expect(response, {201, 422}, "POST /books")  # 422: the library was just deleted
        if response.status == 201:
            self.world.set_book(response.body["id"], library)

    def get_book(self):
        book = self.book_or_none()
        if book is None:
            return
        fields = self.rng.sample(BOOK_FIELDS, self.rng.randint(1, 3)) if self.rng.random() < 0.3 else None
        path = f"/books/{book}" + (f"?fields={','.join(fields)}" if fields else "")
        response = self.api.call("GET", path)
        self.api.expect(response, {200, 404}, "GET /books/{id}")
        if response.status == 404:
            self.world.forget_book(book)
        elif response.status == 200 and fields and set(response.body) != {"id", *fields}:
            self.tally.add("violation:GET fields= returned other fields", f"{path}: {sorted(response.body)}")

    def list_books(self):
        library = self.world.random_library(self.rng)
        if library is None:
            return
        path = self.rng.choice([f"/libraries/{library}/books", f"/books?libraryId={library}",
                                "/books?available=true", "/books", "/libraries"])
        seen = set()
        cursor = None
        for _ in range(40):
            query = f"limit={self.rng.choice([1, 7, 50, 500])}"
            if cursor:
                query += f"&cursor={urllib.parse.quote(cursor)}"
            response = self.api.call("GET", path + ("&" if "?" in path else "?") + query)
            # A library deleted by another thread mid-paging is a 404: the listing ends there.
            if not self.api.expect(response, {200, 404} if library in path else {200}, f"GET {path}") \
                    or response.status != 200:
                return
            for item in response.body["items"]:
                if item["id"] in seen:
                    self.tally.add("violation:list repeated an item", f"{path}: {item['id']}")
                seen.add(item["id"])
            cursor = response.body["nextCursor"]
            if cursor is None:
                return

    def patch_book(self):
        book = self.book_or_none()
        if book is not None:
            media_type = self.rng.choice(["application/json", "application/merge-patch+json"])
            response = self.api.call("PATCH", f"/books/{book}", book_patch(self.rng), {"Content-Type": media_type})
            self.api.expect(response, {200, 404}, "PATCH /books/{id}")

    def put_book(self):
        book, library = self.book_or_none(), self.world.random_library(self.rng)
        if book is not None and library is not None:
            response = self.api.call("PUT", f"/books/{book}", book_replacement(self.rng, library))
            if self.api.expect(response, {200, 404, 422}, "PUT /books/{id}") and response.status == 200:
                self.world.set_book(book, library)

    def move_book(self):
        book, library = self.book_or_none(), self.world.random_library(self.rng)
        if book is not None and library is not None:
            body = {"libraryId": library, **(book_patch(self.rng) if self.rng.random() < 0.5 else {})}
            response = self.api.call("PATCH", f"/books/{book}", body)
            if self.api.expect(response, {200, 404, 422}, "PATCH /books/{id} (move)") and response.status == 200:
                self.world.set_book(book, library)

    def change_library(self):
        library = self.world.random_library(self.rng)
        if library is None:
            return
        if self.rng.random() < 0.6:
            body = self.rng.choice([{"name": library_body(self.rng)["name"]}, {"address": None},
                                    {"address": library_body(self.rng)["address"] or "1 Main St"}])
            response = self.api.call("PATCH", f"/libraries/{library}", body)
        else:
            response = self.api.call("PUT", f"/libraries/{library}", library_body(self.rng))
        self.api.expect(response, {200, 404}, "PATCH/PUT /libraries/{id}")

    def delete_book(self):
        book = self.book_or_none()
        if book is not None and self.world.book_count() > TARGET_BOOKS // 2:
            response = self.api.call("DELETE", f"/books/{book}")
            self.api.expect(response, {204, 404}, "DELETE /books/{id}")
            self.world.forget_book(book)

    def delete_library(self):
        if self.world.library_count() < LIBRARIES or not self.world.claim_library_delete():
            return
        library = self.world.random_library(self.rng)
        response = self.api.call("DELETE", f"/libraries/{library}")
        self.api.expect(response, {204, 404}, "DELETE /libraries/{id}")
        self.world.remove_library(library)
        self.tally.add("libraries deleted")
        created = self.api.call("POST", "/libraries", library_body(self.rng))
        if self.api.expect(created, {201}, "POST /libraries"):
            self.world.add_library(created.body["id"])

    def conditional(self):
        book = self.book_or_none()
        if book is None:
            return
        response = self.api.call("GET", f"/books/{book}")
        if not self.api.expect(response, {200, 404}, "GET /books/{id}") or response.status != 200:
            return
        etag = response.headers["etag"]
        if self.rng.random() < 0.5:
            again = self.api.call("GET", f"/books/{book}", headers={"If-None-Match": etag})
            self.api.expect(again, {304, 200, 404}, "GET /books/{id} If-None-Match current")  # 200/404: raced
        else:
            again = self.api.call("PATCH", f"/books/{book}", {"available": self.rng.random() < 0.5},
                                  {"If-Match": etag})
            self.api.expect(again, {200, 412, 404}, "PATCH /books/{id} If-Match current")  # 412/404: raced

    def invalid(self):
        """One request that is wrong, and the 4xx it must get (404 too when the resource it names
        may have been deleted meanwhile)."""
        book = self.book_or_none() or str(uuid.uuid4())
        library = self.world.random_library(self.rng) or str(uuid.uuid4())
        unknown = str(uuid.uuid4())
        method, path, raw, headers, allowed = self.rng.choice([
            ("POST", "/books", b'{"title": "x", "libraryId": ', None, {400}),
            ("POST", "/libraries", b'{"name": "a", "name": "b"}', None, {400}),
            ("POST", "/libraries", b'["not", "an", "object"]', None, {400, 422}),
            ("GET", f"/books/{unknown}", None, None, {404}),
            ("PATCH", f"/books/{unknown}", b'{"title": "x"}', None, {404}),
            ("DELETE", f"/libraries/{unknown}", None, None, {404}),
            ("GET", f"/books/{unknown}/events", None, None, {404}),
            ("GET", "/books/not-a-uuid", None, None, {400}),
            ("PATCH", f"/books/{book}", b'{"colour": "red"}', None, {422, 404}),
            ("PATCH", f"/books/{book}", b'{"isbn": "978-0-00-000000-1"}', None, {422, 404}),
            ("PATCH", f"/books/{book}", b'{"publishedYear": 12345}', None, {422, 404}),
            ("PATCH", f"/books/{book}", b'{"title": null}', None, {422, 404}),
            ("PATCH", f"/books/{book}", f'{{"libraryId": "{unknown}"}}'.encode(), None, {422, 404}),
            ("PATCH", f"/books/{book}", b'{"title": "x"}', {"If-Match": '"0"'}, {412, 404}),
            ("PUT", f"/libraries/{library}", b'{"address": "no name"}', None, {422, 404}),
            ("POST", f"/libraries/{library}/books", b'{"title": ""}', None, {422, 404}),
            ("POST", "/books", b'{"title": "x"}', {"Content-Type": "text/plain"}, {415}),
            ("GET", "/books?limit=0", None, None, {400}),
            ("GET", "/books?fields=nope", None, None, {400}),
            ("GET", f"/books/{book}/events?fields=nope", None, None, {400, 404}),
            ("GET", f"/libraries/{library}/events?fields=books.nope", None, None, {400, 404}),
            ("DELETE", "/libraries", None, None, {405}),
        ])
        response = self.api.call(method, path, raw=raw, headers=headers)
        self.api.expect(response, allowed, f"invalid {method} {path} {raw!r}")
        self.tally.add("invalid requests")


def populate(port, tally, world, rng):
    api = Api(port, tally)
    for _ in range(LIBRARIES):
        response = api.call("POST", "/libraries", library_body(rng))
        world.add_library(response.body["id"])
    for _ in range(SEED_BOOKS):
        library = world.random_library(rng)
        response = api.call("POST", "/books", book_replacement(rng, library))
        world.set_book(response.body["id"], library)
    api.close()


# --- event streams --------------------------------------------------------------------------


class StreamEnded(Exception):
    """The server ended the stream (terminal chunk, close or reset)."""


@dataclass
class Event:
    kind: str
    id: int
    data: object


class EventStream:
    """One SSE response read off a raw socket: head, chunked body, then events one at a time."""

    def __init__(self, port, path, last_event_id=None, small_buffer=False):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if small_buffer:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(IO_TIMEOUT)
        self.sock.connect((HOST, port))
        extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nAccept: text/event-stream\r\n"
                          f"{extra}\r\n".encode())
        self.raw = b""  # received, not yet de-chunked
        self.text = b""  # de-chunked, not yet parsed into events
        self.ended = False
        self.status, self.headers, self.problem = self._read_head()

    def _recv(self, timeout):
        """Reads what is there within `timeout`; False if nothing came. Raises StreamEnded."""
        self.sock.settimeout(max(0.01, min(timeout, IO_TIMEOUT)))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        except ConnectionResetError as error:
            raise StreamEnded("reset") from error
        if not data:
            raise StreamEnded("closed")
        self.raw += data
        return True

    def _read_head(self):
        deadline = time.monotonic() + IO_TIMEOUT
        while b"\r\n\r\n" not in self.raw:
            if not self._recv(deadline - time.monotonic()) and time.monotonic() >= deadline:
                raise TimeoutError("no response head")
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        status = int(head.split(b"\r\n", 1)[0].split()[1])
        headers = parse_headers(head)
        if status == 200:
            return status, headers, None
        length = int(headers.get("content-length", "0"))
        while len(self.raw) < length:
            if not self._recv(deadline - time.monotonic()) and time.monotonic() >= deadline:
                raise TimeoutError("incomplete error body")
        return status, headers, json.loads(self.raw[:length]) if length else None

    def _dechunk(self):
        dechunk(self)

    def _parse(self):
        """The next complete event in `text`, or None; comments and `retry:` blocks are skipped."""
        event = next_event(self)
        return Event(*event) if event else None

    def next_event(self, timeout):
        """The next event within `timeout` seconds, or None. Raises StreamEnded."""
        deadline = time.monotonic() + timeout
        while True:
            self._dechunk()
            event = self._parse()
            if event is not None:
                return event
            if self.ended:
                raise StreamEnded("terminal chunk")
            if not self._recv(deadline - time.monotonic()):
                return None

    def close(self, abrupt=False):
        if abrupt:  # a reset instead of a FIN, as a crashed client or a dropped network would
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


# --- subscribers' models ----------------------------------------------------------------------


def book_selection(rng):
    """`fields=` for a book stream: None (every field) or a few field names, sometimes with `id`."""
    if rng.random() < 0.2:
        return None
    names = rng.sample(BOOK_FIELDS, rng.randint(1, 4))
    return names + ["id"] if rng.random() < 0.1 else names


def library_selection(rng):
    """`fields=` for a library stream: None (everything); only its own fields (often just one, as a
    view showing a name asks); or its membership (`books`, `books.<field>`) and a few own fields."""
    shape = rng.random()
    if shape < 0.2:
        return None
    if shape < 0.5:
        return rng.sample(LIBRARY_FIELDS, rng.choice([1, 1, 2, 3]))
    names = rng.sample(LIBRARY_FIELDS, rng.randint(0, 2))
    membership = rng.choice(["books", "member fields", "both"])
    if membership in ("books", "both"):
        names.append("books")
    if membership in ("member fields", "both"):
        names += [f"books.{name}" for name in rng.sample(BOOK_FIELDS, rng.randint(1, 3))]
    return names


class View:
    """A subscriber's model of one resource, built only from the events it receives."""

    collection = ""  # the path segment: "books" or "libraries"
    noun = ""

    def __init__(self, resource_id, selection):
        self.id = resource_id
        self.selection = selection
        self.state = None
        self.last_event_id = None
        self.resumed_after = None  # the Last-Event-ID the current connection sent, if any
        self.log = deque(maxlen=8)  # the latest connections and events, shown when something is wrong

    @property
    def path(self):
        query = "" if self.selection is None else "?fields=" + ",".join(self.selection)
        return f"/{self.collection}/{self.id}/events{query}"

    def describe(self, history=False):
        shown = "(all)" if self.selection is None else ",".join(self.selection)
        text = f"{self.noun} {self.id[:8]} fields={shown}"
        return text + f" [{', '.join(self.log)}]" if history else text

    def apply(self, event):
        """Applies `event`; returns what was wrong with it, each as "kind: detail"."""
        self.log.append(f"{event.kind} {event.id}")
        problems = []
        if self.last_event_id is not None and (event.id is None or event.id <= self.last_event_id):
            problems.append(f"event id not increasing: {event.id} after {self.last_event_id}")
        self.last_event_id = event.id if event.id is not None else self.last_event_id
        if not isinstance(event.data, dict) or event.data.get("id") != self.id:
            return problems + [f"event for another id: {event.kind} {event.data}"]
        if event.kind == "delete":
            return problems + ([] if event.data == {"id": self.id} else [f"delete with more than the id: {event.data}"])
        if event.kind == "change" and self.state is None:
            return problems + [f"change before any snapshot: {event.data}"]
        if event.kind == "snapshot" and self.resumed_after is not None and event.id - self.resumed_after < HISTORY:
            problems.append(f"snapshot on a resume the history covers: after {self.resumed_after}")
        if event.kind not in ("snapshot", "change"):
            return problems + [f"unknown event kind: {event.kind!r}"]
        return problems + self.apply_fields(event.kind, event.data)


class BookView(View):
    collection, noun = "books", "book"

    def __init__(self, book_id, selection):
        super().__init__(book_id, selection)
        self.fields = set(BOOK_FIELDS) if selection is None else set(selection) - {"id"}

    def apply_fields(self, kind, data):
        values = {name: value for name, value in data.items() if name != "id"}
        extra = set(values) - self.fields
        problems = [f"unrequested field: {kind} has {sorted(extra)}"] if extra else []
        if kind == "snapshot":
            if set(values) != self.fields:
                problems.append(f"snapshot lacks a requested field: {sorted(self.fields - set(values))}")
            self.state = {}
        elif not values:
            problems.append(f"change with no field: {data}")
        self.state.update({name: value for name, value in values.items() if name in self.fields})
        return problems

    def current(self, api):
        """The state GET reports for this view's fields, or None when the book is gone."""
        response = api.call("GET", f"/books/{self.id}")
        return None if response.status == 404 else {name: response.body[name] for name in self.fields}


class LibraryView(View):
    collection, noun = "libraries", "library"

    def __init__(self, library_id, selection):
        super().__init__(library_id, selection)
        names = LIBRARY_FIELDS + ["books"] if selection is None else selection
        self.fields = {name for name in names if name in LIBRARY_FIELDS}
        self.members = any(name == "books" or name.startswith("books.") for name in names)
        self.member_fields = {name[6:] for name in names if name.startswith("books.")}
        self.allowed = self.fields | ({"books"} if self.members else set())

    def apply_fields(self, kind, data):
        own = {name: value for name, value in data.items() if name not in ("id", "books")}
        keys = set(data) - {"id"}
        problems = [f"unrequested field: {kind} has {sorted(keys - self.allowed)}"] if keys - self.allowed else []
        if kind == "snapshot":
            if keys != self.allowed:
                problems.append(f"snapshot lacks a requested field: {sorted(self.allowed - keys)}")
            self.state = {"fields": {}, "members": {}}
            for member in data.get("books", []) if self.members else []:
                problems += self.member_problems(member, exact=True)
                self.state["members"][member["id"]] = self.member_values(member)
        elif not keys:
            problems.append(f"change with no field: {data}")
        self.state["fields"].update({name: value for name, value in own.items() if name in self.fields})
        if kind == "change" and "books" in data and self.members:
            problems += self.apply_membership(data["books"])
        return problems

    def apply_membership(self, change):
        problems = []
        members = self.state["members"]
        if not isinstance(change, dict) or not change or set(change) - {"added", "removed", "changed"}:
            return [f"books change is not added/removed/changed: {change}"]
        if any(not part for part in change.values()):
            problems.append(f"books change with an empty part: {change}")
        for removed in change.get("removed", []):
            if members.pop(removed, None) is None:
                problems.append(f"removed a book it did not have: {removed}")
        for added in change.get("added", []):
            problems += self.member_problems(added, exact=True)
            if added["id"] in members:
                problems.append(f"added a book it already had: {added['id']}")
            members[added["id"]] = self.member_values(added)
        for changed in change.get("changed", []):
            problems += self.member_problems(changed, exact=False)
            if changed["id"] not in members:
                problems.append(f"changed a book it did not have: {changed['id']}")
            members.setdefault(changed["id"], {}).update(self.member_values(changed))
        return problems

    def member_problems(self, member, exact):
        keys = set(member) - {"id"}
        if keys - self.member_fields:
            return [f"unrequested field: member has {sorted(keys - self.member_fields)}"]
        if exact and keys != self.member_fields:
            return [f"member lacks a requested field: {sorted(self.member_fields - keys)}"]
        return []

    def member_values(self, member):
        return {name: value for name, value in member.items() if name in self.member_fields}

    def current(self, api):
        """The state GET reports for this view's fields and members, or None when it is gone."""
        response = api.call("GET", f"/libraries/{self.id}")
        books = all_pages(api, f"/libraries/{self.id}/books") if response.status == 200 else None
        if books is None:
            return None
        members = {book["id"]: {name: book[name] for name in self.member_fields} for book in books}
        return {"fields": {name: response.body[name] for name in self.fields},
                "members": members if self.members else {}}


def state_difference(view, current):
    """What differs between a view's model and GET's, briefly."""
    if view.state is None:
        return "no snapshot ever came"
    if isinstance(view, BookView):
        return {name: (view.state.get(name), value) for name, value in current.items() if view.state.get(name) != value}
    ours, theirs = view.state["members"], current["members"]
    return {
        "fields": {name: (view.state["fields"].get(name), value) for name, value in current["fields"].items()
                   if view.state["fields"].get(name) != value},
        "missing members": sorted(set(theirs) - set(ours))[:3],
        "extra members": sorted(set(ours) - set(theirs))[:3],
        "member values": {member: (ours[member], theirs[member]) for member in set(ours) & set(theirs)
                          if ours[member] != theirs[member]},
    }


# --- subscribers ------------------------------------------------------------------------------


class Phase:
    """Where the run is, shared by every thread."""

    def __init__(self):
        self.load_done = threading.Event()
        self.freeze = threading.Event()
        self.last_event = time.monotonic()

    def touch(self):
        self.last_event = time.monotonic()


class Subscriber(ClientThread):
    """Follows random streams one after another until the load ends; the stream it holds then is
    left open (in `final`) for the end-of-run checks.

    A watcher instead follows one library's name or address for as long as the library lives,
    resuming every half minute or so, as a sidebar would; the short-lived subscribers come and go
    around it, so a library stays watched while what its watchers ask for changes."""

    def __init__(self, index, port, world, tally, phase, watcher, seed):
        super().__init__(tally, f"{'watcher' if watcher else 'subscriber'}-{index}")
        self.rng = random.Random(f"{seed}-subscriber-{index}")
        self.port = port
        self.world = world
        self.phase = phase
        self.watcher = watcher
        self.final = None  # (view, stream) still open when the run froze

    def body(self):
        while not self.phase.load_done.is_set():
            view = self.pick_view()
            if view is None:
                time.sleep(0.1)
                continue
            self.follow(view, slow=not self.watcher and self.rng.random() < 0.15)

    def pick_view(self):
        if self.watcher:
            target = self.world.random_library(self.rng)
            return LibraryView(target, [self.rng.choice(["name", "address"])]) if target else None
        if self.rng.random() < 0.5:
            target = self.world.random_book(self.rng)
            return BookView(target, book_selection(self.rng)) if target else None
        target = self.world.random_library(self.rng)
        return LibraryView(target, library_selection(self.rng)) if target else None

    def open(self, view, slow, resume):
        """The stream, or None when the resource is gone (checked with GET)."""
        path, last_id = view.path, None
        if resume and view.last_event_id is not None:
            if self.rng.random() < 0.5:
                last_id = view.last_event_id
            else:
                path += ("&" if "?" in path else "?") + f"lastEventId={view.last_event_id}"
        try:
            stream = EventStream(self.port, path, last_id, small_buffer=slow)
        except (OSError, StreamEnded) as error:
            self.tally.add("transport", f"GET {path}: {error!r}")
            return None
        self.tally.add(f"status:{stream.status}")
        view.resumed_after = view.last_event_id if resume else None
        view.log.append(f"{'resume' if resume else 'open'} {stream.status}"
                        + (f" after {view.last_event_id}{' (header)' if last_id else ''}" if resume else ""))
        if stream.status == 200:
            return stream
        stream.close()
        if stream.status >= 500:
            self.tally.add("5xx", f"GET {path} -> {stream.status} {stream.problem}")
        if stream.status != 404:
            self.tally.add("unexpected-status", f"GET {path}: {stream.status} {stream.problem}")
        elif self.exists(view):
            self.tally.add("violation:404 for a resource that exists", view.describe())
        elif resume and view.last_event_id is not None and LATEST_SEEN[0] - view.last_event_id < HISTORY // 2:
            # The log still holds the deletion: the server must replay up to the delete instead.
            self.tally.add("violation:404 on a resume across a deletion the history holds", view.describe())
        elif resume:
            self.tally.add("gone when resuming")
        return None

    def exists(self, view):
        """Whether GET finds the resource (on a connection of its own: one kept idle for a minute
        would be closed by the server)."""
        api = Api(self.port, self.tally)
        current = view.current(api)
        api.close()
        return current is not None

    def follow(self, view, slow):
        """One subscription, across its reconnections, until it is dropped, deleted or frozen."""
        stream = self.open(view, slow, resume=False)
        self.tally.add("subscriptions")
        while stream is not None:
            lifetime = self.rng.uniform(20, 40) if self.watcher else self.rng.uniform(1, 15)
            outcome = self.read(stream, view, slow, drop_at=time.monotonic() + lifetime)
            if outcome == "frozen":
                self.final = (view, stream)
                return
            if outcome == "deleted":
                self.tally.add("deletes seen")
                stream.close()
                return
            if outcome == "ended":
                self.tally.add(f"streams ended by the server ({'slow' if slow else 'fast'} reader)",
                               view.describe(history=True))
            stream.close(abrupt=self.rng.random() < 0.5)
            if outcome == "drop" and not self.watcher and self.rng.random() < 0.35:
                return
            self.tally.add("resumes")
            stream = self.open(view, slow, resume=True)

    def read(self, stream, view, slow, drop_at):
        """Reads events into `view` until the drop time ('drop'), a delete ('deleted'), the end of
        the stream ('ended') or the freeze ('frozen')."""
        while True:
            if self.phase.freeze.is_set():
                return "frozen"
            loading = not self.phase.load_done.is_set()
            if loading and time.monotonic() >= drop_at:
                return "drop"
            if slow and loading:
                time.sleep(self.rng.uniform(0.05, 0.6))
            try:
                event = stream.next_event(0.5)
            except StreamEnded:
                return "ended"
            if event is None:
                continue
            self.phase.touch()
            self.tally.add(f"events:{event.kind}")
            if event.id is not None and event.id > LATEST_SEEN[0]:
                LATEST_SEEN[0] = event.id  # a lower bound of the server's latest change id
            for problem in view.apply(event):
                self.tally.add(f"violation:{problem.partition(':')[0]}", f"{view.describe(history=True)}: {problem}")
            if event.kind == "delete":
                self.check_end_after_delete(stream, view)
                return "deleted"

    def check_end_after_delete(self, stream, view):
        deadline = time.monotonic() + 5
        try:
            while time.monotonic() < deadline:
                event = stream.next_event(deadline - time.monotonic())
                if event is not None:
                    self.tally.add("violation:event after delete", f"{view.describe(history=True)}: {event}")
        except StreamEnded:
            return
        self.tally.add("violation:stream open 5 s after delete", view.describe(history=True))


# --- sampling the process -------------------------------------------------------------------


@dataclass
class Sample:
    seconds: float
    phase: str
    rss_kib: int
    anon_kib: int  # the heap and stacks (RssAnon): what a leak grows
    file_kib: int  # mapped file pages (RssFile): the database's pages read through mmap, the binary
    heap_bytes: int  # malloc's bytes handed out now (the server's library_heap_in_use_bytes)
    free_bytes: int  # freed and held by malloc for reuse, not yet given back (library_heap_free_bytes)
    sqlite_bytes: int  # of which SQLite's own: its page caches, bounded by cache_size (library_sqlite_memory_bytes)
    fds: int
    cpu_seconds: float  # user + system time the server has used so far
    connections: int
    subscribers: int
    requests: int
    events: int


def scrape(port, tally):
    """The server's metrics as {name or name{labels}: value}, on a connection of its own."""
    api = Api(port, tally)
    response = api.call("GET", "/metrics")
    api.close()
    return parse_metrics(response.text) if response.status == 200 else {}


def take_sample(server, tally, started, phase):
    with open(f"/proc/{server.pid}/status") as status:
        text = status.read()
    rss, anon, mapped = (int(re.search(rf"{key}:\s+(\d+)", text).group(1)) for key in ("VmRSS", "RssAnon", "RssFile"))
    fds = len(os.listdir(f"/proc/{server.pid}/fd"))
    with open(f"/proc/{server.pid}/stat") as stat:
        user, system = stat.read().rpartition(")")[2].split()[11:13]
    cpu = (int(user) + int(system)) / os.sysconf("SC_CLK_TCK")
    metrics = scrape(server.port, tally)
    requests = sum(tally.kinds("status:").values())
    events = sum(tally.kinds("events:").values())
    return Sample(time.monotonic() - started, phase, rss, anon, mapped,
                  int(metrics.get("library_heap_in_use_bytes", -1)), int(metrics.get("library_heap_free_bytes", -1)),
                  int(metrics.get("library_sqlite_memory_bytes", -1)),
                  fds, cpu,
                  int(metrics.get("library_http_open_connections", -1)),
                  int(metrics.get("library_sse_subscribers", -1)), requests, events)


class Sampler(ClientThread):
    def __init__(self, server, tally, started, stop):
        super().__init__(tally, "sampler")
        self.server = server
        self.started = started
        self.stop = stop
        self.samples = []

    def body(self):
        while not self.stop.wait(SAMPLE_EVERY):
            self.samples.append(take_sample(self.server, self.tally, self.started, "load"))


def cpu_per_request(previous, sample):
    """Server CPU milliseconds per request answered between two samples (None without requests)."""
    requests = sample.requests - previous.requests
    return 1000 * (sample.cpu_seconds - previous.cpu_seconds) / requests if requests > 0 else None


def print_samples(samples):
    print(f"# {'t (s)':>6} {'phase':<6} {'RSS (MiB)':>9} {'anon':>6} {'file':>6} {'malloc':>6} {'free':>6} {'sqlite':>6} {'FDs':>5} {'conns':>5} {'subs':>5} {'requests':>9} "
          f"{'req/s':>6} {'CPU ms/req':>10} {'events':>8}")
    for previous, s in zip([None, *samples], samples):
        rate = (s.requests - previous.requests) / (s.seconds - previous.seconds) if previous else 0
        cost = cpu_per_request(previous, s) if previous else None
        shown_cost = "-" if cost is None else f"{cost:.2f}"
        print(f"# {s.seconds:6.0f} {s.phase:<6} {s.rss_kib / 1024:9.1f} {s.anon_kib / 1024:6.1f} {s.file_kib / 1024:6.1f} {s.heap_bytes / 2**20:6.1f} {s.free_bytes / 2**20:6.1f} {s.sqlite_bytes / 2**20:6.1f} {s.fds:5d} {s.connections:5d} "
              f"{s.subscribers:5d} {s.requests:9d} {rate:6.0f} {shown_cost:>10} {s.events:8d}")


# --- the checks -------------------------------------------------------------------------------


def wait_until_quiet(phase):
    """Waits until no subscriber has had an event for QUIET_SECONDS; returns how long it took."""
    started = time.monotonic()
    while time.monotonic() - started < SETTLE_LIMIT:
        now = time.monotonic()
        if now - started >= QUIET_SECONDS and now - phase.last_event >= QUIET_SECONDS:
            break
        time.sleep(0.2)
    return time.monotonic() - started


def final_state_verdicts(port, tally, subscribers):
    """(a) and (b) for the streams still open, as (ok, message) pairs to report with the rest:
    each model equals GET, and no resource is gone without a delete event."""
    api = Api(port, tally)
    held = [subscriber.final for subscriber in subscribers if subscriber.final]
    mismatches, missed_deletes = [], []
    for view, _ in held:
        current = view.current(api)
        if current is None:
            missed_deletes.append(view.describe(history=True))
        elif view.state != current:
            mismatches.append(f"{view.describe(history=True)}: {state_difference(view, current)}")
    api.close()
    books = sum(isinstance(view, BookView) for view, _ in held)
    connected = f"(a) {len(held)} subscribers still connected ({books} on books, {len(held) - books} on libraries)"
    if mismatches:
        shown = " | ".join(shorten(mismatch, 400) for mismatch in mismatches[:MAX_EXAMPLES])
        models = (False, f"{connected}: {len(mismatches)} differ from GET: {shown}")
    else:
        models = (True, f"{connected}: each model equals GET for exactly its fields")
    deletes = (not missed_deletes, "(b) no connected subscriber's resource is gone without a delete event"
               + (f": {missed_deletes[:MAX_EXAMPLES]}" if missed_deletes else ""))
    return [models, deletes]


DELETE_VIOLATIONS = ("violation:delete with more than the id", "violation:event after delete",
                     "violation:stream open 5 s after delete",
                     "violation:404 on a resume across a deletion the history holds")


def check_events(report, tally):
    violations = tally.kinds("violation:")
    broken = {kind: count for kind, count in violations.items() if kind not in DELETE_VIOLATIONS}
    if broken:
        report.check(False, "(a) events or lists broke the contract: " + describe_violations(tally, broken))
    else:
        events = tally.kinds("events:")
        shown = ", ".join(f"{kind[7:]} {count}" for kind, count in sorted(events.items()))
        report.check(bool(events), f"(a) every one of {sum(events.values())} events ({shown}) had only requested "
                     "fields, grew the id, and fitted the model")
    broken = {kind: count for kind, count in violations.items() if kind in DELETE_VIOLATIONS}
    if broken:
        report.check(False, "(b) deletes broke the contract: " + describe_violations(tally, broken))
    else:
        report.check(tally.count("deletes seen") > 0,
                     f"(b) {tally.count('deletes seen')} subscribers got a delete event with just the id, then the "
                     f"end of their stream (resumed ones too); {tally.count('gone when resuming')} found their resource "
                     "gone past the kept history (404, confirmed by GET) when resuming")


def describe_violations(tally, counts):
    return " | ".join(f"{kind[10:]} x{count}: {tally.describe(kind)}" for kind, count in counts.items())


def check_flat(report, samples, baseline, idle):
    load = [sample for sample in samples if sample.phase == "load"]
    third = len(load) // 3
    if third < 1:
        report.check(False, f"(c) too few samples ({len(load)}) to judge RSS, CPU and FDs; run longer")
        return
    middle, last = load[third:2 * third], load[len(load) - third:]
    # A leak grows what malloc has handed out; memory freed and kept by malloc for reuse (glibc keeps
    # freed chunks between live ones, so a busy heap's RSS creeps up while what is in use stays flat)
    # is bounded by the server's heap trimmer, which gives it back past 64 MiB. So: what is in use
    # must be flat, the resident heap beyond malloc's free pool must be flat, and the pool bounded.
    def median_mib(samples, value):
        return statistics.median(value(s) for s in samples) / 2**20

    def in_use(s):
        return s.heap_bytes

    def resident_in_use(s):
        return s.anon_kib * 1024 - s.free_bytes

    for name, value in (("heap in use (malloc)", in_use), ("resident heap beyond malloc's free pool", resident_in_use)):
        middle_mib, last_mib = median_mib(middle, value), median_mib(last, value)
        limit = middle_mib * 1.10 + 3
        report.check(last_mib <= limit, f"(c) {name} flat: median {last_mib:.1f} MiB in the last third of the load, "
                     f"{middle_mib:.1f} MiB in the middle third (limit {limit:.1f})")
    most_free = max(s.free_bytes for s in load) / 2**20
    report.check(most_free <= 64 + 8, f"(c) malloc's free pool bounded by the heap trimmer: at most {most_free:.1f} MiB "
                 "(trimmed past 64)")
    rss = [median_mib(part, lambda s: s.rss_kib * 1024) for part in (middle, last)]
    file = [median_mib(part, lambda s: s.file_kib * 1024) for part in (middle, last)]
    print(f"# RSS: median {rss[0]:.1f} MiB in the middle third, {rss[1]:.1f} in the last; of which mapped file pages "
          f"(binary, database through mmap) {file[0]:.1f} and {file[1]:.1f}")
    # The cheapest sample of the last third against the middle third's median: a cost that grew
    # raises every later sample, while a neighbour on this shared machine (which inflates the CPU
    # time of the same work: caches, SMT siblings) raises only the samples it overlaps.
    costs = [cpu_per_request(previous, sample) or 0.0 for previous, sample in zip([baseline, *load], load)]
    cost_middle = statistics.median(costs[third:2 * third])
    cost_last = min(costs[len(costs) - third:])
    report.check(cost_last <= cost_middle * CPU_GROWTH,
                 f"(c) server CPU per request flat: the cheapest sample of the last third of the load "
                 f"{cost_last:.2f} ms, the middle third's median {cost_middle:.2f} ms (limit x{CPU_GROWTH})")
    fds_middle = statistics.median(s.fds for s in middle)
    fds_last = statistics.median(s.fds for s in last)
    report.check(fds_last <= fds_middle + FD_SLACK, f"(c) FDs flat: median {fds_last:g} in the last third of the "
                 f"load, {fds_middle:g} in the middle third (limit +{FD_SLACK})")
    report.check(idle.fds <= baseline.fds + FD_SLACK_IDLE, f"(c) FDs back to baseline once clients are gone: "
                 f"{idle.fds} (before the load {baseline.fds}, limit +{FD_SLACK_IDLE})")


def wait_for_idle_gauges(server, tally, started):
    """Samples until the gauges show no subscribers and at most the scrape's own connection (10 s).

    A sample reads the descriptor count before it scrapes the gauges, so the sample that first
    sees idle gauges may have counted descriptors still closing; the one returned is taken after.
    """
    deadline = time.monotonic() + 10
    while True:
        sample = take_sample(server, tally, started, "idle")
        if sample.subscribers == 0 and sample.connections <= 2:
            time.sleep(0.25)
            return take_sample(server, tally, started, "idle")
        if time.monotonic() > deadline:
            return sample
        time.sleep(0.25)


def check_gauges(report, idle):
    report.check(idle.subscribers == 0, f"(d) library_sse_subscribers is {idle.subscribers} after every client closed")
    report.check(0 <= idle.connections <= 2,
                 f"(d) library_http_open_connections is {idle.connections} after every client closed (limit 2)")


def check_responses(report, tally, metrics):
    statuses = {int(kind[7:]): count for kind, count in tally.kinds("status:").items()}
    server_5xx = {name: count for name, count in metrics.items()
                  if name.startswith("library_http_requests_total") and re.search(r'status="5\d\d"', name) and count}
    if tally.count("5xx") or server_5xx:
        report.check(False, f"(e) 5xx responses: clients saw {tally.count('5xx')} ({tally.describe('5xx')}); "
                     f"the server counted {server_5xx}")
    else:
        shown = ", ".join(f"{status}: {count}" for status, count in sorted(statuses.items()))
        report.check(True, f"(e) no 5xx among {sum(statuses.values())} responses ({shown})")
    for kind, good, bad in (
        ("unexpected-status", f"every request got a status it may get ({tally.count('invalid requests')} "
                              "invalid ones, each its 4xx)", "unexpected statuses"),
        ("transport", "no request broke on its connection", "requests broke"),
        ("thread-crash", "no client thread crashed", "client threads crashed"),
    ):
        count = tally.count(kind)
        report.check(not count, f"(e) {good}" if not count else f"(e) {count} {bad}: {tally.describe(kind)}")


def check_stderr(report, server):
    lines = server.stderr_lines()
    bad = [line for line in lines if re.match(r"\S+ (error|critical) ", line)]
    if bad:
        shown = " | ".join(shorten(line, 200) for line in bad[:MAX_EXAMPLES])
        report.check(False, f"(e) the server logged {len(bad)} error or critical lines: {shown}")
    else:
        report.check(True, f"(e) server stderr has no error or critical line ({len(lines)} lines in all)")
    for line in lines[:MAX_EXAMPLES]:
        if line not in bad:
            print(f"#   server stderr: {shorten(line, 200)}")


# --- the run ----------------------------------------------------------------------------------


def soak(report, server, seconds, seed):
    tally, world, phase = Tally(), World(), Phase()
    started = time.monotonic()
    populate(server.port, tally, world, random.Random(f"{seed}-populate"))
    time.sleep(0.5)
    baseline = take_sample(server, tally, started, "start")
    stop_load = threading.Event()
    sampler = Sampler(server, tally, started, stop_load)
    loads = [LoadThread(i, server.port, world, tally, stop_load, seed) for i in range(LOAD_THREADS)]
    subscribers = [Subscriber(i, server.port, world, tally, phase, i < WATCHERS, seed) for i in range(SUBSCRIBERS)]
    for thread in [sampler, *loads, *subscribers]:
        thread.start()
    time.sleep(seconds)

    stop_load.set()
    for thread in [sampler, *loads]:
        thread.join(IO_TIMEOUT * 3)
    phase.load_done.set()
    settled = wait_until_quiet(phase)
    phase.freeze.set()
    for subscriber in subscribers:
        subscriber.join(IO_TIMEOUT * 3)
    print(f"# load stopped at {time.monotonic() - started:.0f} s; subscribers quiet after {settled:.1f} s; "
          f"{tally.count('subscriptions')} subscriptions, {tally.count('resumes')} resumes, "
          f"{tally.count('libraries deleted')} libraries deleted; "
          f"streams ended by the server: {tally.kinds('streams ended')}")

    verdicts = final_state_verdicts(server.port, tally, subscribers)
    for index, subscriber in enumerate(subscriber for subscriber in subscribers if subscriber.final):
        subscriber.final[1].close(abrupt=index % 2 == 0)
    idle = wait_for_idle_gauges(server, tally, started)
    samples = [baseline, *sampler.samples, idle]
    print_samples(samples)
    for ok, message in verdicts:
        report.check(ok, message)
    check_events(report, tally)
    check_flat(report, samples, baseline, idle)
    check_gauges(report, idle)
    metrics = scrape(server.port, tally)
    print(f"# server: {metrics.get('library_sse_events_sent_total', 0):.0f} events sent, "
          f"{metrics.get('library_sse_changes_coalesced_total', 0):.0f} changes coalesced for slow readers")
    check_responses(report, tally, metrics)
    report.check(server.alive(), "the server process is alive at the end of the load")


def main():
    parser = argparse.ArgumentParser(description="Soak test for library-server (see the docstring).")
    parser.add_argument("binary", help="the library-server executable")
    parser.add_argument("--seconds", type=float, default=600, help="how long the load runs (default 600)")
    parser.add_argument("--seed", type=int, default=random.randrange(1_000_000),
                        help="seed of the random choices (printed; threads still interleave differently)")
    args = parser.parse_args()
    report = Report(NAME)
    holder = []
    # The watchdog's report is a fresh one: its summary is "soak: 0 passed, 1 failed", whatever
    # the run had counted so far.
    start_watchdog(Report(NAME), holder, int(args.seconds) + WATCHDOG_MARGIN)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="soak-") as workdir:
        server = Server(os.path.abspath(args.binary), workdir)
        holder.append(server)
        print(f"# server pid {server.pid} on port {server.port}; {args.seconds:g} s of load, "
              f"{LOAD_THREADS} load threads, {SUBSCRIBERS} subscribers, --seed {args.seed}")
        try:
            soak(report, server, args.seconds, args.seed)
        except Exception:  # noqa: BLE001 - a broken run is a failed check, with its traceback
            report.check(False, f"the soak itself broke: {traceback.format_exc()}")
        finally:
            status = server.stop()
        report.check(status == 0, f"(f) the server stopped on SIGTERM with exit status {status}")
        check_stderr(report, server)
    print(f"# {time.monotonic() - started:.1f} s")
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())
