#!/usr/bin/env python3
"""What the first subscriber of a huge library costs everybody else: another stream's latency
while that library's models are loaded.

    Benchmarks/join_stall.py [--books 1000000] [--rounds 3] [--server PATH]

Seeds one library of BOOKS books (Benchmarks/seed.py), starts the server on it, and each round:
creates a small library with one book, follows that book's `title` stream and PATCHes its title
every 10 ms with the time it was sent (so the stream measures PATCH-to-event latency), then opens
the big library's `books.title` stream, nobody else watching it, and reads it to the end of its
snapshot. It reports the join's time and the small stream's latency while the join ran: the live
actor does the big library's loading work between other streams' events, so its longest stretch
of work is what the small stream waits. The big stream is closed after each round, so every round
loads the models afresh. Talks to 127.0.0.1 only; every wait has a bound; stops by itself.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import Server, log, open_stream, read_snapshot, stop_all  # noqa: E402

LIBRARY = "00000000-0000-4000-8000-000000000001"  # Benchmarks/seed.py's first library


def call(connection, method, path, body=None):
    headers = {"Content-Type": "application/json", "Host": "127.0.0.1"}
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = connection.getresponse()
    data = response.read()
    return json.loads(data) if data else None


def measure(port):
    """One round: (seconds to the big library's whole snapshot, latencies in s of the small
    stream's events during it)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    small = call(connection, "POST", "/libraries", {"name": "small"})
    book = call(connection, "POST", "/libraries/%s/books" % small["id"], {"title": "T@0"})
    stream = open_stream(port, "/books/%s/events?fields=title" % book["id"])
    latencies, done = [], threading.Event()

    def read():
        buffer = b""
        while not done.is_set():
            try:
                data = stream.recv(65536)
            except OSError:
                return
            if not data:
                return
            buffer += data
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                if b"T@" in event and b"event: change" in event:
                    sent = float(event.split(b"T@")[1].split(b'"')[0])
                    latencies.append((time.time(), time.time() - sent))

    def write():
        writer = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while not done.is_set():
            call(writer, "PATCH", "/books/%s" % book["id"], {"title": "T@%.6f" % time.time()})
            time.sleep(0.01)
        writer.close()

    threads = [threading.Thread(target=read, daemon=True), threading.Thread(target=write, daemon=True)]
    for thread in threads:
        thread.start()
    time.sleep(1)
    began = time.time()
    big = open_stream(port, "/libraries/%s/events?fields=books.title" % LIBRARY)
    read_snapshot(big)
    joined = time.time()
    time.sleep(1)  # events held by the join arrive after it
    done.set()
    big.close()
    stream.close()
    for thread in threads:
        thread.join(10)
    call(connection, "DELETE", "/libraries/%s" % small["id"])
    connection.close()
    return joined - began, [latency for at, latency in latencies if began <= at <= joined + 1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server", default=os.path.join(os.path.dirname(HERE), ".build", "release", "library-server"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        database = os.path.join(work, "join.sqlite")
        log("seeding %d books in one library" % args.books)
        subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), args.server, database, str(args.books), "1"],
                       check=True, stdout=subprocess.DEVNULL)
        server = Server([args.server, "--port", "0", "--database", database, "--log-level", "warning"])
        try:
            joins, worst = [], []
            for round_number in range(1, args.rounds + 1):
                took, latencies = measure(server.port)
                longest = max(latencies) if latencies else float("nan")
                joins.append(took)
                worst.append(longest)
                print("round %d: first subscriber of %d books: snapshot in %.2f s; the other stream meanwhile: "
                      "%d events, longest PATCH-to-event %.0f ms" % (round_number, args.books, took, len(latencies),
                                                                    longest * 1e3), flush=True)
                time.sleep(2)  # the models of the closed stream are dropped
            print("median of %d rounds: snapshot %.2f s, longest PATCH-to-event of the other stream %.0f ms"
                  % (args.rounds, statistics.median(joins), statistics.median(worst) * 1e3))
        finally:
            server.stop()
            stop_all()


if __name__ == "__main__":
    main()
