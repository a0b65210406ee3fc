#!/usr/bin/env python3
"""Sorted and searched lists at a library's real size: one library of BOOKS books (default
1,000,000), on SQLite.

    Benchmarks/lists.py SERVER [--books N] [--requests N] [--seconds S]

SERVER is a release build of library-server. Prints and writes Benchmarks/results/lists.json:

- Reads, from request to last byte over one keep-alive connection (median, p95, p99 ms), side by
  side with the same page in insertion order (the list without `sort`, an index range too): the
  first page of 50 and pages at cursors spread over the whole library, for `sort=title`,
  `-title`, `publishedYear` and `updatedAt`; a search for a rare text (a few books) and a common
  one (about a tenth of them), sorted by title.
- Writes with and without the indexes the sorted lists and the search add (migration 0009: ten
  book indexes, four library ones, the FTS5 table and its triggers, dropped from a copy of the same
  database): wrk for S seconds (default 30) each of title PATCHes, availability PATCHes and POSTs,
  the two databases in turn, with the ratio of their throughput and p99.
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from benchlib import HERE, Server, log, page_cursors, percentile, write_result  # noqa: E402

sys.path.insert(0, HERE)
import seed  # noqa: E402

LIBRARY = seed.library_id(1)

# What migration 0009 adds, dropped for the "without" database.
ADDED = [
    "DROP TRIGGER books_search_insert", "DROP TRIGGER books_search_delete", "DROP TRIGGER books_search_update",
    "DROP TABLE books_search",
] + [
    "DROP INDEX %s" % name for name in (
        "books_by_title", "books_by_library_title", "books_by_author_id", "books_by_library_author_id",
        "books_by_published_year", "books_by_library_published_year", "books_by_created_at",
        "books_by_library_created_at", "books_by_updated_at", "books_by_library_updated_at", "libraries_by_name",
        "libraries_by_created_at", "libraries_by_updated_at", "libraries_by_book_count")
]


def timed(connection, path, requests):
    """Times `requests` GETs of `path`; returns the times in ms and the last answer's JSON."""
    times, body = [], None
    for _ in range(requests):
        started = time.perf_counter()
        connection.request("GET", path)
        response = connection.getresponse()
        data = response.read()
        times.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise SystemExit("%s: %d %s" % (path, response.status, data[:200]))
        body = data
    return times, json.loads(body)


def summary(times):
    times = sorted(times)
    return {"median_ms": round(percentile(times, 0.5), 2), "p95_ms": round(percentile(times, 0.95), 2),
            "p99_ms": round(percentile(times, 0.99), 2)}


def reads(port, books, requests):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    base = "/libraries/%s/books" % LIBRARY
    results = {}
    pages = max(1, books // 500 // 20)  # 20 cursors spread over the library
    plain_cursors = page_cursors(connection, base + "?fields=id", 20, pages, 500)
    plain_first, _ = timed(connection, base + "?limit=50", requests)
    plain_later = []
    for cursor in plain_cursors:
        plain_later += timed(connection, base + "?limit=50&cursor=" + cursor, max(1, requests // 20))[0]
    results["insertion order"] = {"first": summary(plain_first), "later": summary(plain_later)}
    log("insertion order: first %s, later %s" % (summary(plain_first), summary(plain_later)))
    for sort in ("title", "-title", "publishedYear", "updatedAt"):
        path = base + "?sort=" + sort
        first, answer = timed(connection, path + "&limit=50", requests)
        assert len(answer["items"]) == 50
        later = []
        for cursor in page_cursors(connection, path + "&fields=id", 20, pages, 500):
            later += timed(connection, path + "&limit=50&cursor=" + cursor, max(1, requests // 20))[0]
        results["sort=" + sort] = {
            "first": summary(first), "later": summary(later),
            "first_vs_insertion_order_p99": round(percentile(sorted(first), 0.99) / percentile(sorted(plain_first), 0.99), 2),
            "later_vs_insertion_order_p99": round(percentile(sorted(later), 0.99) / percentile(sorted(plain_later), 0.99), 2),
        }
        log("sort=%s: first %s, later %s" % (sort, summary(first), summary(later)))
    # Seeded titles are "Book number N": "number 500001" is in one book but shares "number"'s
    # trigrams with every title; "500001" is in one book too, with trigrams of digits only; "number 9"
    # is in about a tenth of the books.
    rare, digits, common = "number %d" % (books // 2 + 1), "%d" % (books // 2 + 1), "number 9"
    for name, text in (("rare", rare), ("rare", digits), ("common", common)):
        path = base + "?sort=title&limit=50&q=" + urllib.parse.quote(text)
        times, answer = timed(connection, path, max(5, requests // (1 if name == "rare" else 20)))
        results["q=%s (%s), sort=title" % (text, name)] = dict(summary(times), first_page_items=len(answer["items"]))
        log("q=%s: %s, %d items" % (text, summary(times), len(answer["items"])))
    connection.close()
    return results


WRK = re.compile(r"Requests/sec:\s+([\d.]+)")
P99 = re.compile(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", re.M)


def wrk(port, script, seconds, books):
    env = dict(os.environ, BENCH_LUA=os.path.join(HERE, "wrk"), BOOKS=str(books), LIBRARIES="1")
    output = subprocess.run(
        ["wrk", "-t2", "-c32", "-d%ds" % seconds, "--latency", "-s", os.path.join(HERE, "wrk", script),
         "http://127.0.0.1:%d" % port], capture_output=True, text=True, env=env, check=True).stdout
    rps = float(WRK.search(output).group(1))
    value, unit = P99.search(output).groups()
    p99 = float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
    return {"rps": round(rps), "p99_ms": round(p99, 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("server")
    parser.add_argument("--books", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=30)
    arguments = parser.parse_args()
    with_path, without_path = "/tmp/lists-bench.db", "/tmp/lists-bench-without.db"
    for suffix in ("-wal", "-shm"):
        if os.path.exists(without_path + suffix):
            os.remove(without_path + suffix)
    seconds = seed.fresh(arguments.server, with_path, arguments.books, 1)
    log("seeded %d books in one library (%.0f s)" % (arguments.books, seconds))
    shutil.copy(with_path, without_path)
    database = sqlite3.connect(without_path)
    for statement in ADDED:
        database.execute(statement)
    database.commit()
    database.execute("VACUUM")
    database.close()

    command = [arguments.server, "--port", "0", "--log-level", "warning", "--database"]
    server = Server(command + [with_path], ready_timeout=120)
    try:
        result = {"books": arguments.books, "reads": reads(server.port, arguments.books, arguments.requests)}
    finally:
        server.stop()

    writes = {}
    for script in ("patch.lua", "patch_available.lua", "post.lua"):
        for name, path in (("without", without_path), ("with", with_path)):
            server = Server(command + [path], ready_timeout=120)
            try:
                writes.setdefault(script, {})[name] = wrk(server.port, script, arguments.seconds, arguments.books)
            finally:
                server.stop()
            log("%s %s the list indexes: %s" % (script, name, writes[script][name]))
        entry = writes[script]
        entry["rps_ratio_with_vs_without"] = round(entry["with"]["rps"] / entry["without"]["rps"], 2)
        entry["p99_ratio_with_vs_without"] = round(entry["with"]["p99_ms"] / entry["without"]["p99_ms"], 2)
    result["writes"] = writes
    result["seconds"] = arguments.seconds
    log("wrote %s" % write_result("lists", result))


if __name__ == "__main__":
    main()
