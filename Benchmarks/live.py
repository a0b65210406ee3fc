#!/usr/bin/env python3
"""The live engine at real sizes: one `books.title` subscriber on a library of N books under
sustained PATCH load on random members, subscribers joining it under that load, and (through
bench.py) fan-out to thousands of subscribers of one book.

    Benchmarks/live.py [--sizes 100,10000,100000,1000000] [--seconds 30] [--first-joins 3] [--server PATH]

For each size: a database with one library holding N books (Benchmarks/seed.py), a fresh server
on it, one subscriber of `/libraries/{id}/events?fields=books.title` (a raw-socket client that
rebuilds every title from its events), a joiner measuring the time to a full snapshot before the
load, then (a) wrk PATCHing random members' titles for `--seconds`, and (b) a third as long again
while a new subscriber joins every two seconds. Each title carries the time it was sent, so the
subscriber measures PATCH-to-event latency. RSS and `/metrics`' live lag are sampled every second.
At the end the subscriber's titles are compared with the database: any stale title is a failure.

Writes Benchmarks/results/live.{md,json} and the README block between `live:begin` and
`live:end`. Everything runs on 127.0.0.1, every step has a time limit, and it stops by itself.
"""

import argparse
import concurrent.futures
import datetime
import json
import multiprocessing
import os
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import Server, commit, dechunk, event_fields, log, machine, metric, percentile, stop_all  # noqa: E402

LIBRARY = "00000000-0000-4000-8000-000000000001"


def remove_database(path):
    """Deletes a SQLite database and its WAL files."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


class EventReader:
    """An SSE stream read over a raw socket: chunked framing, then events split on blank lines."""

    def __init__(self, port, path, timeout=600):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.socket.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n" % path).encode())
        self.raw = bytearray()
        self.body = bytearray()
        self.received = None  # when the last event was whole (monotonic)
        while b"\r\n\r\n" not in self.raw:
            data = self.socket.recv(65536)
            if not data:
                raise RuntimeError("stream closed before its head")
            self.raw += data
        head, rest = bytes(self.raw).split(b"\r\n\r\n", 1)
        self.raw = bytearray(rest)
        self._dechunk()
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError("stream answered %s" % head.split(b"\r\n")[0])

    def _dechunk(self):
        dechunk(self.raw, self.body)

    def events(self):
        """Yields (event, id, data) as they arrive; ends when the socket times out or closes.

        Buffers are bytearrays searched from where the last search stopped, so a large event (a
        snapshot of a million books arrives in hundreds of chunks) costs linear time, not quadratic.
        """
        scanned = 0
        while True:
            consumed = 0
            while True:
                end = self.body.find(b"\n\n", max(consumed, scanned))
                if end < 0:
                    break
                # When the event was whole: the time a join costs. Splitting a collection's
                # snapshot (a `data:` line per item) in Python takes longer than receiving it.
                self.received = time.monotonic()
                kind, ident, data = event_fields(bytes(self.body[consumed:end]))
                consumed = end + 2
                if data:
                    # A collection's snapshot comes one item per `data:` line; joined, they are its JSON.
                    yield kind, None if ident is None else int(ident), b"\n".join(data)
            del self.body[:consumed]
            scanned = max(0, len(self.body) - 1)
            try:
                chunk = self.socket.recv(1 << 20)
            except (socket.timeout, OSError):  # timed out, or closed by the benchmark
                return
            if not chunk:
                return
            self.raw += chunk
            self._dechunk()

    def close(self):
        self.socket.close()


class Subscriber(threading.Thread):
    """Rebuilds every member's title from the stream and records each change's latency."""

    TITLE = re.compile(rb'\{"id":"([0-9a-f-]+)","title":"t(\d+)"\}')

    def __init__(self, port, path=None):
        super().__init__(daemon=True)
        # From before connecting: the stream's head comes once the first subscriber's model is
        # loaded, so timing from the head would leave the load out.
        self.started = time.monotonic()
        self.reader = EventReader(port, path or "/libraries/%s/events?fields=books.title" % LIBRARY)
        self.titles = {}
        self.latencies = []
        self.events = 0
        self.last_event = time.monotonic()
        self.snapshot_seconds = None
        self.ready = threading.Event()
        self.quiet_after = None

    def run(self):
        for kind, _, data in self.reader.events():
            now = time.time()
            self.last_event = time.monotonic()
            if kind == "snapshot":
                # Received whole: the time a join costs (parsing a million members in Python takes
                # about another 0.8 s, which is this client's, not the server's).
                self.snapshot_seconds = self.reader.received - self.started
                snapshot = json.loads(data)
                for member in snapshot["books"] if "books" in snapshot else snapshot["items"]:
                    self.titles[member["id"]] = member["title"]
                self.ready.set()
                continue
            self.events += 1
            for book, micros in self.TITLE.findall(data):
                self.titles[book.decode()] = "t" + micros.decode()
                self.latencies.append(now - int(micros) / 1e6)


def time_to_snapshot(port, path=None, current=False):
    """Seconds from connecting to having the whole snapshot of the library.

    With `current` (while titles are being written with the time they were sent), the pair (to
    the snapshot, to being current): until the first title arrives that was written after
    connecting. A later subscriber may get a snapshot kept from an earlier one, then the change
    since it: the second figure is the time to the state of the moment it connected."""
    started = time.monotonic()
    connected = time.time()
    reader = EventReader(port, path or "/libraries/%s/events?fields=books.title" % LIBRARY)
    snapshot = None
    try:
        for kind, _, data in reader.events():
            if kind == "snapshot" and snapshot is None:
                snapshot = reader.received - started
                if not current:
                    return snapshot
            elif snapshot is not None and any(int(micros) / 1e6 >= connected
                                               for _, micros in Subscriber.TITLE.findall(data)):
                return snapshot, time.monotonic() - started
    finally:
        reader.close()
    raise RuntimeError("no snapshot")


def run_wrk(port, books, seconds, connections):
    environment = dict(os.environ, BENCH_LUA=os.path.join(HERE, "wrk"), BOOKS=str(books), LIBRARIES="1")
    command = ["wrk", "-t2", "-c%d" % connections, "-d%ds" % seconds, "--timeout", "5s",
               "-s", os.path.join(HERE, "wrk", "patch_members.lua"), "http://127.0.0.1:%d" % port]
    output = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=seconds + 120)
    match = re.search(r"^RESULT (.*)$", output.stdout, re.M)
    if output.returncode != 0 or not match:
        raise RuntimeError("wrk failed: %s%s" % (output.stdout, output.stderr))
    return {key: float(value) for key, value in (pair.split("=") for pair in match.group(1).split())}


def first_joins(args, database, count):
    """The first subscriber's time to the whole snapshot on `count` fresh servers of `database`, one
    after another: one load is a single sample, and on this shared machine one in a few takes about
    twice as long as the others."""
    seconds = []
    for _ in range(count):
        server = Server([args.server, "--port", "0", "--database", database, "--log-level", "warning"])
        try:
            seconds.append(time_to_snapshot(server.port))
        finally:
            server.stop()
    return seconds


def run_size(args, books, work):
    """(a) `args.seconds` of writes with the one subscriber; (b) a third as long again while a new
    subscriber joins every two seconds; then the final comparison with the database. The first
    subscriber's wait is the median over this run's and `args.first_joins - 1` fresh servers' before."""
    database = os.path.join(work, "live-%d.sqlite" % books)
    subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), args.server, database, str(books), "1"],
                   check=True, timeout=1800, stdout=subprocess.DEVNULL)
    os.sync()
    first_snapshots = first_joins(args, database, args.first_joins - 1)
    server = Server([args.server, "--port", "0", "--database", database, "--log-level", "warning"])
    try:
        subscriber = Subscriber(server.port)
        subscriber.start()
        if not subscriber.ready.wait(timeout=600):
            raise RuntimeError("no snapshot of %d books within 600 s" % books)
        joins_idle = [time_to_snapshot(server.port) for _ in range(2)]
        rss_start = server.status("VmRSS") / 1024
        samples = []
        stop = threading.Event()

        def sample():
            while not stop.wait(1):
                samples.append((server.status("VmRSS") / 1024, metric(server.port, "library_live_lag_changes")))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        events_before = subscriber.events
        result = run_wrk(server.port, books, args.seconds, args.connections)
        events = subscriber.events - events_before
        latencies = [value * 1000 for value in subscriber.latencies]
        rss_steady = [rss for rss, _ in samples]

        # (b) the same writes while subscribers join, one every two seconds. Each joins from a
        # process of its own: in this one, reading tens of megabytes would hold the interpreter's
        # lock, and the subscriber's latency would measure this client, not the server.
        joins_loaded = []
        joining = threading.Event()
        joiners = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))

        def join():
            while not joining.wait(2):
                joins_loaded.append(joiners.submit(time_to_snapshot, server.port, None, True).result(timeout=300))

        joiner = threading.Thread(target=join, daemon=True)
        joiner.start()
        seen_before = len(subscriber.latencies)
        join_result = run_wrk(server.port, books, max(6, args.seconds // 3), args.connections)
        joining.set()
        joiner.join(timeout=120)
        joiners.shutdown()
        join_latencies = [value * 1000 for value in subscriber.latencies[seen_before:]]
        stop.set()
        sampler.join(timeout=30)

        # How long after the writers stopped the subscriber was up to date.
        writes_ended = time.monotonic()
        deadline = writes_ended + 120
        while time.monotonic() < deadline and time.monotonic() - subscriber.last_event < 2:
            time.sleep(0.2)
        catch_up = max(0.0, subscriber.last_event - writes_ended)
        rss_end = server.status("VmRSS") / 1024
        lag_end = metric(server.port, "library_live_lag_changes")
        folded = metric(server.port, "library_live_changes_folded_total")
        stored = dict(sqlite3.connect("file:%s?mode=ro" % database, uri=True)
                      .execute("SELECT id, title FROM books WHERE library_id = ?", (LIBRARY,)).fetchall())
        stale = sum(1 for book, title in stored.items() if subscriber.titles.get(book) != title)
        missing = len(set(stored) ^ set(subscriber.titles))
        third = max(1, len(rss_steady) // 3)
        row = {
            "books": books,
            "seconds": result["seconds"],
            "writes_per_s": result["requests"] / result["seconds"],
            "non2xx": int(result["non2xx"] + join_result["non2xx"]),
            "socket_errors": int(result["socket_errors"] + join_result["socket_errors"]),
            "patch_p99_ms": result["p99_us"] / 1000,
            "events_per_s": events / result["seconds"],
            "changes_seen": len(latencies),
            "latency_p50_ms": percentile(latencies, 0.50),
            "latency_p99_ms": percentile(latencies, 0.99),
            "latency_max_ms": max(latencies) if latencies else float("nan"),
            "catch_up_s": catch_up,
            "rss_start_mib": rss_start,
            # Flatness: the median of the middle and of the last third of the steady phase.
            "rss_middle_mib": statistics.median(rss_steady[third:2 * third] or [rss_start]),
            "rss_last_mib": statistics.median(rss_steady[2 * third:] or [rss_start]),
            "rss_end_mib": rss_end,
            "rss_max_mib": max([rss for rss, _ in samples] + [rss_end]),
            "lag_max_steady": max([lag for _, lag in samples[:len(rss_steady)]] + [0]),
            "lag_max": max([lag for _, lag in samples] + [lag_end]), "lag_end": lag_end, "folded": folded,
            "stale": stale, "missing": missing,
            "first_snapshot_s": statistics.median(first_snapshots + [subscriber.snapshot_seconds]),
            "first_snapshots_s": first_snapshots + [subscriber.snapshot_seconds],
            "join_idle_s": statistics.median(joins_idle),
            "join_loaded_p50_s": statistics.median(s for s, _ in joins_loaded) if joins_loaded else float("nan"),
            "join_loaded_max_s": max(s for s, _ in joins_loaded) if joins_loaded else float("nan"),
            "join_loaded_current_p50_s": (statistics.median(c for _, c in joins_loaded) if joins_loaded
                                          else float("nan")),
            "join_loaded_current_max_s": max(c for _, c in joins_loaded) if joins_loaded else float("nan"),
            "joins_loaded": len(joins_loaded),
            "join_phase_latency_p99_ms": percentile(join_latencies, 0.99),
        }
        subscriber.reader.close()
    finally:
        server.stop()
        remove_database(database)
    log("live %8d books  %6.0f writes/s  %6.0f events/s  latency p50 %6.1f p99 %6.1f ms  catch-up %.2f s  "
        "RSS %.0f→%.0f→%.0f MiB  lag max %d  folded %d  stale %d  join %.2f s idle, %.2f s p50 under load "
        "(subscriber p99 meanwhile %.0f ms)"
        % (books, row["writes_per_s"], row["events_per_s"], row["latency_p50_ms"], row["latency_p99_ms"],
           row["catch_up_s"], row["rss_middle_mib"], row["rss_last_mib"], row["rss_end_mib"], row["lag_max"],
           row["folded"], row["stale"], row["join_idle_s"], row["join_loaded_p50_s"],
           row["join_phase_latency_p99_ms"]))
    return row


COLLECTION = "/books/events?libraryId=%s&fields=title" % LIBRARY


def run_collection_size(args, books, work):
    """`--collection`: one subscriber of the collection stream `/books/events?libraryId=L&fields=title`
    while library L holds `books` books; `args.seconds` of PATCHes on L's books (wrk, as above), with
    the server's CPU per write and PATCH-to-event latency; and, before the writes, the time a new
    subscriber takes to get the whole (paged) snapshot, with the server's RSS sampled every 20 ms
    while it sends it."""
    database = os.path.join(work, "collection-%d.sqlite" % books)
    subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), args.server, database, str(books), "1"],
                   check=True, timeout=1800, stdout=subprocess.DEVNULL)
    os.sync()
    server = Server([args.server, "--port", "0", "--database", database, "--log-level", "warning"])
    try:
        rss_idle = server.status("VmRSS") / 1024
        subscriber = Subscriber(server.port, COLLECTION)
        subscriber.start()
        if not subscriber.ready.wait(timeout=600):
            raise RuntimeError("no snapshot of %d books within 600 s" % books)
        if len(subscriber.titles) != books:
            raise RuntimeError("the snapshot has %d books, not %d" % (len(subscriber.titles), books))
        time.sleep(1)
        rss_before = server.status("VmRSS") / 1024
        during = []
        sending = threading.Event()

        anon_before, file_before = server.status("RssAnon") / 1024, server.status("RssFile") / 1024
        during_anon, during_file = [], []

        def sample_snapshot():
            # RssFile is the database's pages mapped by SQLite's mmap (reclaimable, shared with the
            # page cache); RssAnon is the server's own memory: buffered events, SQLite's page cache.
            while not sending.wait(0.02):
                during.append(server.status("VmRSS") / 1024)
                during_anon.append(server.status("RssAnon") / 1024)
                during_file.append(server.status("RssFile") / 1024)

        sampler = threading.Thread(target=sample_snapshot, daemon=True)
        sampler.start()
        joins = [time_to_snapshot(server.port, COLLECTION) for _ in range(2)]
        sending.set()
        sampler.join(timeout=10)
        rss_after_snapshot = server.status("VmRSS") / 1024

        samples = []
        stop = threading.Event()

        def sample():
            while not stop.wait(1):
                samples.append(server.status("VmRSS") / 1024)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        seen_before = len(subscriber.latencies)
        events_before = subscriber.events
        cpu_before = server.cpu_seconds()
        result = run_wrk(server.port, books, args.seconds, args.connections)
        cpu = server.cpu_seconds() - cpu_before
        stop.set()
        sampler.join(timeout=10)
        writes_ended = time.monotonic()
        while time.monotonic() < writes_ended + 120 and time.monotonic() - subscriber.last_event < 2:
            time.sleep(0.2)
        # CPU of the writes and of the events they caused, until the subscriber caught up (the 2 s
        # of quiet that tells it cost next to nothing: no writes, no events).
        cpu_caught_up = server.cpu_seconds() - cpu_before
        events = subscriber.events - events_before
        latencies = [value * 1000 for value in subscriber.latencies[seen_before:]]
        stored = dict(sqlite3.connect("file:%s?mode=ro" % database, uri=True)
                      .execute("SELECT id, title FROM books WHERE library_id = ?", (LIBRARY,)).fetchall())
        stale = sum(1 for book, title in stored.items() if subscriber.titles.get(book) != title)
        missing = len(set(stored) ^ set(subscriber.titles))
        writes = result["requests"]
        row = {
            "books": books,
            "seconds": result["seconds"],
            "writes": int(writes),
            "writes_per_s": writes / result["seconds"],
            "non2xx": int(result["non2xx"]),
            "socket_errors": int(result["socket_errors"]),
            "patch_p99_ms": result["p99_us"] / 1000,
            "events_per_s": events / result["seconds"],
            "changes_seen": len(latencies),
            "latency_p50_ms": percentile(latencies, 0.50),
            "latency_p99_ms": percentile(latencies, 0.99),
            "latency_max_ms": max(latencies) if latencies else float("nan"),
            "cpu_s": cpu,
            "cpu_us_per_write": cpu * 1e6 / max(1, writes),
            "cpu_caught_up_s": cpu_caught_up,
            "cpu_caught_up_us_per_write": cpu_caught_up * 1e6 / max(1, writes),
            "first_snapshot_s": subscriber.snapshot_seconds,
            "snapshot_s": statistics.median(joins),
            "rss_idle_mib": rss_idle,
            "rss_before_snapshot_mib": rss_before,
            "rss_max_during_snapshot_mib": max(during + [rss_before]),
            "rss_after_snapshot_mib": rss_after_snapshot,
            "rss_samples_during_snapshot": len(during),
            "rss_anon_before_snapshot_mib": anon_before,
            "rss_anon_max_during_snapshot_mib": max(during_anon + [anon_before]),
            "rss_file_before_snapshot_mib": file_before,
            "rss_file_max_during_snapshot_mib": max(during_file + [file_before]),
            "rss_max_writes_mib": max(samples + [rss_after_snapshot]),
            "stale": stale, "missing": missing,
        }
        subscriber.reader.close()
        if args.floor_seconds > 0:
            # The same writes with no subscriber at all: the storage's and the HTTP path's share of
            # the CPU per write, so that a rise with the library's size can be told apart from the
            # live engine's. Measured after the subscriber's run, on the same warm server.
            time.sleep(1)
            cpu_before = server.cpu_seconds()
            floor = run_wrk(server.port, books, args.floor_seconds, args.connections)
            row["floor_writes_per_s"] = floor["requests"] / floor["seconds"]
            row["floor_cpu_us_per_write"] = (server.cpu_seconds() - cpu_before) * 1e6 / max(1, floor["requests"])
    finally:
        server.stop()
        remove_database(database)
    log("collection %8d books  %6.0f writes/s  %6.0f events/s  latency p50 %6.1f p99 %6.1f ms  CPU %.0f µs/write  "
        "snapshot %.2f s (first %.2f s)  RSS %.0f before / %.0f max while sending / %.0f after MiB (anonymous "
        "%.0f / %.0f, file-mapped %.0f / %.0f)  stale %d"
        % (books, row["writes_per_s"], row["events_per_s"], row["latency_p50_ms"], row["latency_p99_ms"],
           row["cpu_us_per_write"], row["snapshot_s"], row["first_snapshot_s"], row["rss_before_snapshot_mib"],
           row["rss_max_during_snapshot_mib"], row["rss_after_snapshot_mib"], row["rss_anon_before_snapshot_mib"],
           row["rss_anon_max_during_snapshot_mib"], row["rss_file_before_snapshot_mib"],
           row["rss_file_max_during_snapshot_mib"], row["stale"] + row["missing"]))
    if "floor_cpu_us_per_write" in row:
        log("collection %8d books  with no subscriber: %6.0f writes/s  CPU %.0f µs/write"
            % (books, row["floor_writes_per_s"], row["floor_cpu_us_per_write"]))
    return row


def collection_markdown(rows, args):
    lines = [
        "Measured %s with `Benchmarks/live.py --collection --seconds %d` (%s build, 2 cores shared with wrk and "
        "the Python subscriber; wrk `-t2 -c%d` PATCHing random books' titles of library L, which holds every "
        "book; one subscriber of `%s`). CPU: the server's utime + stime over the write phase (and until the "
        "subscriber caught up), divided by the writes. Snapshot: a second subscriber connecting to having the whole snapshot (median of 2), the "
        "server's RSS sampled every 20 ms meanwhile. %s"
        % (datetime.date.today().isoformat(), args.seconds,
           "release" if "/release/" in args.server else "debug", args.connections,
           COLLECTION.replace(LIBRARY, "L"),
           "Every run ended with the subscriber's titles equal to the database."
           if not any(row["stale"] or row["missing"] for row in rows) else "**Some runs ended with stale titles.**"),
        "",
        "| books in L | writes/s | events/s | PATCH→event p50 | p99 | max | server CPU per write (until caught up) "
        "| the same writes with no subscriber: CPU per write | snapshot "
        "| RSS before / max while sending / after the snapshot | of which anonymous (before / max) "
        "| file-mapped database (before / max) | stale titles |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        floor = "%.0f µs" % row["floor_cpu_us_per_write"] if "floor_cpu_us_per_write" in row else "-"
        lines.append("| %s | %s | %s | %.1f ms | %.1f ms | %.0f ms | %.0f µs (%.0f µs) | %s | %.3f s "
                     "| %.0f / %.0f / %.0f MiB | %.0f / %.0f MiB | %.0f / %.0f MiB | %d |" % (
            format(row["books"], ","), format(round(row["writes_per_s"]), ","),
            format(round(row["events_per_s"]), ","), row["latency_p50_ms"], row["latency_p99_ms"],
            row["latency_max_ms"], row["cpu_us_per_write"], row["cpu_caught_up_us_per_write"], floor, row["snapshot_s"],
            row["rss_before_snapshot_mib"],
            row["rss_max_during_snapshot_mib"], row["rss_after_snapshot_mib"], row["rss_anon_before_snapshot_mib"],
            row["rss_anon_max_during_snapshot_mib"], row["rss_file_before_snapshot_mib"],
            row["rss_file_max_during_snapshot_mib"], row["stale"] + row["missing"]))
    return "\n".join(lines)


def markdown(rows, args):
    lines = [
        "Measured %s with `Benchmarks/live.py --seconds %d` (%s build, 2 cores shared with wrk and the "
        "Python subscriber; wrk `-t2 -c%d` PATCHing random members' titles; one library holds every book). %s"
        % (datetime.date.today().isoformat(), args.seconds,
           "release" if "/release/" in args.server else "debug", args.connections,
           "Every run ended with the subscriber's titles equal to the database."
           if not any(row["stale"] or row["missing"] for row in rows) else "**Some runs ended with stale titles.**"),
        "",
        "**(a) One `books.title` subscriber under sustained writes**",
        "",
        "| books in the library | writes/s | events/s | PATCH→event p50 | p99 | max | live lag max"
        " | RSS at start / middle / last third of the run | stale titles at the end |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            "| %s | %s | %s | %.1f ms | %.1f ms | %.0f ms | %d | %.0f / %.0f / %.0f MiB | %d |" % (
                format(row["books"], ","), format(round(row["writes_per_s"]), ","),
                format(round(row["events_per_s"]), ","), row["latency_p50_ms"], row["latency_p99_ms"],
                row["latency_max_ms"], row["lag_max_steady"], row["rss_start_mib"], row["rss_middle_mib"],
                row["rss_last_mib"], row["stale"] + row["missing"]))
    lines += [
        "",
        "**(b) Subscribers joining the library: time to the whole snapshot**",
        "",
        "| books in the library | first subscriber (loads the model): median (fastest / slowest of %d fresh"
        " servers) | later, no writes | later, under the"
        " write load: to the snapshot (p50 / max) | to current: a title written after connecting (p50 / max)"
        " | the first subscriber's PATCH→event p99 meanwhile | live lag max | changes folded |"
        % args.first_joins,
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        firsts = row.get("first_snapshots_s", [row["first_snapshot_s"]])
        lines.append("| %s | %.2f s (%.2f / %.2f s) | %.3f s | %.3f s / %.3f s (%d joins) | %.3f s / %.3f s | %.0f ms | %d"
                     " | %d |" % (
            format(row["books"], ","), row["first_snapshot_s"], min(firsts), max(firsts), row["join_idle_s"],
            row["join_loaded_p50_s"],
            row["join_loaded_max_s"], row["joins_loaded"], row.get("join_loaded_current_p50_s", float("nan")),
            row.get("join_loaded_current_max_s", float("nan")), row["join_phase_latency_p99_ms"], row["lag_max"],
            row["folded"]))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=lambda t: [int(p) for p in t.split(",") if p],
                        help="library sizes (default 100,10000,100000,1000000; with --collection "
                             "100,100000,1000000)")
    parser.add_argument("--collection", action="store_true",
                        help="measure the collection stream /books/events?libraryId=L&fields=title instead; "
                             "writes results/live-collection.{md,json}, never the README")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--first-joins", type=int, default=3,
                        help="fresh servers the first subscriber's wait is measured on, the run's own included "
                             "(default 3; the median is reported, with the fastest and slowest)")
    parser.add_argument("--floor-seconds", type=int, default=None,
                        help="--collection: then as long with no subscriber, for the storage's share of the CPU per "
                             "write (default: --seconds; 0 skips it)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--server", default=os.path.join(ROOT, ".build", "release", "library-server"))
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args()
    if args.floor_seconds is None:
        args.floor_seconds = args.seconds
    if args.sizes is None:
        args.sizes = [100, 100_000, 1_000_000] if args.collection else [100, 10_000, 100_000, 1_000_000]
    work = tempfile.mkdtemp(prefix="library-live.")
    rows = []
    try:
        for books in args.sizes:
            rows.append((run_collection_size if args.collection else run_size)(args, books, work))
    finally:
        stop_all()
        subprocess.run(["rm", "-rf", work])
    text = (collection_markdown if args.collection else markdown)(rows, args)
    if args.collection and not args.no_readme:
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, "live-collection.md"), "w") as out:
            out.write(text + "\n")
        with open(os.path.join(RESULTS, "live-collection.json"), "w") as out:
            json.dump({"date": datetime.date.today().isoformat(), "commit": commit(), "machine": machine(), "rows": rows},
                      out, indent=1)
    elif not args.no_readme:
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, "live.md"), "w") as out:
            out.write(text + "\n")
        with open(os.path.join(RESULTS, "live.json"), "w") as out:
            json.dump({"date": datetime.date.today().isoformat(), "commit": commit(), "machine": machine(), "rows": rows},
                      out, indent=1)
        subprocess.run([sys.executable, os.path.join(HERE, "figures.py")], check=True)
    log("")
    log(text)
    failures = [row for row in rows if row["stale"] or row["missing"] or row["non2xx"] or row["socket_errors"]]
    for row in failures:
        log("FAILED at %d books: %d stale, %d missing titles, %d non-2xx, %d socket errors"
            % (row["books"], row["stale"], row["missing"], row["non2xx"], row["socket_errors"]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
