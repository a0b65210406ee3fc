#!/usr/bin/env python3
"""Windows of a list, live, at a library's real size: one library of BOOKS books (default
1,000,000), on SQLite.

    Benchmarks/windows.py SERVER [--books N] [--opens N] [--patches N] [--seconds S]

SERVER is a release build of library-server. Prints and writes Benchmarks/results/windows.json:

- Opening a window, from the request to the end of its snapshot (median, p95, p99 ms), side by
  side with `GET /books` of the same page over a kept-alive connection: the first 50 by title,
  later pages (a cursor spread over the library), and a search (`q`) sorted by title. Each
  opening is a window nobody has open, so each reads its page.
- Fan-out: title PATCHes that each move a book into 100 open windows (100 streams, each the
  first 50 to 149 rows by title), from the PATCH sent until all 100 streams have its event, side
  by side with title PATCHes reaching 100 plain watches of one book (`/books/{id}/events`); then
  the PATCHes that move those books back out (each window then reads its page again).
- Writes outside every window: wrk title PATCHes of the books after the first 50,000, for S
  seconds (default 30), with 1,000 windows open (pages 1 to 1,000 by `createdAt`, on one
  `POST /events` stream) and with none, on one server: throughput, p99, the server's CPU time
  per write, and the window reads the writes made (none expected).
"""

import argparse
import http.client
import json
import os
import re
import selectors
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from benchlib import (  # noqa: E402
    HERE, Server, log, metric, open_stream, page_cursors, percentile, read_snapshot, write_result)

sys.path.insert(0, HERE)
import seed  # noqa: E402

LIBRARY = seed.library_id(1)
WINDOWS_OUTSIDE = 1_000
PAGE = 50


def summary(times):
    return {"median_ms": round(percentile(times, 0.5), 2), "p95_ms": round(percentile(times, 0.95), 2),
            "p99_ms": round(percentile(times, 0.99), 2), "n": len(times)}


def get(connection, path):
    connection.request("GET", path)
    response = connection.getresponse()
    data = response.read()
    if response.status != 200:
        raise SystemExit("%s: %d %s" % (path, response.status, data[:200]))
    return json.loads(data)


def wait_windows(port, count, timeout=30):
    deadline = time.monotonic() + timeout
    while metric(port, "library_live_windows") != count:
        if time.monotonic() > deadline:
            raise SystemExit("windows did not reach %d" % count)
        time.sleep(0.02)


def opening(port, books, opens):
    """Times opening windows nobody has open, side by side with GET of the same page."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    base = "/books?libraryId=%s&sort=title&fields=title" % LIBRARY
    spread = page_cursors(connection, base, 20, max(1, books // PAGE // 20), PAGE)
    rare = urllib.parse.quote("number %d" % (books // 2 + 1))
    cases = {
        "first page by title": ["&limit=%d" % PAGE],
        "later pages by title": ["&limit=%d&cursor=%s" % (PAGE, cursor) for cursor in spread],
        "q (one book), by title": ["&limit=%d&q=%s" % (PAGE, rare)],
    }
    results = {}
    for name, queries in cases.items():
        window_times, list_times = [], []
        for index in range(opens):
            query = queries[index % len(queries)]
            started = time.perf_counter()
            get(connection, base + query)
            list_times.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            stream = open_stream(port, "/books/events" + base[len("/books"):] + query)
            read_snapshot(stream)
            window_times.append((time.perf_counter() - started) * 1000)
            stream.close()
            wait_windows(port, 0)  # the next opening reads its page afresh
        results[name] = {"window": summary(window_times), "GET": summary(list_times),
                         "p99_ratio_window_vs_GET": round(percentile(window_times, 0.99) / percentile(list_times, 0.99), 2)}
        log("open %s: window %s, GET %s" % (name, summary(window_times), summary(list_times)))
    connection.close()
    return results


def until_all(streams, marker=b"event: change"):
    """Waits until every stream has received `marker`; returns when the last one did (perf_counter)."""
    selector = selectors.DefaultSelector()
    pending = {}
    for stream in streams:
        stream.setblocking(False)
        pending[stream.fileno()] = b""
        selector.register(stream, selectors.EVENT_READ)
    last = None
    deadline = time.monotonic() + 30
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit("%d streams got no event" % len(pending))
        for key, _ in selector.select(timeout=1):
            data = key.fileobj.recv(1 << 16)
            number = key.fileobj.fileno()
            if number not in pending:
                continue
            seen = pending[number] + data
            if marker in seen:
                del pending[number]
                last = time.perf_counter()
            else:
                pending[number] = seen[-64:]
    selector.close()
    for stream in streams:
        stream.setblocking(True)
    return last


def patch(connection, book, title):
    connection.request("PATCH", "/books/" + book, body=json.dumps({"title": title}),
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        raise SystemExit("PATCH: %d" % response.status)


def fan_out(port, books, patches):
    """PATCHes moving books into 100 windows, then out of them, and the same PATCHes to 100 plain
    watches of one book."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    # Books late in title order ("Book number 99999x"), renamed to sort before every other title.
    late = sorted(range(1, books + 1), key=str)[-patches:]
    results = {}
    streams = [open_stream(port, "/books/events?libraryId=%s&sort=title&limit=%d&fields=title" % (LIBRARY, PAGE + i))
               for i in range(100)]
    for stream in streams:
        read_snapshot(stream)
    enter, leave = [], []
    for index, number in enumerate(late):
        started = time.perf_counter()
        patch(connection, seed.book_id(number), "Aardvark %05d" % (patches - index))
        enter.append((until_all(streams) - started) * 1000)
    for number in reversed(late):  # the first in title order leaves every window, which each read again
        started = time.perf_counter()
        patch(connection, seed.book_id(number), "Book number %d" % number)
        leave.append((until_all(streams) - started) * 1000)
    for stream in streams:
        stream.close()
    wait_windows(port, 0)
    results["windows"] = {"into": summary(enter), "out of": summary(leave)}
    log("fan-out to 100 windows: into %s, out of %s" % (summary(enter), summary(leave)))
    moved = seed.book_id(late[0])
    streams = [open_stream(port, "/books/%s/events?fields=title" % moved) for _ in range(100)]
    for stream in streams:
        read_snapshot(stream)
    plain = []
    for index in range(2 * patches):
        started = time.perf_counter()
        patch(connection, moved, "Aardvark %05d" % index if index % 2 == 0 else "Book number %d" % late[0])
        plain.append((until_all(streams) - started) * 1000)
    for stream in streams:
        stream.close()
    results["plain watches"] = summary(plain)
    log("fan-out to 100 plain watches of one book: %s" % summary(plain))
    for direction in ("into", "out of"):
        results["p99_ratio_windows_%s_vs_plain" % direction.replace(" ", "_")] = round(
            results["windows"][direction]["p99_ms"] / results["plain watches"]["p99_ms"], 2)
    connection.close()
    return results


WRK = re.compile(r"Requests/sec:\s+([\d.]+)")
REQUESTS = re.compile(r"(\d+) requests in")
P99 = re.compile(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", re.M)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(server, seconds, books):
    env = dict(os.environ, BENCH_LUA=os.path.join(HERE, "wrk"), BOOKS=str(books), LIBRARIES="1",
               OFFSET=str(WINDOWS_OUTSIDE * PAGE))
    reads_before = metric(server.port, "library_live_window_reads_total")
    cpu_before = cpu_seconds(server.process.pid)
    output = subprocess.run(
        ["wrk", "-t2", "-c32", "-d%ds" % seconds, "--latency", "-s", os.path.join(HERE, "wrk", "patch_outside.lua"),
         "http://127.0.0.1:%d" % server.port], capture_output=True, text=True, env=env, check=True).stdout
    cpu = cpu_seconds(server.process.pid) - cpu_before
    requests = int(REQUESTS.search(output).group(1))
    value, unit = P99.search(output).groups()
    return {"rps": round(float(WRK.search(output).group(1))),
            "p99_ms": round(float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit], 2),
            "server_cpu_us_per_write": round(cpu / requests * 1e6, 1),
            "window_reads": metric(server.port, "library_live_window_reads_total") - reads_before,
            "lag_after": metric(server.port, "library_live_lag_changes")}


def outside(server, books, seconds):
    """Writes outside every window, with 1,000 windows open and with none."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    base = "/books?libraryId=%s&sort=createdAt&fields=id" % LIBRARY
    pages = [None] + page_cursors(connection, base, WINDOWS_OUTSIDE - 1, 1, PAGE)
    connection.close()
    watches = ["/books?libraryId=%s&sort=createdAt&limit=%d%s&fields=title"
               % (LIBRARY, PAGE, "&cursor=" + cursor if cursor else "") for cursor in pages]
    results = {"none": wrk(server, seconds, books)}
    log("writes outside, no window: %s" % results["none"])
    stream = socket.create_connection(("127.0.0.1", server.port), timeout=120)
    body = json.dumps({"watches": watches}).encode()
    stream.sendall(b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                   b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    reading = threading.Event()
    reading.set()

    def drain():
        stream.settimeout(1)
        while reading.is_set():
            try:
                if not stream.recv(1 << 20):
                    return
            except socket.timeout:
                continue

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()  # the snapshots are read as they come, or the stream waits for its reader
    wait_windows(server.port, len(watches))
    time.sleep(2)  # their snapshots sent
    results["1,000 windows"] = wrk(server, seconds, books)
    log("writes outside, 1,000 windows open: %s" % results["1,000 windows"])
    reading.clear()
    reader.join()
    stream.close()
    wait_windows(server.port, 0)
    results["again, no window"] = wrk(server, seconds, books)
    log("writes outside, no window again: %s" % results["again, no window"])
    none = (results["none"]["rps"] + results["again, no window"]["rps"]) / 2
    results["rps_ratio_windows_vs_none"] = round(results["1,000 windows"]["rps"] / none, 2)
    results["cpu_per_write_ratio_windows_vs_none"] = round(
        results["1,000 windows"]["server_cpu_us_per_write"]
        / ((results["none"]["server_cpu_us_per_write"] + results["again, no window"]["server_cpu_us_per_write"]) / 2), 2)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("server")
    parser.add_argument("--books", type=int, default=1_000_000)
    parser.add_argument("--opens", type=int, default=100)
    parser.add_argument("--patches", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=30)
    arguments = parser.parse_args()
    path = "/tmp/windows-bench.db"
    seconds = seed.fresh(arguments.server, path, arguments.books, 1)
    log("seeded %d books in one library (%.0f s)" % (arguments.books, seconds))
    server = Server([arguments.server, "--port", "0", "--log-level", "warning", "--database", path], ready_timeout=120)
    try:
        result = {
            "books": arguments.books,
            "opening": opening(server.port, arguments.books, arguments.opens),
            "fan_out": fan_out(server.port, arguments.books, arguments.patches),
            "writes_outside": outside(server, arguments.books, arguments.seconds),
            "seconds": arguments.seconds,
        }
    finally:
        server.stop()
    log("wrote %s" % write_result("windows", result))


if __name__ == "__main__":
    main()
