#!/usr/bin/env python3
"""WAL pages one PATCH of a book's title appends, on a 100,000-book database.

    Benchmarks/wal_pages.py SERVER [PATCHES]

Seeds a database (Benchmarks/seed.py), starts SERVER on it, sends PATCHES (default 400) PATCHes
of random books one after another (so each is a transaction of its own, none shares a group
commit), then kills the server with SIGKILL so nothing checkpoints, and counts the frames in the
WAL. Keep PATCHES × pages below the server's checkpoint threshold (4,000 pages), or the WAL
starts over and the count is wrong. Talks to 127.0.0.1 only; stops by itself.
"""

import http.client
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    server = sys.argv[1]
    patches = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    with tempfile.TemporaryDirectory() as work:
        db = os.path.join(work, "wal.db")
        subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), server, db, "100000", "100"],
                       check=True, capture_output=True, timeout=300)
        page = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
        process = subprocess.Popen([server, "--database", db, "--port", "0", "--log-level", "warning"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = process.stdout.readline()
            port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
            frames = lambda: max(0, (os.path.getsize(db + "-wal") - 32) // (page + 24)) if os.path.exists(db + "-wal") else 0
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            random.seed(7)
            start = frames()
            for index in range(patches):
                book = "00000000-0000-4000-9000-%012d" % random.randint(1, 100000)
                connection.request("PATCH", "/books/" + book, body=json.dumps({"title": "T%d" % index}),
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    sys.exit("PATCH answered %d" % response.status)
            time.sleep(0.3)
            end = frames()
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
    print("%d PATCHes appended %d WAL pages: %.2f per PATCH (%d-byte pages)"
          % (patches, end - start, (end - start) / patches, page))


if __name__ == "__main__":
    main()
