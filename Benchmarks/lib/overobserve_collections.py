"""Part 2 of Benchmarks/overobserve.py: over-observation and exactness of the live queries.

Collection streams (`/books/events?author=…&available=…&libraryId=…&fields=…`,
`/libraries/events?fields=…`) and multiplexed ones (`/events?watch=…` mixing books, libraries and
filtered collections), under random writes: single-field book PATCHes (author, available and
libraryId changes move books in and out of the filters), book creations and deletions, library
renames, creations and deletions (a library's deletion deletes its books).

The script keeps a model of every book and library it writes. After each write it computes, for
each subscriber (each watch of a multiplexed one), the change the wire format says it must get
(`added` with every requested field, `removed`, `changed` with only the requested fields whose
value changed, nothing when nothing it shows changed; for a single book or library: its changed
fields or `delete`), waits for it, and checks:

- foreign fields: a field in an event that the subscriber did not ask for;
- foreign items: an `added`/`changed` item that does not match the subscriber's filters after
  that write (or a `removed` id it did not have);
- mismatches: an event whose content differs from the expected one (including a `changed`
  carrying a field whose value did not change), a missing event, an event for a write that
  changed nothing the subscriber shows, a write split over several events or frames;
- at the end, each subscriber's state rebuilt from its events equals the matching GET.

Push-everything for comparison: every change of every item (the book a write changes, the books
a library deletion deletes, and each library whose name or bookCount changes) goes to every
subscriber (to each watch of a multiplexed one: one entry each) with the whole item.
"""

import http.client
import json
import selectors
import socket
import time
import urllib.parse

from benchlib import dechunk, event_fields

WAIT_SECONDS = 10


def library_id(n):
    return "00000000-0000-4000-8000-%012d" % n


def book_id(n):
    return "00000000-0000-4000-9000-%012d" % n


def compact(value):
    return json.dumps(value, separators=(",", ":"))


class Client:
    def __init__(self, port):
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method, path, body=None):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.connection.request(method, path, body=None if body is None else compact(body), headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        return response.status, (json.loads(data) if data else None)

    def must(self, method, path, body=None, status=(200, 201, 204)):
        code, data = self.request(method, path, body)
        if code not in status:
            raise SystemExit("overobserve: %s %s -> %d %s" % (method, path, code, data))
        return data

    def all_items(self, path):
        items, cursor = [], None
        while True:
            separator = "&" if "?" in path else "?"
            page = self.must("GET", path + separator + "limit=500" + ("&cursor=" + cursor if cursor else ""))
            items += page["items"]
            cursor = page.get("nextCursor")
            if not cursor:
                return items


# ---- views: what one stream (or one watch) shows ------------------------------------------------


def project(record, fields):
    return {field: record[field] for field in fields}


class BooksView:
    """`/books/events?…`: the books matching the filters, with `fields`."""

    def __init__(self, fields, libraryId=None, author=None, available=None):
        self.fields = fields
        self.filter = {key: value for key, value in
                       (("libraryId", libraryId), ("author", author), ("available", available)) if value is not None}
        query = [(key, str(value).lower() if isinstance(value, bool) else value) for key, value in self.filter.items()]
        self.query = urllib.parse.urlencode(query + [("fields", ",".join(fields))], quote_via=urllib.parse.quote,
                                            safe=",")
        self.stream_path = "/books/events?" + self.query
        self.watch = "/books?" + self.query
        self.state = None

    def matches(self, book):
        return book is not None and all(book[key] == value for key, value in self.filter.items())

    def snapshot(self, data):
        self.state = {item["id"]: {k: v for k, v in item.items() if k != "id"} for item in data["items"]}

    def expected(self, books, libraries):
        return expected_membership(books, self.matches, self.fields)

    def apply(self, kind, data, check):
        if kind != "change":
            check.problem("mismatch", "%s: unexpected %s event" % (self.stream_path, kind))
            return
        apply_membership(self.state, data, self.fields, self.matches, check, self.stream_path)

    def truth(self, client):
        items = client.all_items("/books?" + self.query.replace("fields=", "fields=id,"))
        return {item["id"]: {k: v for k, v in item.items() if k != "id"} for item in items}


class LibrariesView:
    """`/libraries/events?fields=…`: every library."""

    def __init__(self, fields):
        self.fields = fields
        self.query = "fields=" + ",".join(fields)
        self.stream_path = "/libraries/events?" + self.query
        self.watch = "/libraries?" + self.query
        self.state = None

    def snapshot(self, data):
        self.state = {item["id"]: {k: v for k, v in item.items() if k != "id"} for item in data["items"]}

    def expected(self, books, libraries):
        return expected_membership(libraries, lambda library: library is not None, self.fields)

    def apply(self, kind, data, check):
        if kind != "change":
            check.problem("mismatch", "%s: unexpected %s event" % (self.stream_path, kind))
            return
        apply_membership(self.state, data, self.fields, lambda item: item is not None, check, self.stream_path,
                         model=check.libraries)

    def truth(self, client):
        items = client.all_items("/libraries?fields=id," + ",".join(self.fields))
        return {item["id"]: {k: v for k, v in item.items() if k != "id"} for item in items}


class BookView:
    """A watch `/books/{id}?fields=…`."""

    def __init__(self, ident, fields):
        self.ident, self.fields = ident, fields
        self.watch = "/books/%s?fields=%s" % (ident, ",".join(fields))
        self.state = None

    def snapshot(self, data):
        self.state = {k: v for k, v in data.items() if k != "id"}

    def expected(self, books, libraries):
        if self.ident not in books:
            return None
        before, after = books[self.ident]
        if after is None:
            return "delete"
        delta = {f: after[f] for f in self.fields if after[f] != before[f]}
        return delta or None

    def apply(self, kind, data, check):
        if not check_resource_event(self, kind, data, set(), check):
            return
        if self.state == "deleted":
            check.problem("mismatch", "%s: change after delete" % self.watch)
            return
        self.state.update({k: v for k, v in data.items() if k != "id"})

    def normalize(self, kind, data):
        return "delete" if kind == "delete" else {k: v for k, v in data.items() if k != "id"}

    def truth(self, client):
        status, data = client.request("GET", "/books/%s?fields=%s" % (self.ident, ",".join(self.fields)))
        if status == 404:
            return "deleted"
        return {k: v for k, v in data.items() if k != "id"}


def check_resource_event(view, kind, data, extra, check):
    """The checks every event of one watched resource passes: its id, and no field beyond the
    view's `fields` and `extra`. A `delete` marks the view deleted. Returns whether to apply it."""
    if data.get("id") != view.ident:
        check.problem("foreign_items", "%s: event for %s" % (view.watch, data.get("id")))
    if kind == "delete":
        view.state = "deleted"
        return False
    foreign = set(data) - set(view.fields) - {"id"} - extra
    if foreign:
        check.problem("foreign_fields", "%s: fields %s" % (view.watch, sorted(foreign)))
    return True


class LibraryView:
    """A watch `/libraries/{id}?fields=name,bookCount,books.title`: its fields and its books'."""

    def __init__(self, ident, fields, book_fields):
        self.ident, self.fields, self.book_fields = ident, fields, book_fields
        self.watch = "/libraries/%s?fields=%s" % (ident, ",".join(fields + ["books." + f for f in book_fields]))
        self.members = BooksView(book_fields, libraryId=ident)
        self.state = None

    def snapshot(self, data):
        self.state = {k: v for k, v in data.items() if k not in ("id", "books")}
        self.members.snapshot({"items": data.get("books", [])})

    def expected(self, books, libraries):
        if self.ident in libraries and libraries[self.ident][1] is None:
            return "delete"
        delta = {}
        if self.ident in libraries:
            before, after = libraries[self.ident]
            delta = {f: after[f] for f in self.fields if after[f] != before[f]}
        members = self.members.expected(books, libraries) if self.book_fields else None
        if members:
            delta["books"] = members
        return delta or None

    def apply(self, kind, data, check):
        if not check_resource_event(self, kind, data, {"books"} if self.book_fields else set(), check):
            return
        self.state.update({k: v for k, v in data.items() if k not in ("id", "books")})
        if "books" in data:
            apply_membership(self.members.state, data["books"], self.book_fields, self.members.matches, check,
                             self.watch)

    def normalize(self, kind, data):
        if kind == "delete":
            return "delete"
        result = {k: v for k, v in data.items() if k not in ("id", "books")}
        if data.get("books"):
            result["books"] = normalize_membership(data["books"])
        return result

    def truth(self, client):
        status, data = client.request("GET", "/libraries/%s?fields=%s" % (self.ident, ",".join(self.fields)))
        if status == 404:
            return "deleted"
        own = {k: v for k, v in data.items() if k != "id"}
        if not self.book_fields:
            return own, {}
        items = client.all_items("/libraries/%s/books?fields=id,%s" % (self.ident, ",".join(self.book_fields)))
        return own, {item["id"]: {k: v for k, v in item.items() if k != "id"} for item in items}

    def rebuilt(self):
        return self.state if self.state == "deleted" else (self.state, self.members.state)


def expected_membership(pairs, present, fields):
    """The change a collection stream must send for items that went from `before` to `after`
    (None: absent): `present` says whether an item is in the collection."""
    added, removed, changed = {}, [], {}
    for ident, (before, after) in pairs.items():
        was, now = present(before), present(after)
        if now and not was:
            added[ident] = project(after, fields)
        elif was and not now:
            removed.append(ident)
        elif was and now:
            delta = {f: after[f] for f in fields if after[f] != before[f]}
            if delta:
                changed[ident] = delta
    return membership(added, removed, changed)


def membership(added, removed, changed):
    result = {}
    if added:
        result["added"] = added
    if removed:
        result["removed"] = sorted(removed)
    if changed:
        result["changed"] = changed
    return result or None


def normalize_membership(data):
    result = {}
    if data.get("added"):
        result["added"] = {item["id"]: {k: v for k, v in item.items() if k != "id"} for item in data["added"]}
    if data.get("removed"):
        result["removed"] = sorted(data["removed"])
    if data.get("changed"):
        result["changed"] = {item["id"]: {k: v for k, v in item.items() if k != "id"} for item in data["changed"]}
    return result or None


def apply_membership(state, data, fields, matches, check, name, model=None):
    """Applies `{"added","removed","changed"}` to `state`, counting unrequested fields and items."""
    model = check.books if model is None else model
    foreign = set(data) - {"added", "removed", "changed"}
    if foreign:
        check.problem("mismatch", "%s: keys %s" % (name, sorted(foreign)))
    for part in ("added", "changed"):
        for item in data.get(part, []):
            extra = set(item) - set(fields) - {"id"}
            if extra:
                check.problem("foreign_fields", "%s: %s %s carries %s" % (name, part, item["id"], sorted(extra)))
            if item["id"] in model and not matches(model[item["id"]]):
                check.problem("foreign_items", "%s: %s %s does not match" % (name, part, item["id"]))
            if part == "added":
                if item["id"] in state:
                    check.problem("mismatch", "%s: added %s it already has" % (name, item["id"]))
                state[item["id"]] = {k: v for k, v in item.items() if k != "id"}
            else:
                if item["id"] not in state:
                    check.problem("foreign_items", "%s: changed %s it does not have" % (name, item["id"]))
                    state[item["id"]] = {}
                state[item["id"]].update({k: v for k, v in item.items() if k != "id"})
    for ident in data.get("removed", []):
        if ident not in state:
            check.problem("foreign_items", "%s: removed %s it does not have" % (name, ident))
        state.pop(ident, None)


def normalize(view, kind, data):
    if isinstance(view, (BooksView, LibrariesView)):
        return normalize_membership(data) if kind == "change" else kind
    return view.normalize(kind, data)


# ---- streams ------------------------------------------------------------------------------------


class Stream:
    """An SSE stream read without blocking: chunked framing, events split on blank lines, each
    as (event, id, data with its `data:` lines joined by newlines, bytes on the wire)."""

    def __init__(self, port, path, views, multiplexed):
        self.views, self.multiplexed, self.path = views, multiplexed, path
        self.by_watch = {view.watch: view for view in views}
        self.socket = socket.create_connection(("127.0.0.1", port))
        self.socket.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
                             % path).encode())
        self.socket.setblocking(False)
        self.raw, self.body = bytearray(), bytearray()
        self.head_done = False
        self.pending = []
        self.snapshot_done = False
        self.events = self.entries = self.bytes = 0
        self.closed = False

    def readable(self):
        try:
            data = self.socket.recv(1 << 20)
        except BlockingIOError:
            return
        if not data:
            self.closed = True
            return
        self.raw += data
        if not self.head_done:
            if b"\r\n\r\n" not in self.raw:
                return
            head, rest = bytes(self.raw).split(b"\r\n\r\n", 1)
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit("overobserve: %s refused: %r" % (self.path, head[:200] + rest[:300]))
            self.head_done, self.raw = True, bytearray(rest)
        dechunk(self.raw, self.body)
        while True:
            end = self.body.find(b"\n\n")
            if end < 0:
                break
            block = bytes(self.body[:end])
            del self.body[:end + 2]
            kind, ident, data = event_fields(block)
            if data:
                self.pending.append((kind, None if ident is None else ident.decode(), json.loads(b"\n".join(data)),
                                     len(block) + 2))


class Check:
    def __init__(self):
        self.counts = {"foreign_fields": 0, "foreign_items": 0, "mismatch": 0, "state_mismatch": 0}
        self.books, self.libraries = {}, {}
        self.shown = 0

    def problem(self, kind, text):
        self.counts[kind] += 1
        if self.shown < 30:
            self.shown += 1
            print("overobserve: %s: %s" % (kind, text))


# ---- the run --------------------------------------------------------------------------------------


def run(port, rng, writes=400, copies=3):
    client = Client(port)
    check = Check()
    libraries = {item["id"]: item for item in client.all_items("/libraries")}
    seeded = sorted(libraries)
    main_library, second_library = library_id(1), library_id(2)
    if main_library not in libraries or second_library not in libraries:
        raise SystemExit("overobserve: the seeded libraries 1 and 2 are missing")
    # The books the writes touch: some of library 1 and 2, the seeded "Author 5" ones, others at random.
    total = sum(library["bookCount"] for library in libraries.values())
    candidates = set()
    for ident in client.all_items("/libraries/%s/books?fields=id" % main_library)[:8]:
        candidates.add(ident["id"])
    for ident in client.all_items("/libraries/%s/books?fields=id" % second_library)[:4]:
        candidates.add(ident["id"])
    for ident in client.all_items("/books?author=Author%205&fields=id")[:4]:
        candidates.add(ident["id"])
    while len(candidates) < 40:
        candidates.add(book_id(rng.randrange(1, total + 1)))
    books = {}
    for ident in sorted(candidates):
        status, book = client.request("GET", "/books/" + ident)
        if status == 200:
            books[ident] = book
    check.books, check.libraries = books, libraries
    pool = sorted(books)
    authors = ["Author 5", "Author 6", "Writer A"]
    targets = [main_library, second_library, seeded[-1]]
    temporary = []

    def plain_views():
        return [
            BooksView(["title"], author="Author 5"),
            BooksView(["author"], available=False),
            LibrariesView(["bookCount"]),
            BooksView(["title", "available"], libraryId=main_library),
            BooksView(["publishedYear", "libraryId"], libraryId=main_library, author="Author 6", available=True),
            LibrariesView(["name"]),
        ]

    watched = rng.sample(pool, 3)

    def mux_views(n):
        if n % 2 == 0:
            return [BookView(watched[0], ["title"]), BookView(watched[1], ["author", "available"]),
                    LibraryView(main_library, ["name", "bookCount"], []),
                    BooksView(["title"], author="Author 6")]
        return [LibraryView(second_library, ["bookCount"], ["title"]), BookView(watched[2], ["isbn"]),
                BooksView(["author"], libraryId=main_library, available=False), LibrariesView(["name"])]

    selector = selectors.DefaultSelector()
    streams = []
    for _ in range(copies):
        for view in plain_views():
            streams.append(Stream(port, view.stream_path, [view], False))
    for n in range(2 * copies):
        views = mux_views(n)
        query = urllib.parse.urlencode([("watch", view.watch) for view in views])
        streams.append(Stream(port, "/events?" + query, views, True))
    for stream in streams:
        selector.register(stream.socket, selectors.EVENT_READ, stream)

    def pump(seconds):
        for key, _ in selector.select(timeout=seconds):
            key.data.readable()

    # Snapshots.
    deadline = time.monotonic() + 60
    while True:
        for stream in streams:
            while stream.pending and not stream.snapshot_done:
                kind, _, data, _ = stream.pending.pop(0)
                if stream.multiplexed:
                    for entry in data:
                        view = stream.by_watch.get(entry["watch"])
                        if view is None or entry["event"] != "snapshot":
                            check.problem("mismatch", "%s: first frame has %s" % (stream.path, entry))
                            continue
                        view.snapshot(entry["data"])
                elif kind == "snapshot":
                    stream.views[0].snapshot(data)
                else:
                    check.problem("mismatch", "%s: first event is %s" % (stream.path, kind))
                stream.snapshot_done = all(view.state is not None for view in stream.views)
        if all(stream.snapshot_done for stream in streams):
            break
        if time.monotonic() > deadline:
            raise SystemExit("overobserve: not every collection stream got its snapshot")
        pump(0.1)

    plain = [s for s in streams if not s.multiplexed]
    mux = [s for s in streams if s.multiplexed]
    watches = sum(len(s.views) for s in mux)
    push = {"events": 0, "entries": 0, "bytes": 0, "mux_bytes": 0}
    expected_events = expected_frames = expected_entries = 0
    operations = {}

    for n in range(writes):
        touched_books, touched_libraries = {}, {}

        def touch_library(ident, after):
            before = touched_libraries[ident][0] if ident in touched_libraries else (
                dict(libraries[ident]) if ident in libraries else None)
            touched_libraries[ident] = (before, after)
            if after is None:
                libraries.pop(ident, None)
            else:
                libraries[ident] = after

        def count(ident, delta):
            record = dict(libraries[ident])
            record["bookCount"] += delta
            touch_library(ident, record)

        roll = rng.random()
        if len(pool) < 12:
            roll = 0.65
        if roll < 0.60:
            ident = rng.choice(pool)
            field = rng.choice(["title", "author", "available", "isbn", "publishedYear", "libraryId"])
            value = {"title": "Title %d" % n, "author": rng.choice(authors), "available": not books[ident]["available"],
                     "isbn": isbn13(rng), "publishedYear": 1000 + n,
                     "libraryId": rng.choice(targets + temporary)}[field]
            before = books[ident]
            after = client.must("PATCH", "/books/" + ident, {field: value})
            operation = "patch " + field
            if before["libraryId"] != after["libraryId"]:
                count(before["libraryId"], -1)
                count(after["libraryId"], +1)
            books[ident] = after
            touched_books[ident] = (before, after)
        elif roll < 0.72:
            library = rng.choice(targets + temporary)
            after = client.must("POST", "/books", {
                "libraryId": library, "title": "New %d" % n, "author": rng.choice(authors),
                "available": rng.random() < 0.5, "publishedYear": 2000 + n % 20})
            operation = "create book"
            books[after["id"]] = after
            pool.append(after["id"])
            touched_books[after["id"]] = (None, after)
            count(library, +1)
        elif roll < 0.80:
            ident = rng.choice(pool)
            client.must("DELETE", "/books/" + ident)
            operation = "delete book"
            before = books.pop(ident)
            pool.remove(ident)
            touched_books[ident] = (before, None)
            count(before["libraryId"], -1)
        elif roll < 0.86:
            ident = rng.choice(targets + temporary)
            after = client.must("PATCH", "/libraries/" + ident, {"name": "Renamed %d" % n})
            operation = "rename library"
            touch_library(ident, after)
        elif roll < 0.93 or not temporary:
            after = client.must("POST", "/libraries", {"name": "Temporary %d" % n})
            operation = "create library"
            temporary.append(after["id"])
            touch_library(after["id"], after)
        else:
            ident = rng.choice(temporary)
            client.must("DELETE", "/libraries/" + ident)
            operation = "delete library"
            temporary.remove(ident)
            for book in [b for b in books.values() if b["libraryId"] == ident]:
                touched_books[book["id"]] = (book, None)
                del books[book["id"]]
                pool.remove(book["id"])
            touch_library(ident, None)
        operations[operation] = operations.get(operation, 0) + 1

        # What each subscriber must get.
        expectations = {}
        for stream in streams:
            expectations[stream] = {view: view.expected(touched_books, touched_libraries) for view in stream.views}
            expectations[stream] = {view: e for view, e in expectations[stream].items() if e is not None}
        # Push-everything: each changed item, whole, to every subscriber (every watch).
        items = [after or before for before, after in touched_books.values()]
        items += [after or before for before, after in touched_libraries.values()]
        sizes = [len(compact(item)) for item in items]
        framing = len("event: change\nid: 000000\ndata: \n\n")
        push["events"] += len(items) * len(streams)
        push["bytes"] += len(plain) * sum(size + framing for size in sizes)
        for stream in mux:
            for view in stream.views:
                push["entries"] += len(items)
                push["mux_bytes"] += sum(size + framing + len(compact(view.watch)) + 32 for size in sizes)

        # Wait for the events the model expects.
        deadline = time.monotonic() + WAIT_SECONDS
        while any(expectations[s] and not s.pending for s in streams) and time.monotonic() < deadline:
            pump(0.05)
        pump(0)
        for stream in streams:
            expected = expectations[stream]
            received = stream.pending
            stream.pending = []
            if expected and stream.multiplexed:
                expected_frames += 1
                expected_entries += len(expected)
            elif expected:
                expected_events += 1
            if not received:
                if expected:
                    check.problem("mismatch", "write %d (%s): %s got nothing, expected %s"
                                  % (n, operation, stream.path, describe(expected)))
                continue
            if len(received) > 1:
                check.problem("mismatch", "write %d (%s): %s got %d events for one write"
                              % (n, operation, stream.path, len(received)))
            for kind, _, data, size in received:
                stream.events += 1
                stream.bytes += size
                if stream.multiplexed:
                    if kind != "message":
                        check.problem("mismatch", "%s: frame with event %s" % (stream.path, kind))
                    got = {}
                    for entry in data:
                        stream.entries += 1
                        view = stream.by_watch.get(entry["watch"])
                        if view is None:
                            check.problem("foreign_items", "%s: entry for watch %s" % (stream.path, entry["watch"]))
                            continue
                        view.apply(entry["event"], entry["data"], check)
                        got[view] = normalize(view, entry["event"], entry["data"])
                else:
                    view = stream.views[0]
                    view.apply(kind, data, check)
                    got = {view: normalize(view, kind, data)}
                for view in set(got) | set(expected):
                    if got.get(view) != expected.get(view):
                        check.problem("mismatch", "write %d (%s): %s%s got %s, expected %s" % (
                            n, operation, stream.path if not stream.multiplexed else "/events watch ",
                            view.watch if stream.multiplexed else "", got.get(view), expected.get(view)))
                expected = {}  # a second event for the same write is all unexpected

    # Stragglers, then the final state against GET.
    quiet = time.monotonic()
    while time.monotonic() - quiet < 1.0:
        pump(0.1)
        for stream in streams:
            for kind, _, data, _ in stream.pending:
                check.problem("mismatch", "%s: event after the last write: %s %s" % (stream.path, kind, data))
                quiet = time.monotonic()
            stream.pending = []
    truths = {}
    for stream in streams:
        for view in stream.views:
            key = view.watch
            if key not in truths:
                truths[key] = view.truth(client)
            rebuilt = view.rebuilt() if isinstance(view, LibraryView) else view.state
            if rebuilt != truths[key]:
                check.problem("state_mismatch", "%s%s: rebuilt state differs from GET: %s" % (
                    stream.path[:60], " watch " + view.watch if stream.multiplexed else "",
                    difference(rebuilt, truths[key])))
        if stream.closed:
            check.problem("mismatch", "%s: the server closed the stream" % stream.path)
        stream.socket.close()

    delivered_plain = sum(s.events for s in plain)
    delivered_mux = sum(s.events for s in mux)
    entries = sum(s.entries for s in mux)
    result = {
        "writes": writes,
        "operations": operations,
        "collection_subscribers": len(plain),
        "multiplexed_subscribers": len(mux),
        "watches": watches,
        "events_delivered": delivered_plain,
        "mux_frames_delivered": delivered_mux,
        "mux_entries_delivered": entries,
        "push_events": push["events"],
        "push_events_collections": push["events"] * len(plain) // max(1, len(streams)),
        "push_events_mux": push["events"] * len(mux) // max(1, len(streams)),
        "push_entries_mux": push["entries"],
        "delivered_bytes": sum(s.bytes for s in plain),
        "push_bytes": push["bytes"],
        "mux_delivered_bytes": sum(s.bytes for s in mux),
        "mux_push_bytes": push["mux_bytes"],
        "events_expected": expected_events,
        "mux_frames_expected": expected_frames,
        "mux_entries_expected": expected_entries,
    }
    result.update(check.counts)
    result["failures"] = sum(check.counts.values())
    print("collections: %d subscribers (%s), %d writes %s: %d events delivered, push-everything would send %d "
          "(%.1fx); %d bytes vs %d (%.1fx)" % (
              len(plain), ", ".join(v.stream_path for v in plain_views()), writes, compact(operations),
              delivered_plain, result["push_events_collections"],
              result["push_events_collections"] / max(1, delivered_plain), result["delivered_bytes"],
              push["bytes"], push["bytes"] / max(1, result["delivered_bytes"])))
    print("multiplexed: %d subscribers, %d watches: %d frames / %d entries delivered, push-everything would send "
          "%d events / %d entries (%.1fx entries); %d bytes vs %d (%.1fx)" % (
              len(mux), watches, delivered_mux, entries, result["push_events_mux"], push["entries"],
              push["entries"] / max(1, entries), result["mux_delivered_bytes"], push["mux_bytes"],
              push["mux_bytes"] / max(1, result["mux_delivered_bytes"])))
    print("checks: unrequested fields %d, unrequested items %d, wrong/missing/extra events %d, "
          "states unequal to GET %d" % (check.counts["foreign_fields"], check.counts["foreign_items"],
                                        check.counts["mismatch"], check.counts["state_mismatch"]))
    return result


def describe(expected):
    return {view.watch: value for view, value in expected.items()}


def difference(rebuilt, truth):
    if not isinstance(rebuilt, dict) or not isinstance(truth, dict):
        return "%.300s vs %.300s" % (rebuilt, truth)
    only_rebuilt = sorted(set(rebuilt) - set(truth))[:3]
    only_truth = sorted(set(truth) - set(rebuilt))[:3]
    differ = [(k, rebuilt[k], truth[k]) for k in sorted(set(rebuilt) & set(truth)) if rebuilt[k] != truth[k]][:3]
    return "only in events %s, only in GET %s, different %s" % (only_rebuilt, only_truth, differ)


def isbn13(rng):
    digits = [9, 7, 8] + [rng.randrange(10) for _ in range(9)]
    check = (10 - sum(d * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits)) % 10) % 10
    return "".join(map(str, digits + [check]))
