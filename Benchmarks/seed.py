#!/usr/bin/env python3
"""Creates the benchmark database: library-server's schema, then LIBRARIES libraries holding BOOKS
books between them, with fixed ids the wrk scripts compute (Benchmarks/wrk/common.lua).

    Benchmarks/seed.py SERVER PATH BOOKS [LIBRARIES]

The schema comes from the server itself: it is started once on PATH (which runs its migrations)
and stopped with SIGTERM. The rows are then inserted in one transaction with Python's sqlite3.
"""

import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from benchlib import Server  # noqa: E402

CREATED = "2026-01-01T00:00:00.000Z"


def library_id(n):
    return "00000000-0000-4000-8000-%012d" % n


def book_id(n):
    return "00000000-0000-4000-9000-%012d" % n


def create_schema(server, path):
    try:
        process = Server([server, "--port", "0", "--database", path, "--log-level", "warning"], ready_timeout=60,
                         keep_errors=True)
    except RuntimeError as error:
        raise SystemExit("seed: %s" % error)
    status = process.stop()
    if status != 0:
        raise SystemExit("seed: the server exited with %s" % status)


def fresh(server, path, books, libraries):
    """A new database at `path` (an old one and its WAL removed first) with `server`'s schema and
    `books` books seeded in `libraries` libraries; returns how many seconds that took."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    started = time.monotonic()
    create_schema(server, path)
    seed(path, books, libraries)
    return time.monotonic() - started


def seed(path, books, libraries):
    per_library, extra = divmod(books, libraries)
    database = sqlite3.connect(path)
    database.execute("PRAGMA journal_mode = WAL")
    with database:
        database.executemany(
            "INSERT INTO libraries (id, name, address, book_count, version, created_at, updated_at)"
            " VALUES (?, ?, NULL, ?, 1, ?, ?)",
            (
                (library_id(n), "Library %d" % n, per_library + (1 if n <= extra else 0), CREATED, CREATED)
                for n in range(1, libraries + 1)
            ),
        )
        # Book n belongs to library (n - 1) % libraries + 1, the id wrk's list script asks for;
        # so each library's books are spread over the table, as they would be after real use.
        database.executemany(
            "INSERT INTO books (id, library_id, title, author, isbn, published_year, available, version,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, NULL, ?, 1, 1, ?, ?)",
            (
                (
                    book_id(n),
                    library_id((n - 1) % libraries + 1),
                    "Book number %d" % n,
                    "Author %d" % (n % 997),
                    1900 + n % 125,
                    CREATED,
                    CREATED,
                )
                for n in range(1, books + 1)
            ),
        )
    database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    database.close()


def main():
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    server, path, books = sys.argv[1], sys.argv[2], int(sys.argv[3])
    libraries = int(sys.argv[4]) if len(sys.argv) == 5 else 100
    seconds = fresh(server, path, books, libraries)
    print("seeded %s: %d books in %d libraries (%.1f s)" % (path, books, libraries, seconds))


if __name__ == "__main__":
    main()
