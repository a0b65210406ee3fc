#!/usr/bin/env python3
"""The driver of scripts/replicas.sh: replicas behind nginx, one database, live streams, failures.

replicas.sh starts a throwaway PostgreSQL cluster, the replicas and nginx, then runs this with
their ports and process ids. Standard library only; talks to 127.0.0.1 only. It:

  1. creates LIBRARIES libraries and SEED_BOOKS books through nginx;
  2. opens subscribers on every replica directly and through nginx: book streams
     (`/books/{id}/events?fields=title,author`), library streams (`?fields=name,books.title`) and
     collection streams (`/books/events?libraryId=L&fields=title`). Each rebuilds its resource from
     its events (snapshot, change, delete), checks that event ids strictly increase (across
     reconnects too), and when its connection drops reconnects THROUGH NGINX with Last-Event-ID;
  3. runs writers, one per replica (directly) and as many through nginx: PATCH title/author, create
     and delete books, PATCH library names. Each book (and library name) has exactly one writer, and
     every title and author written is unique, so the final value of every field is the writer's
     last acknowledged write of it. A write is retried on 502/503/504 and broken connections (after
     Retry-After, capped) with the same body: a merge patch applied twice is applied once;
  4. at 35 % of the run kills one replica with SIGKILL (its direct subscribers resume via nginx and
     its writer moves to nginx); at 60 % asks replicas.sh (SIGUSR1) to restart PostgreSQL
     (restart_postgres, down for --postgres-down seconds) while a prober sends GETs and PATCHes to
     every live replica and to nginx with a 3 s timeout: each must be answered (no hang), every 503
     must carry Retry-After and be problem+json, and once PostgreSQL is back every replica must
     answer /healthz 200 and accept a write by itself (no restart);
  5. stops the writers, lets the subscribers settle, then checks: every subscriber's state equals
     GET through nginx; every acknowledged write is what GET returns (or the book is gone after an
     acknowledged delete); no unexpected status; and the cross-replica commit-to-event latency
     (write sent to replica A until a subscriber connected directly to replica C != A sees it),
     whose p99 must be at most --latency-target-ms.

With --failover (replicas.sh --failover: a synchronous standby, pgbouncer, the replicas LISTENing on
a multi-host URI), the request at 60 % is a failover instead: the primary killed with SIGKILL and the
standby promoted. The same checks apply, and more: every acknowledged write is read back from the
new primary directly (psql, --direct-database), not only through the replicas; the report gives
the longest an endpoint left the prober's PATCHes unanswered (refused with 503, or held in
pgbouncer's queue until the promoted standby answered) and the longest a writer kept retrying, and the time from the kill until an event of a write sent after
it reached a subscriber. --kill-during-failover kills the replica at the moment of the failover
instead of at 35 %.

Prints `ok - ...` / `FAIL - ...` lines, a summary `replicas: N passed, M failed`; exits 1 on any
failure (2 when its watchdog fires). Every socket operation has a timeout and every wait a bound.
"""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import HOST, Report, dechunk, next_event, parse_headers, shorten  # noqa: E402

NAME = "replicas"
IO_TIMEOUT = 5.0  # seconds for one REST request
PROBE_TIMEOUT = 3.0  # seconds for one request of the outage prober: more is a hang
HELD = 0.5  # seconds past which a probe that was answered counts as held through the outage
WRITE_BUDGET = 40.0  # seconds one write may spend retrying
RETRY_AFTER_CAP = 3.0  # longest wait honoured from a Retry-After
LIBRARIES = 3
SEED_BOOKS = 24
BOOK_SUBSCRIBERS_PER_ENDPOINT = 4
SETTLE_LIMIT = 30.0  # seconds the subscribers get to match GET after the writes stop
RECOVERY_LIMIT = 30.0  # seconds the replicas get to recover after PostgreSQL is back
MAX_EXAMPLES = 5


# --- reporting -----------------------------------------------------------------------------------


class Tally:
    """Thread-safe counts and the first examples of each kind."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = defaultdict(int)
        self.examples = defaultdict(list)

    def add(self, kind, example=None):
        with self.lock:
            self.counts[kind] += 1
            if example is not None and len(self.examples[kind]) < MAX_EXAMPLES:
                self.examples[kind].append(shorten(example, 300))

    def count(self, kind):
        with self.lock:
            return self.counts.get(kind, 0)

    def matching(self, prefix):
        with self.lock:
            return {kind: n for kind, n in self.counts.items() if kind.startswith(prefix)}

    def describe(self, kind):
        with self.lock:
            return "; ".join(self.examples.get(kind, []))


TALLY = Tally()
REPORT = Report(NAME)
T0 = time.monotonic()


def now():
    return time.monotonic() - T0


def log(message):
    print(f"# [{now():6.1f}s] {message}", flush=True)


# --- endpoints and REST ----------------------------------------------------------------------------


class Endpoint:
    def __init__(self, name, port, pid=None):
        self.name, self.port, self.pid = name, port, pid
        self.killed = False

    @property
    def is_replica(self):
        return self.pid is not None


class Response:
    def __init__(self, status, headers=None, body=None, error=None, elapsed=0.0):
        self.status, self.headers, self.body, self.error, self.elapsed = status, headers or {}, body, error, elapsed

    @property
    def retry_after(self):
        try:
            return float(self.headers.get("retry-after", ""))
        except ValueError:
            return None


def check_unavailable(response, what):
    """A 503 must carry Retry-After and be problem+json (counted either way)."""
    if response.status != 503:
        return
    TALLY.add("503 seen")
    problems = []
    if response.retry_after is None:
        problems.append("no Retry-After")
    if not response.headers.get("content-type", "").startswith("application/problem+json"):
        problems.append(f"Content-Type {response.headers.get('content-type')!r}")
    elif not (isinstance(response.body, dict) and response.body.get("status") == 503):
        problems.append(f"problem body {response.body!r}")
    if problems:
        TALLY.add("violation:503 without Retry-After or problem+json", f"{what}: {', '.join(problems)}")


class Client:
    """Keep-alive connections per port, for one thread."""

    def __init__(self):
        self.connections = {}

    def call(self, endpoint, method, path, body=None, headers=None, timeout=IO_TIMEOUT):
        data = None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json"} if data is not None else {}
        sent.update(headers or {})
        started = time.monotonic()
        connection = self.connections.get(endpoint.port)
        try:
            if connection is None:
                connection = http.client.HTTPConnection(HOST, endpoint.port, timeout=timeout)
                self.connections[endpoint.port] = connection
            connection.timeout = timeout
            if connection.sock is not None:
                connection.sock.settimeout(timeout)
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as error:
            self.close(endpoint)
            return Response(0, error=f"{type(error).__name__}: {error}", elapsed=time.monotonic() - started)
        received = {name.lower(): value for name, value in response.getheaders()}
        if received.get("connection", "").lower() == "close":
            self.close(endpoint)
        parsed = None
        if payload and "json" in received.get("content-type", ""):
            try:
                parsed = json.loads(payload)
            except ValueError:
                TALLY.add("violation:unparsable JSON", f"{method} {path}: {payload[:100]!r}")
        result = Response(response.status, received, parsed, elapsed=time.monotonic() - started)
        check_unavailable(result, f"{method} {path} via {endpoint.name}")
        return result

    def close(self, endpoint=None):
        for port in [endpoint.port] if endpoint else list(self.connections):
            connection = self.connections.pop(port, None)
            if connection is not None:
                connection.close()


def all_items(client, endpoint, path):
    """Every item of a list (None when it is a 404), through all pages."""
    items, cursor = [], None
    for _ in range(1000):
        query = "limit=500" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
        response = client.call(endpoint, "GET", path + ("&" if "?" in path else "?") + query)
        if response.status == 404:
            return None
        if response.status != 200:
            raise RuntimeError(f"GET {path} via {endpoint.name}: {response.status} {response.error or response.body}")
        items += response.body["items"]
        cursor = response.body.get("nextCursor")
        if not cursor:
            return items
    raise RuntimeError(f"GET {path}: more than 1000 pages")


def get_with_retries(client, endpoint, method, path, limit=15.0):
    """A read retried on 0/502/503/504 for up to `limit` seconds."""
    deadline = time.monotonic() + limit
    while True:
        response = client.call(endpoint, method, path)
        if response.status not in (0, 502, 503, 504) or time.monotonic() > deadline:
            return response
        time.sleep(min(response.retry_after or 0.3, RETRY_AFTER_CAP))


# --- the world: what was acknowledged ----------------------------------------------------------------


class World:
    def __init__(self, libraries):
        self.lock = threading.Lock()
        self.libraries = libraries  # ids
        self.library_names = {}  # id -> last acknowledged name (one writer)
        self.books = {}  # id -> {"library", "title", "author", "deleted", "owner", "uncertain": set}
        # title or author token -> (send time of the acknowledged attempt, endpoint name, send time of
        # the first attempt: an earlier attempt whose answer was lost may have committed)
        self.sent = {}
        self.seen = defaultdict(list)  # title token -> [(time seen, subscriber endpoint, subscriber)]
        self.windows = []  # (start, end) monotonic: disturbed periods, left out of latency
        self.retries = []  # (answered at, seconds since the first failed attempt, endpoint name)

    def record_seen(self, token, endpoint_name, subscriber):
        with self.lock:
            if token in self.sent or token.startswith("w"):
                self.seen[token].append((time.monotonic(), endpoint_name, subscriber))


# --- event streams ---------------------------------------------------------------------------------


class StreamEnded(Exception):
    pass


class EventStream:
    """One SSE response on a raw socket: head, chunked body, events."""

    def __init__(self, endpoint, path, last_event_id=None):
        self.sock = socket.create_connection((HOST, endpoint.port), timeout=IO_TIMEOUT)
        extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}:{endpoint.port}\r\n"
                          f"Accept: text/event-stream\r\n{extra}\r\n".encode())
        self.raw = b""
        self.text = b""
        self.ended = False
        self.status, self.headers, self.body = self._read_head()

    def _recv(self, timeout):
        self.sock.settimeout(max(0.01, min(timeout, IO_TIMEOUT)))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        except OSError as error:
            raise StreamEnded(f"{type(error).__name__}") from error
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
                break
        try:
            body = json.loads(self.raw[:length]) if length else None
        except ValueError:
            body = self.raw[:length]
        return status, headers, body

    def _dechunk(self):
        dechunk(self)

    def _parse(self):
        return next_event(self)

    def next_event(self, timeout):
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

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Subscriber(threading.Thread):
    """Follows one stream, first on `home`, after any drop through nginx with Last-Event-ID."""

    def __init__(self, kind, resource, home, nginx, world, stop):
        super().__init__(name=f"{kind}-{resource[:8]}@{home.name}", daemon=True)
        self.kind, self.resource, self.home, self.nginx = kind, resource, home, nginx
        self.world, self.stop = world, stop
        self.lock = threading.Lock()
        self.state = None  # None before the snapshot; "deleted" after a delete
        self.last_id = None
        self.connected_to = None  # endpoint name of the current connection, None between
        self.connections = 0
        self.events = 0
        self.finished = False
        self.gone = False  # a resume got 404 (the resource was deleted and the history is gone)
        self.stream = None

    @property
    def path(self):
        if self.kind == "book":
            return f"/books/{self.resource}/events?fields=title,author"
        if self.kind == "library":
            return f"/libraries/{self.resource}/events?fields=name,books.title"
        return f"/books/events?libraryId={self.resource}&fields=title"

    def run(self):
        try:
            self.follow()
        except Exception:  # noqa: BLE001 - a failed check
            TALLY.add("thread crash", f"{self.name}: {traceback.format_exc()}")
        finally:
            self.finished = True

    def follow(self):
        endpoint = self.home
        while not self.stop.is_set():
            try:
                stream = EventStream(endpoint, self.path, self.last_id)
            except (OSError, TimeoutError, StreamEnded) as error:
                TALLY.add(f"stream connect failed via {endpoint.name}", f"{self.name}: {error!r}")
                endpoint = self.nginx
                time.sleep(0.3)
                continue
            if stream.status != 200:
                stream.close()
                response = Response(stream.status, stream.headers, stream.body)
                check_unavailable(response, f"stream {self.path} via {endpoint.name}")
                if stream.status == 404 and self.last_id is not None:
                    TALLY.add("resume got 404", f"{self.name} after {self.last_id}")
                    with self.lock:
                        self.gone = True
                    return
                if stream.status not in (502, 503, 504):
                    TALLY.add("violation:stream refused", f"{self.name} via {endpoint.name}: {stream.status} {stream.body}")
                    return
                endpoint = self.nginx
                time.sleep(min(response.retry_after or 0.5, RETRY_AFTER_CAP))
                continue
            self.stream = stream
            self.connections += 1
            if self.connections > 1:
                TALLY.add(f"resumed via {endpoint.name}")
            with self.lock:
                self.connected_to = endpoint.name
            try:
                while not self.stop.is_set():
                    event = stream.next_event(0.5)
                    if event is not None and self.apply(*event, endpoint):
                        return  # deleted: the stream ends
            except StreamEnded as error:
                TALLY.add("stream dropped", f"{self.name} via {endpoint.name}: {error}")
            except (OSError, ValueError) as error:
                TALLY.add("stream broke", f"{self.name} via {endpoint.name}: {error!r}")
            finally:
                self.stream = None
                stream.close()
                with self.lock:
                    self.connected_to = None
            endpoint = self.nginx  # resume through nginx
            time.sleep(0.1)

    def apply(self, kind, event_id, data, endpoint):
        """Applies one event; True when the stream is over (delete)."""
        self.events += 1
        TALLY.add(f"events:{kind}")
        if event_id is None or (self.last_id is not None and event_id <= self.last_id):
            TALLY.add("violation:event ids not strictly increasing",
                      f"{self.name}: {kind} {event_id} after {self.last_id} via {endpoint.name}")
        if kind == "snapshot" and self.last_id is not None:
            TALLY.add("snapshot on resume", f"{self.name} after {self.last_id} via {endpoint.name}")
        with self.lock:
            self.last_id = event_id if event_id is not None else self.last_id
            titles = []
            if kind == "delete":
                self.state = "deleted"
                return True
            if kind not in ("snapshot", "change"):
                TALLY.add("violation:unknown event", f"{self.name}: {kind}")
                return False
            if kind == "change" and self.state in (None, "deleted"):
                TALLY.add("violation:change before snapshot", f"{self.name}: {data}")
                return False
            if self.kind == "book":
                values = {k: v for k, v in data.items() if k in ("title", "author")}
                self.state = values if kind == "snapshot" else {**self.state, **values}
                if "title" in values:
                    titles.append(values["title"])
            elif self.kind == "library":
                if kind == "snapshot":
                    self.state = {"name": data.get("name"),
                                  "books": {b["id"]: b.get("title") for b in data.get("books", [])}}
                else:
                    if "name" in data:
                        self.state["name"] = data["name"]
                    titles += self.apply_members(self.state["books"], data.get("books", {}))
            else:
                if kind == "snapshot":
                    self.state = {item["id"]: item.get("title") for item in data["items"]}
                else:
                    titles += self.apply_members(self.state, data)
        for title in titles:
            if isinstance(title, str):
                self.world.record_seen(title, endpoint.name if endpoint.is_replica else None, self)
        return False

    def apply_members(self, members, change):
        titles = []
        for removed in change.get("removed", []):
            if members.pop(removed, "missing") == "missing":
                TALLY.add("violation:removed an unknown member", f"{self.name}: {removed}")
        for added in change.get("added", []):
            members[added["id"]] = added.get("title")
            titles.append(added.get("title"))
        for changed in change.get("changed", []):
            if changed["id"] not in members:
                TALLY.add("violation:changed an unknown member", f"{self.name}: {changed}")
            if "title" in changed:
                members[changed["id"]] = changed["title"]
                titles.append(changed["title"])
        return titles

    def drop(self):
        """Cuts the connection from the client side (as a network failure would)."""
        stream = self.stream
        if stream is not None:
            try:
                stream.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def snapshot(self):
        with self.lock:
            return json.loads(json.dumps(self.state)), self.gone

    def truth(self, client, nginx):
        """What GET through nginx says this subscriber should hold."""
        if self.kind == "book":
            response = get_with_retries(client, nginx, "GET", f"/books/{self.resource}?fields=title,author")
            if response.status == 404:
                return "deleted"
            if response.status != 200:
                raise RuntimeError(f"GET book: {response.status} {response.error}")
            return {"title": response.body["title"], "author": response.body["author"]}
        if self.kind == "library":
            response = get_with_retries(client, nginx, "GET", f"/libraries/{self.resource}?fields=name")
            if response.status != 200:
                raise RuntimeError(f"GET library: {response.status} {response.error}")
            items = all_items(client, nginx, f"/libraries/{self.resource}/books?fields=title")
            return {"name": response.body["name"], "books": {item["id"]: item["title"] for item in items}}
        items = all_items(client, nginx, f"/books?libraryId={self.resource}&fields=title")
        return {item["id"]: item["title"] for item in items}


# --- writers -----------------------------------------------------------------------------------------


class Writer(threading.Thread):
    """Writes to one endpoint (a replica directly, or nginx): PATCHes of its own books' titles and
    authors, creations, deletions; a writer may also own the library names."""

    def __init__(self, index, endpoint, nginx, world, stop, rng, owns_library_names=False):
        super().__init__(name=f"writer-{index}@{endpoint.name}", daemon=True)
        self.index, self.endpoint, self.nginx = index, endpoint, nginx
        self.world, self.stop, self.rng = world, stop, rng
        self.owns_library_names = owns_library_names
        self.client = Client()
        self.counter = 0
        self.acknowledged = 0
        self.gave_up = 0
        self.stopped_at = None  # when this writer first saw `stop` set

    def target(self):
        return self.nginx if self.endpoint.killed else self.endpoint

    def token(self, prefix):
        self.counter += 1
        return f"{prefix}{self.index}-{self.counter}"

    def write(self, method, path, body, final_ok=(200, 201, 204)):
        """The write, retried on 0/502/503/504 within WRITE_BUDGET: (response, endpoint, send time of
        the answered attempt, send time of the first), or (None, ...) when it gave up (its outcome
        unknown)."""
        deadline = time.monotonic() + WRITE_BUDGET
        attempts = 0
        first_sent = None
        while True:
            endpoint = self.target()
            sent = time.monotonic()
            first_sent = first_sent or sent
            response = self.client.call(endpoint, method, path, body)
            attempts += 1
            TALLY.add(f"write status:{response.status}")
            if response.status in final_ok:
                if attempts > 1:
                    with self.world.lock:
                        self.world.retries.append((time.monotonic(), time.monotonic() - first_sent, endpoint.name))
                return response, endpoint, sent, first_sent
            if response.status == 404 and method == "DELETE" and attempts > 1:
                return response, endpoint, sent, first_sent  # an earlier attempt deleted it
            if self.stop.is_set() and time.monotonic() > self.stop_time() + 10:
                TALLY.add("write gave up", f"{method} {path} via {endpoint.name}: {response.status} (stopping)")
                return None, endpoint, sent, first_sent
            if response.status not in (0, 502, 503, 504):
                TALLY.add("violation:unexpected write status",
                          f"{method} {path} via {endpoint.name}: {response.status} {response.body}")
                return None, endpoint, sent, first_sent
            if response.status == 0:
                TALLY.add(f"write transport error via {endpoint.name}", f"{method} {path}: {response.error}")
            if time.monotonic() > deadline:
                TALLY.add("write gave up", f"{method} {path} via {endpoint.name}: {response.status}")
                return None, endpoint, sent, first_sent
            wait = response.retry_after if response.retry_after is not None else 0.2
            time.sleep(min(wait, RETRY_AFTER_CAP))

    def stop_time(self):
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
        return self.stopped_at

    def my_books(self):
        with self.world.lock:
            return [book for book, info in self.world.books.items()
                    if info["owner"] == self.index and not info["deleted"]]

    def run(self):
        try:
            while not self.stop.is_set():
                self.step()
                self.stop.wait(self.rng.uniform(0.03, 0.12))
        except Exception:  # noqa: BLE001
            TALLY.add("thread crash", f"{self.name}: {traceback.format_exc()}")
        finally:
            self.client.close()

    def step(self):
        books = self.my_books()
        roll = self.rng.random()
        if self.owns_library_names and roll < 0.05:
            self.rename_library()
        elif roll < 0.15 or len(books) < 3:
            self.create()
        elif roll < 0.22 and len(books) > 4:
            self.delete(self.rng.choice(books))
        else:
            self.patch(self.rng.choice(books))

    def patch(self, book):
        body = {}
        shape = self.rng.random()
        if shape < 0.7:
            body["title"] = self.token("w")
        if shape > 0.5:
            body["author"] = self.token("a")
        with self.world.lock:
            info = self.world.books[book]
            for field in body:
                info["uncertain"].add(field)  # until acknowledged
        response, endpoint, sent, first_sent = self.write("PATCH", f"/books/{book}", body)
        with self.world.lock:
            if response is not None:
                self.acknowledged += 1
                info.update(body)
                for field in body:
                    info["uncertain"].discard(field)
                if "title" in body:
                    self.world.sent[body["title"]] = (sent, endpoint.name if endpoint.is_replica else None,
                                                       first_sent)
            else:
                self.gave_up += 1

    def create(self):
        library = self.rng.choice(self.world.libraries)
        body = {"title": self.token("w"), "author": self.token("a")}
        response, endpoint, sent, first_sent = self.write("POST", f"/libraries/{library}/books", body)
        if response is None:
            self.gave_up += 1
            TALLY.add("create outcome unknown", body["title"])
            return
        self.acknowledged += 1
        with self.world.lock:
            self.world.books[response.body["id"]] = {
                "library": library, "title": body["title"], "author": body["author"], "deleted": False,
                "owner": self.index, "uncertain": set()}
            self.world.sent[body["title"]] = (sent, endpoint.name if endpoint.is_replica else None,
                                                       first_sent)

    def delete(self, book):
        with self.world.lock:
            self.world.books[book]["uncertain"].add("deleted")
        response, _, _, _ = self.write("DELETE", f"/books/{book}", None)
        with self.world.lock:
            if response is not None:
                self.acknowledged += 1
                self.world.books[book]["deleted"] = True
                self.world.books[book]["uncertain"].discard("deleted")
            else:
                self.gave_up += 1

    def rename_library(self):
        library = self.rng.choice(self.world.libraries)
        name = self.token("Library ")
        response, _, _, _ = self.write("PATCH", f"/libraries/{library}", {"name": name})
        with self.world.lock:
            if response is not None:
                self.acknowledged += 1
                self.world.library_names[library] = name
            else:
                self.world.library_names[library] = None  # unknown
                self.gave_up += 1


# --- the outage prober -------------------------------------------------------------------------------


class Prober(threading.Thread):
    """While PostgreSQL restarts: GET and PATCH its own book on every live endpoint, 3 s timeout."""

    def __init__(self, endpoints, book, world, stop):
        super().__init__(name="prober", daemon=True)
        self.endpoints, self.book, self.world, self.stop = endpoints, book, world, stop
        self.client = Client()
        self.results = []  # (time, endpoint, method, status, elapsed, error)
        self.counter = 0

    def run(self):
        try:
            while not self.stop.is_set():
                for endpoint in self.endpoints:
                    if endpoint.killed or self.stop.is_set():
                        continue
                    self.probe(endpoint, "GET", f"/books/{self.book}?fields=title", None)
                    self.counter += 1
                    title = f"probe-{self.counter}"
                    response = self.probe(endpoint, "PATCH", f"/books/{self.book}", {"title": title})
                    if response.status == 200:
                        with self.world.lock:
                            self.world.books[self.book]["title"] = title
                            self.world.books[self.book]["uncertain"].discard("title")
                    elif response.status in (0, 502, 504):
                        with self.world.lock:  # it may or may not have been applied
                            self.world.books[self.book]["uncertain"].add("title")
                self.stop.wait(0.2)
        except Exception:  # noqa: BLE001
            TALLY.add("thread crash", f"prober: {traceback.format_exc()}")
        finally:
            self.client.close()

    def probe(self, endpoint, method, path, body):
        response = self.client.call(endpoint, method, path, body, timeout=PROBE_TIMEOUT)
        self.results.append((time.monotonic(), endpoint.name, method, response.status, response.elapsed,
                             response.error))
        return response


# --- the run -----------------------------------------------------------------------------------------


def check_idempotency_across(replicas, nginx, library, world):
    """The same `Idempotency-Key` sent to every replica, one after another and then all at once:
    every answer is the first one (same status, same book), and the library holds one book more."""
    client = Client()
    count = lambda: client.call(nginx, "GET", f"/libraries/{library}?fields=bookCount").body["bookCount"]
    before = count()
    body = {"title": "idempotent-1", "author": "once"}
    answers = [client.call(replica, "POST", f"/libraries/{library}/books", body,
                           headers={"Idempotency-Key": "replicas-retry-1"}) for replica in replicas]
    results = [None] * len(replicas)

    def send(index):
        own = Client()
        results[index] = own.call(replicas[index], "POST", f"/libraries/{library}/books",
                                  {"title": "idempotent-2"}, headers={"Idempotency-Key": "replicas-retry-2"})
        own.close()

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(replicas))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(IO_TIMEOUT * 2)
    after = count()
    for name, group in (("one after another", answers), ("at once", results)):
        ids = {answer.body.get("id") if isinstance(answer.body, dict) else None for answer in group}
        statuses = {answer.status for answer in group}
        REPORT.check(statuses == {201} and len(ids) == 1 and None not in ids,
                     f"a POST with one Idempotency-Key sent to {len(group)} replicas {name} got the first answer "
                     f"(statuses {sorted(statuses)}, {len(ids)} distinct book)")
        if group and isinstance(group[0].body, dict) and "id" in group[0].body:
            with world.lock:
                world.books[group[0].body["id"]] = {
                    "library": library, "title": group[0].body["title"], "author": group[0].body["author"],
                    "deleted": False, "owner": -3, "uncertain": set()}
    REPORT.check(after == before + 2, f"those retries created one book each ({after - before} created)")
    client.close()


def check_directly(args, books, names):
    """Every acknowledged write, read back from the database itself (after a failover: the promoted
    standby), not through a replica: a create whose row is missing, a field that is not the last
    acknowledged value, or a row still there after an acknowledged delete is a lost write."""
    def rows(sql):
        done = subprocess.run([args.psql, "-X", "-q", "-At", "-F", "\t", "-d", args.direct_database, "-c", sql],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip())
        return [line.split("\t") for line in done.stdout.splitlines()]
    try:
        stored = {row[0]: row[1:] for row in rows("SELECT id, title, author, library_id FROM books")}
        stored_names = {row[0]: row[1] for row in rows("SELECT id, name FROM libraries")}
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as error:
        REPORT.check(False, f"read the new primary directly: {error}")
        return
    lost = []
    for book, info in books.items():
        row = stored.get(book)
        if info["deleted"]:
            if row is not None and "deleted" not in info["uncertain"]:
                lost.append(f"{book[:8]} deleted (acknowledged) but still stored")
            continue
        if row is None:
            if "deleted" not in info["uncertain"]:
                lost.append(f"{book[:8]} acknowledged but not stored")
            continue
        for field, value in zip(("title", "author", "library"), row):
            if field not in info["uncertain"] and info[field] != value:
                lost.append(f"{book[:8]} {field} {value!r} stored, {info[field]!r} acknowledged")
    for library, name in names.items():
        if name is not None and stored_names.get(library) != name:
            lost.append(f"library {library[:8]} name {stored_names.get(library)!r} stored, {name!r} acknowledged")
    REPORT.check(not lost, f"acknowledged writes lost, read from the new primary directly: {len(lost)} "
                 f"({len(books)} books and {len(names)} libraries checked, {len(stored)} books stored)")
    for line in lost[:MAX_EXAMPLES]:
        REPORT.note(line)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nginx-port", type=int, required=True)
    parser.add_argument("--replica", action="append", required=True, metavar="PORT:PID",
                        help="a replica's port and process id (repeat, in order)")
    parser.add_argument("--control-pid", type=int, help="replicas.sh, which restarts PostgreSQL on SIGUSR1")
    parser.add_argument("--ack-file", help="the file replicas.sh writes once PostgreSQL is back")
    parser.add_argument("--postgres", action="store_true",
                        help="the replicas run on PostgreSQL: a restart must give 503s (else only the plumbing is checked)")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--short", action="store_true", help="about 20 s, for CI")
    parser.add_argument("--no-kill", action="store_true", help="kill no replica")
    parser.add_argument("--postgres-down", type=float, default=3.0, help="seconds PostgreSQL stays down")
    parser.add_argument("--failover", action="store_true",
                        help="SIGUSR1 asks for a failover to the standby, not a restart (replicas.sh --failover)")
    parser.add_argument("--kill-during-failover", action="store_true",
                        help="kill the replica when the failover starts, not at 35 %%")
    parser.add_argument("--direct-database", help="the new primary's URI, to check acknowledged writes directly")
    parser.add_argument("--psql", default="psql", help="psql, for --direct-database")
    parser.add_argument("--latency-target-ms", type=float, default=100.0)
    parser.add_argument("--results", action="store_true",
                        help="write the latencies to Benchmarks/results/replicas-latency.json (for docs/performance.md)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.short:
        args.seconds = 20
    watchdog = int(args.seconds + 150)

    def expire(*_):
        REPORT.check(False, f"the run took more than {watchdog} s; stopping")
        REPORT.summary()
        os._exit(2)

    signal.signal(signal.SIGALRM, expire)
    signal.alarm(watchdog)

    rng = random.Random(args.seed)
    replicas = []
    for index, text in enumerate(args.replica):
        port, pid = text.split(":")
        replicas.append(Endpoint(f"replica{index + 1}", int(port), int(pid)))
    nginx = Endpoint("nginx", args.nginx_port)
    endpoints = replicas + [nginx]
    client = Client()
    stop_writes, stop_streams, stop_probe = threading.Event(), threading.Event(), threading.Event()

    # 0. nginx passes Host through: a name no replica answers for is their 421, not nginx's.
    response = client.call(nginx, "GET", "/books?limit=1", headers={"Host": "rebinding.example"})
    REPORT.check(response.status == 421, f"a foreign Host through nginx gets the replicas' 421 (got {response.status})")
    response = client.call(nginx, "GET", "/healthz", headers={"X-Request-ID": "replicas-check-1"})
    REPORT.check(response.status == 200 and response.headers.get("x-request-id") == "replicas-check-1",
                 f"X-Request-ID passes through nginx (got {response.status}, {response.headers.get('x-request-id')!r})")
    response = client.call(nginx, "GET", "/healthz")
    generated = response.headers.get("x-request-id", "")
    REPORT.check(len(generated) == 32, f"without X-Request-ID, nginx's $request_id reaches the replica ({generated!r})")

    # 1. seed through nginx
    libraries = []
    for index in range(LIBRARIES):
        response = client.call(nginx, "POST", "/libraries", {"name": f"Library seed-{index}"})
        if response.status != 201:
            REPORT.check(False, f"POST /libraries via nginx: {response.status} {response.error or response.body}")
            return REPORT.summary()
        libraries.append(response.body["id"])
    world = World(libraries)
    for library in libraries:
        world.library_names[library] = None  # set by the seed; checked only once renamed
    writers_endpoints = replicas + [nginx] * len(replicas)
    for index in range(SEED_BOOKS):
        library = libraries[index % LIBRARIES]
        title, author = f"seed-{index}", f"seed-author-{index}"
        response = client.call(nginx, "POST", f"/libraries/{library}/books", {"title": title, "author": author})
        if response.status != 201:
            REPORT.check(False, f"POST book via nginx: {response.status} {response.error or response.body}")
            return REPORT.summary()
        world.books[response.body["id"]] = {"library": library, "title": title, "author": author, "deleted": False,
                                             "owner": index % len(writers_endpoints), "uncertain": set()}
    probe_book = client.call(nginx, "POST", f"/libraries/{libraries[0]}/books", {"title": "probe-0"}).body["id"]
    world.books[probe_book] = {"library": libraries[0], "title": "probe-0", "author": "", "deleted": False,
                               "owner": -1, "uncertain": set()}
    REPORT.check(True, f"seeded {LIBRARIES} libraries and {SEED_BOOKS + 1} books through nginx")

    # 1b. a retried POST reaching another replica gets the first answer and creates nothing
    if len(replicas) > 1:
        check_idempotency_across(replicas, nginx, libraries[-1], world)

    # 2. subscribers on every replica and through nginx
    subscribers = []
    books = [book for book in world.books if book != probe_book]
    for endpoint in endpoints:
        for library in libraries:
            subscribers.append(Subscriber("library", library, endpoint, nginx, world, stop_streams))
            subscribers.append(Subscriber("collection", library, endpoint, nginx, world, stop_streams))
        for book in rng.sample(books, BOOK_SUBSCRIBERS_PER_ENDPOINT):
            subscribers.append(Subscriber("book", book, endpoint, nginx, world, stop_streams))
    subscribers.append(Subscriber("book", probe_book, nginx, nginx, world, stop_streams))
    for subscriber in subscribers:
        subscriber.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(s.state is None and not s.finished for s in subscribers):
        time.sleep(0.1)
    waiting = [s.name for s in subscribers if s.state is None]
    REPORT.check(not waiting, f"{len(subscribers)} subscribers got their snapshot"
                 + (f" (not: {waiting[:5]})" if waiting else ""))

    # 3. writers
    writers = [Writer(index, endpoint, nginx, world, stop_writes, random.Random(f"{args.seed}-{index}"),
                      owns_library_names=(index == len(replicas)))
               for index, endpoint in enumerate(writers_endpoints)]
    for writer in writers:
        writer.start()
    log(f"{len(writers)} writers ({', '.join(w.endpoint.name for w in writers)}), {len(subscribers)} subscribers, "
        f"{args.seconds:.0f} s")

    start = time.monotonic()
    drop_at = start + 0.2 * args.seconds
    kill_at = start + 0.35 * args.seconds
    restart_at = start + 0.6 * args.seconds
    end_at = start + args.seconds
    killed = None
    prober = None
    outage = None  # (requested, acknowledged, recovered)

    # 4. every other subscriber loses its connection: it resumes through nginx with Last-Event-ID
    time.sleep(max(0.0, drop_at - time.monotonic()))
    dropped = [s for s in subscribers[::2] if s.stream is not None]
    for subscriber in dropped:
        subscriber.drop()
    log(f"cut {len(dropped)} subscribers' connections")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(s.connections < 2 and not s.finished for s in dropped):
        time.sleep(0.1)
    stuck = [s.name for s in dropped if s.connections < 2 and not s.finished]
    REPORT.check(not stuck, f"{len(dropped)} subscribers whose connection was cut resumed through nginx"
                 + (f" (not: {stuck[:5]})" if stuck else ""))

    # 4a. kill -9 one replica
    def kill_replica():
        killed = replicas[1]
        os.kill(killed.pid, signal.SIGKILL)
        killed.killed = True
        log(f"killed {killed.name} (pid {killed.pid}) with SIGKILL")
        world.windows.append((time.monotonic() - 0.5, time.monotonic() + 3))
        return killed

    def check_resumed(killed):
        # its direct subscribers must come back through nginx within a few seconds
        direct = [s for s in subscribers if s.home is killed and s.state != "deleted"]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(s.connected_to != "nginx" and not s.finished for s in direct):
            time.sleep(0.1)
        stuck = [s.name for s in direct if s.connected_to != "nginx" and not s.finished]
        REPORT.check(not stuck, f"the {len(direct)} subscribers of the killed replica resumed through nginx"
                     + (f" (not: {stuck[:5]})" if stuck else ""))

    kill_now = not args.no_kill and len(replicas) > 1
    if kill_now and not args.kill_during_failover:
        time.sleep(max(0.0, kill_at - time.monotonic()))
        check_resumed(kill_replica())

    # 4b. restart PostgreSQL, or fail over to the standby
    what = "failover" if args.failover else "restart"
    if args.control_pid and args.ack_file:
        time.sleep(max(0.0, restart_at - time.monotonic()))
        doomed = replicas[1] if kill_now else None  # killed by now, or at the failover
        live = [endpoint for endpoint in endpoints if not endpoint.killed and endpoint is not doomed]
        prober = Prober(live, probe_book, world, stop_probe)
        prober.start()
        requested = time.monotonic()
        os.kill(args.control_pid, signal.SIGUSR1)
        if args.failover:
            log(f"asked for a failover (promotion {args.postgres_down:g} s after the kill)")
        else:
            log(f"asked for a PostgreSQL restart ({args.postgres_down:g} s down)")
        if kill_now and args.kill_during_failover:
            killed = kill_replica()
        deadline = requested + args.postgres_down + 40
        acknowledged = None
        while time.monotonic() < deadline:
            if os.path.exists(args.ack_file):
                with open(args.ack_file) as file:
                    text = file.read().strip()
                if text:
                    acknowledged = time.monotonic()
                    break
            time.sleep(0.05)
        # "ok SECONDS": a failover, and when (since the epoch) the primary was killed
        words = text.split() if acknowledged else []
        text = words[0] if words else ""
        began = requested
        if len(words) > 1:
            began = time.monotonic() - (time.time() - float(words[1]))
        REPORT.check(acknowledged is not None and text == "ok",
                     f"PostgreSQL's {what} was done (replicas.sh: {text if acknowledged else 'no answer'})")
        # every live replica answers /healthz 200 and takes a direct write, by itself
        recovered = {}
        recovery_deadline = time.monotonic() + RECOVERY_LIMIT
        probe_client = Client()
        for endpoint in live:
            while time.monotonic() < recovery_deadline:
                health = probe_client.call(endpoint, "GET", "/healthz", timeout=PROBE_TIMEOUT)
                if health.status == 200:
                    probe = probe_client.call(endpoint, "POST", f"/libraries/{libraries[0]}/books",
                                              {"title": f"recovery-{endpoint.name}"}, timeout=PROBE_TIMEOUT)
                    if probe.status == 201:
                        with world.lock:
                            world.books[probe.body["id"]] = {
                                "library": libraries[0], "title": f"recovery-{endpoint.name}", "author": "",
                                "deleted": False, "owner": -2, "uncertain": set()}
                        recovered[endpoint.name] = time.monotonic() - (acknowledged or requested)
                        break
                time.sleep(0.2)
        probe_client.close()
        stop_probe.set()
        prober.join(10)
        outage = (requested, acknowledged, time.monotonic(), began)
        world.windows.append((requested - 0.5, time.monotonic() + 2))
        missing = [e.name for e in live if e.name not in recovered]
        if kill_now and args.kill_during_failover:
            check_resumed(killed)
        REPORT.check(not missing, f"after the {what} every live replica answers /healthz and accepts a write "
                     f"({', '.join(f'{n} {t:.1f} s' for n, t in recovered.items())})"
                     + (f"; not recovered within {RECOVERY_LIMIT:.0f} s: {missing}" if missing else ""))

    # 5. the rest of the load, then settle
    time.sleep(max(0.0, end_at - time.monotonic()))
    stop_writes.set()
    for writer in writers:
        writer.join(WRITE_BUDGET + 10)
    REPORT.check(not any(w.is_alive() for w in writers), "the writers stopped")
    log(f"writes stopped: {sum(w.acknowledged for w in writers)} acknowledged, "
        f"{sum(w.gave_up for w in writers)} gave up")

    settle_started = time.monotonic()
    mismatches = []
    while True:
        mismatches = []
        for subscriber in subscribers:
            state, gone = subscriber.snapshot()
            try:
                truth = subscriber.truth(client, nginx)
            except (RuntimeError, KeyError, TypeError) as error:
                truth = f"GET failed: {error}"
            if gone and truth == "deleted":
                continue
            if state != truth:
                mismatches.append((subscriber, state, truth))
        if not mismatches or time.monotonic() - settle_started > SETTLE_LIMIT:
            break
        time.sleep(1)
    settle = time.monotonic() - settle_started
    REPORT.check(not mismatches, f"every subscriber's state equals GET through nginx "
                 f"({len(subscribers)} subscribers, settled in {settle:.1f} s)")
    for subscriber, state, truth in mismatches[:MAX_EXAMPLES]:
        REPORT.note(f"{subscriber.name} (last id {subscriber.last_id}, via {subscriber.connected_to}): "
                    f"{shorten(json.dumps(state), 300)} != {shorten(json.dumps(truth), 300)}")
    stop_streams.set()
    for subscriber in subscribers:
        subscriber.join(5)

    # acknowledged writes
    wrong = []
    checked = 0
    with world.lock:
        books_snapshot = {book: dict(info, uncertain=set(info["uncertain"])) for book, info in world.books.items()}
        names = dict(world.library_names)
    for book, info in books_snapshot.items():
        response = get_with_retries(client, nginx, "GET", f"/books/{book}?fields=title,author,libraryId")
        checked += 1
        if info["deleted"] and "deleted" not in info["uncertain"]:
            if response.status != 404:
                wrong.append(f"{book[:8]} deleted (acknowledged) but GET gives {response.status}")
            continue
        if response.status == 404:
            if "deleted" not in info["uncertain"]:
                wrong.append(f"{book[:8]} missing (GET 404), never deleted")
            continue
        if response.status != 200:
            wrong.append(f"{book[:8]}: GET {response.status} {response.error}")
            continue
        for field in ("title", "author"):
            if field not in info["uncertain"] and response.body[field] != info[field]:
                wrong.append(f"{book[:8]} {field} {response.body[field]!r} != acknowledged {info[field]!r}")
        if response.body["libraryId"] != info["library"]:
            wrong.append(f"{book[:8]} in library {response.body['libraryId'][:8]}, not {info['library'][:8]}")
    for library, name in names.items():
        if name is None:
            continue
        response = get_with_retries(client, nginx, "GET", f"/libraries/{library}?fields=name")
        checked += 1
        if response.status != 200 or response.body["name"] != name:
            wrong.append(f"library {library[:8]} name {response.body if response.status == 200 else response.status} != {name!r}")
    uncertain = sum(1 for info in books_snapshot.values() if info["uncertain"])
    REPORT.check(not wrong, f"every acknowledged write is what GET returns ({checked} books and libraries; "
                 f"{uncertain} with a write whose outcome is unknown, not checked)")
    for line in wrong[:MAX_EXAMPLES]:
        REPORT.note(line)
    if args.direct_database:
        check_directly(args, books_snapshot, names)

    # the outage
    if outage is not None:
        requested, acknowledged, finished, began = outage
        results = [r for r in prober.results if requested <= r[0] <= finished]
        hung = [r for r in results if r[3] == 0 and "timed out" in (r[5] or "")]
        broken = [r for r in results if r[3] == 0 and r not in hung]
        statuses = defaultdict(int)
        for r in results:
            statuses[f"{r[1]} {r[2]} {r[3]}"] += 1
        REPORT.note(f"prober during the {what}: " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())))
        REPORT.check(not hung, f"no request hung during the {what} ({len(results)} probes, "
                     f"{PROBE_TIMEOUT:g} s timeout, slowest {max((r[4] for r in results), default=0):.2f} s)"
                     + (f": {[(r[1], r[2]) for r in hung[:5]]}" if hung else ""))
        REPORT.check(not broken, f"no probe's connection broke during the {what}"
                     + (f": {[(r[1], r[2], r[5]) for r in broken[:5]]}" if broken else ""))
        other = [r for r in results if r[3] not in (0, 200, 503)]
        REPORT.check(not other, f"the probes got 200 or 503 during the {what}"
                     + (f", not {[(r[1], r[2], r[3]) for r in other[:5]]}" if other else ""))
        unavailable = [r for r in results if r[3] == 503]
        if args.postgres:
            # The outage must have been felt. A request in flight at the kill gets a 503; one that
            # arrives while no primary answers waits in pgbouncer's queue and is answered once the
            # promoted standby is reachable, so after a failover a request held at least as long as
            # the promotion's delay counts too. The prober asks one endpoint at a time, so the
            # writers' 503s count as well.
            written = TALLY.count("write status:503")
            slowest = max((r[4] for r in results), default=0.0)
            held = args.failover and slowest >= args.postgres_down
            REPORT.check(len(unavailable) + written > 0 or held,
                         f"requests during the {what} got 503 or were held through it ({len(unavailable)} "
                         f"probes and {written} write attempts got 503; slowest probe {slowest:.2f} s)")
        else:
            REPORT.note(f"not on PostgreSQL: the restart only tested the plumbing ({len(unavailable)} 503s)")
        # the longest an endpoint left the prober's PATCHes unanswered: from the start of the first
        # one that failed (a 503) or was held (past HELD seconds, in pgbouncer's queue) to the end of
        # the next one answered promptly; one still failing when the prober stopped counts until
        # then (the recovery check above has already required a write accepted by every endpoint)
        windows = {}
        for endpoint_name in sorted({r[1] for r in prober.results}):
            patches = [r for r in prober.results if r[1] == endpoint_name and r[2] == "PATCH" and r[0] >= requested]
            outage_since, longest = None, 0.0
            for end, _, _, status, elapsed, _ in patches:
                if status == 200 and elapsed < HELD:
                    if outage_since is not None:
                        longest = max(longest, end - outage_since)
                        outage_since = None
                elif outage_since is None:
                    outage_since = end - elapsed
                    if status == 200:  # held, then answered
                        longest = max(longest, elapsed)
                        outage_since = None
            if outage_since is not None:
                longest = max(longest, finished - outage_since)
            windows[endpoint_name] = longest
        REPORT.note(f"longest wait for a write ({what}, from the first PATCH refused or held to the next "
                    "one answered): " + ", ".join(f"{name} {value:.2f} s" for name, value in windows.items()))
        with world.lock:
            retried = [r for r in world.retries if requested <= r[0]]
        if retried:
            slowest = max(retried, key=lambda r: r[1])
            REPORT.note(f"writes retried across the {what}: {len(retried)}, the longest answered "
                        f"{slowest[1]:.2f} s after its first attempt (via {slowest[2]})")
        # live events again: the first event of a write first sent after the outage began (the kill of
        # the primary, in a failover)
        with world.lock:
            after = [min(seen[0] for seen in world.seen[token]) for token, (_, _, first) in world.sent.items()
                     if first >= began and world.seen.get(token)]
        flowing = min(after) - began if after else None
        REPORT.check(flowing is not None, f"live events flow again after the {what}: the first event of a write "
                     f"sent after {'the kill' if args.failover else 'the request'} reached a subscriber "
                     + (f"{flowing:.2f} s after it" if flowing is not None else "never"))
    bad_503 = TALLY.count("violation:503 without Retry-After or problem+json")
    REPORT.check(bad_503 == 0, f"every 503 carried Retry-After and problem+json ({TALLY.count('503 seen')} seen)"
                 + (f": {TALLY.describe('violation:503 without Retry-After or problem+json')}" if bad_503 else ""))

    # event rules and other violations
    for kind, count in sorted(TALLY.matching("violation:").items()):
        if kind != "violation:503 without Retry-After or problem+json":
            REPORT.check(False, f"{kind[10:]}: {count} ({TALLY.describe(kind)})")
    REPORT.check(TALLY.count("violation:event ids not strictly increasing") == 0,
                 f"event ids strictly increased on every subscriber ({sum(s.events for s in subscribers)} events, "
                 f"{sum(max(0, s.connections - 1) for s in subscribers)} resumes)")
    crashes = TALLY.count("thread crash")
    REPORT.check(crashes == 0, "no client thread crashed" + (f": {TALLY.describe('thread crash')}" if crashes else ""))
    snapshots_on_resume = TALLY.count("snapshot on resume")
    if snapshots_on_resume:
        REPORT.note(f"snapshots on resume (history exceeded?): {snapshots_on_resume}: {TALLY.describe('snapshot on resume')}")

    # latency: a write sent to replica A until a subscriber connected directly to replica C != A saw it
    cross, same, any_direct = [], [], []
    with world.lock:
        for token, (sent, writer_endpoint, _) in world.sent.items():
            if writer_endpoint is None or any(a <= sent <= b for a, b in world.windows):
                continue
            for seen_at, subscriber_endpoint, _ in world.seen.get(token, []):
                if subscriber_endpoint is None:
                    continue
                latency = (seen_at - sent) * 1000
                if latency < 0:
                    continue
                any_direct.append(latency)
                (same if subscriber_endpoint == writer_endpoint else cross).append(latency)
    for label, values in (("cross-replica", cross), ("same replica", same)):
        if values:
            REPORT.note(f"{label} write-to-event latency: {len(values)} samples, p50 {percentile(values, 0.5):.1f} ms, "
                        f"p99 {percentile(values, 0.99):.1f} ms, max {max(values):.1f} ms")
    if len(replicas) > 1:
        ok = len(cross) >= 20 and percentile(cross, 0.99) <= args.latency_target_ms
        REPORT.check(ok, f"cross-replica commit-to-event p99 <= {args.latency_target_ms:g} ms "
                     f"({len(cross)} samples" + (f", p99 {percentile(cross, 0.99):.1f} ms)" if cross else ")"))
    else:
        REPORT.note("one replica: no cross-replica latency to measure")
    if args.results and cross and same:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Benchmarks", "lib"))
        import result_files

        def summary(values):
            return {"samples": len(values), "p50Ms": round(percentile(values, 0.5), 1),
                    "p99Ms": round(percentile(values, 0.99), 1), "maxMs": round(max(values), 1)}

        path = result_files.write_result("replicas-latency", {
            "seconds": args.seconds, "short": args.short, "failover": args.failover,
            "crossReplica": summary(cross), "sameReplica": summary(same),
            "acknowledgedWrites": sum(w.acknowledged for w in writers), "passed": REPORT.failed == 0})
        REPORT.note(f"latencies written to {path}")

    # the summary
    write_statuses = TALLY.matching("write status:")
    REPORT.note("write attempts by status: " + ", ".join(f"{k[13:]}: {v}" for k, v in sorted(write_statuses.items())))
    REPORT.note("events: " + ", ".join(f"{k[7:]}: {v}" for k, v in sorted(TALLY.matching("events:").items())))
    for kind in sorted(list(TALLY.matching("resumed via")) + list(TALLY.matching("stream ")) + ["resume got 404",
                       "create outcome unknown", "write gave up"]):
        if TALLY.count(kind):
            REPORT.note(f"{kind}: {TALLY.count(kind)} ({TALLY.describe(kind)[:200]})")
    REPORT.note("per writer: " + ", ".join(f"{w.name} {w.acknowledged} ok/{w.gave_up} unknown" for w in writers))
    client.close()
    return REPORT.summary()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - the run stopped early: a failure, with the summary so far
        traceback.print_exc()
        REPORT.check(False, "the driver stopped early (traceback above)")
        sys.exit(REPORT.summary() or 1)
