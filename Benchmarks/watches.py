#!/usr/bin/env python3
"""Many multiplexed streams under sustained writes: latency and memory over time.

    Benchmarks/watches.py [--books 100000] [--streams 1000] [--watches 20] [--seconds 30]
                          [--server .build/release/library-server]

A library of `--books` books (Benchmarks/seed.py), a fresh server on it, then `--streams`
`GET /events` streams, each watching `--watches` random books among the first `--streams x
--watches` (`fields=title`) plus the collection `/books?libraryId=L&available=false&fields=title`.
wrk PATCHes random titles among those books for `--seconds`; each title carries the time it was
sent, so the reader measures PATCH-to-entry latency. One thread reads every stream (selectors,
non-blocking). Every second: the server's RSS, `library_live_lag_changes`, entries received. At
the end, once the streams are quiet, a sample of 50 streams is checked: every watched title equals
`GET /books/{id}`, and frame ids strictly increased on every stream. Writes
Benchmarks/results/watches.json (with the samples, the commit and the machine), from which
Benchmarks/figures.py makes the README's table.

Everything runs on 127.0.0.1 and stops by itself.
"""

import argparse
import json
import os
import random
import re
import selectors
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import Server, dechunk, log, metric, percentile, stop_all, write_result  # noqa: E402

LIBRARY = "00000000-0000-4000-8000-000000000001"
TITLE = re.compile(rb'"id":"([0-9a-f-]{36})","title":"t(\d+)"')
FRAME_ID = re.compile(rb"^id: (\d+)\.", re.M)


def book_id(n):
    return "00000000-0000-4000-9000-%012d" % n


class Stream:
    """One /events stream read without blocking: chunked framing, frames split on blank lines."""

    def __init__(self, port, watches):
        query = urllib.parse.urlencode([("watch", watch) for watch in watches])
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.socket.sendall(("GET /events?%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % query).encode())
        self.raw = bytearray()
        self.body = bytearray()
        self.head = None
        self.titles = {}
        self.seqs = []
        self.socket.setblocking(False)

    def feed(self, data, now, latencies):
        self.raw += data
        if self.head is None:
            if b"\r\n\r\n" not in self.raw:
                return
            head, rest = bytes(self.raw).split(b"\r\n\r\n", 1)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError("stream answered %s" % head.split(b"\r\n")[0])
            self.head = head
            self.raw = bytearray(rest)
        dechunk(self.raw, self.body)
        while True:
            end = self.body.find(b"\n\n")
            if end < 0:
                break
            frame = bytes(self.body[:end])
            del self.body[:end + 2]
            seq = FRAME_ID.search(frame)
            if seq:
                self.seqs.append(int(seq.group(1)))
            for match in TITLE.finditer(frame):
                self.titles[match.group(1).decode()] = "t" + match.group(2).decode()
                latencies.append(now - int(match.group(2)) / 1e6)


def run_wrk(port, books, seconds):
    environment = dict(os.environ, BENCH_LUA=os.path.join(HERE, "wrk"), BOOKS=str(books), LIBRARIES="1")
    command = ["wrk", "-t1", "-c8", "-d%ds" % seconds, "--timeout", "5s",
               "-s", os.path.join(HERE, "wrk", "patch_members.lua"), "http://127.0.0.1:%d" % port]
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def get_title(port, book):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(("GET /books/%s?fields=title HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                            % book).encode())
        data = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])["title"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=int, default=100_000)
    parser.add_argument("--streams", type=int, default=1_000)
    parser.add_argument("--watches", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--server", default=os.path.join(os.path.dirname(HERE), ".build/release/library-server"))
    args = parser.parse_args()
    watched_books = min(args.books, args.streams * args.watches)
    random.seed(7)
    work = tempfile.mkdtemp(prefix="watches-")
    database = os.path.join(work, "watches.sqlite")
    subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), args.server, database, str(args.books), "1"],
                   check=True, timeout=1800, stdout=subprocess.DEVNULL)
    server = Server([args.server, "--port", "0", "--database", database, "--log-level", "warning",
                     "--max-connections", str(args.streams + 200)])
    try:
        rss_start = server.status("VmRSS") // 1024
        streams = []
        opened = time.monotonic()
        collection = "/books?libraryId=%s&available=false&fields=title" % LIBRARY
        for _ in range(args.streams):
            picks = random.sample(range(1, watched_books + 1), args.watches)  # seeded ids start at 1
            streams.append(Stream(server.port, ["/books/%s?fields=title" % book_id(n) for n in picks] + [collection]))
        selector = selectors.DefaultSelector()
        for stream in streams:
            selector.register(stream.socket, selectors.EVENT_READ, stream)
        latencies = []

        def pump(until, quiet=None):
            last_data = time.monotonic()
            while time.monotonic() < until:
                ready = selector.select(timeout=0.2)
                now = time.time()
                for key, _ in ready:
                    try:
                        data = key.fileobj.recv(1 << 16)
                    except BlockingIOError:
                        continue
                    if not data:
                        raise RuntimeError("a stream ended")
                    key.data.feed(data, now, latencies)
                    last_data = time.monotonic()
                if quiet and time.monotonic() - last_data > quiet:
                    return

        # Every stream's first frame (its snapshots).
        deadline = time.monotonic() + 120
        while any(not stream.seqs for stream in streams) and time.monotonic() < deadline:
            pump(time.monotonic() + 0.5)
        if any(not stream.seqs for stream in streams):
            raise RuntimeError("some streams got no first frame")
        opened = time.monotonic() - opened
        rss_open = server.status("VmRSS") // 1024
        latencies.clear()
        log("%d streams x %d watches open in %.1f s; RSS %d -> %d MiB" % (args.streams, args.watches + 1, opened,
                                                                          rss_start, rss_open))
        wrk = run_wrk(server.port, watched_books, args.seconds)
        samples = []
        started = time.monotonic()
        cpu_start = server.cpu_seconds()
        while wrk.poll() is None:
            before = len(latencies)
            pump(time.monotonic() + 1)
            samples.append({"t": round(time.monotonic() - started), "rss_mib": server.status("VmRSS") // 1024,
                            "anon_mib": server.status("RssAnon") // 1024,
                            "lag": metric(server.port, "library_live_lag_changes"),
                            "entries": len(latencies) - before})
        output = wrk.communicate()[0]
        match = re.search(r"^RESULT (.*)$", output, re.M)
        result = {key: float(value) for key, value in (pair.split("=") for pair in match.group(1).split())}
        writes = result.get("requests", 0)
        pump(time.monotonic() + 20, quiet=2)
        cpu = server.cpu_seconds() - cpu_start
        stale = 0
        for stream in random.sample(streams, min(50, len(streams))):
            for book, title in stream.titles.items():
                if get_title(server.port, book) != title:
                    stale += 1
        increasing = all(all(a < b for a, b in zip(s.seqs, s.seqs[1:])) for s in streams)
        third = max(1, len(samples) // 3)
        report = {
            "books": args.books, "streams": args.streams, "watches_per_stream": args.watches + 1,
            "open_seconds": round(opened, 1), "writes": int(writes), "writes_per_second": round(writes / args.seconds),
            "entries": len(latencies), "entries_per_second": round(len(latencies) / args.seconds),
            "latency_p50_ms": round(percentile(latencies, 0.5) * 1000, 1),
            "latency_p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
            "latency_max_ms": round(max(latencies, default=0) * 1000, 1),
            "cpu_us_per_write": round(cpu / max(1, writes) * 1e6),
            "rss_mib_start_open_first_third_last_third": [
                rss_start, rss_open, max(s["rss_mib"] for s in samples[:third]),
                max(s["rss_mib"] for s in samples[-third:])],
            # The heap alone: RSS also counts the database file's pages that SQLite maps.
            "anon_mib_first_third_last_third": [
                max(s["anon_mib"] for s in samples[:third]), max(s["anon_mib"] for s in samples[-third:])],
            "lag_max": max((s["lag"] for s in samples), default=0),
            "stale_titles_in_sample": stale, "frame_ids_strictly_increase": increasing,
        }
        log("%d streams: %d writes/s, %d entries/s, latency p50 %.1f p99 %.1f max %.1f ms, %d us CPU/write, "
            "RSS start/open/first third/last third %s MiB (heap first/last third %s), lag max %d, stale %d, "
            "ids increase %s" % (
                args.streams, report["writes_per_second"], report["entries_per_second"], report["latency_p50_ms"],
                report["latency_p99_ms"], report["latency_max_ms"], report["cpu_us_per_write"],
                report["rss_mib_start_open_first_third_last_third"], report["anon_mib_first_third_last_third"],
                report["lag_max"], stale, increasing))
        print("JSON " + json.dumps(report))
        print("SAMPLES " + json.dumps(samples))
        log("results in %s" % write_result("watches", dict(report, seconds=args.seconds, samples=samples)))
        if stale or not increasing:
            sys.exit(1)
    finally:
        server.stop()
        stop_all()


if __name__ == "__main__":
    main()
