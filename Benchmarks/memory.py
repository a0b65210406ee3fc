#!/usr/bin/env python3
"""Memory and CPU over a long mixed run: does anything grow that should not?

    Benchmarks/memory.py [--books 100000] [--seconds 300] [--server PATH] [--no-results]

One library holding N books (Benchmarks/seed.py), a fresh server (release build, access log on, its
default), then for `--seconds`: wrk with 90 % GET and 10 % PATCH of books (Benchmarks/wrk/mix.lua)
and list pages of the library, while live subscribers come and go: library streams with
`books.title` (each join is a snapshot of all N members), collection streams
(`/books/events?libraryId=L&fields=title`), and book streams, each reconnecting after a few seconds.
Every second it samples the server's `/proc/PID/status`: RssAnon (the heap: what a leak or a
queue that grows would show), RssFile (file pages mapped in: the binary, its libraries, and the
database file, which SQLite reads through `mmap`, so it rises as pages are touched and the kernel
may drop it at will), open descriptors and CPU time, and `/metrics`' `library_sqlite_memory_bytes`:
the part of the heap that is SQLite's, its page caches (bounded: the writer's at 32 MiB, each
reader's at SQLite's default 2 MiB), which fill as a run touches more of the database, and
`library_heap_in_use_bytes` and `library_heap_free_bytes`: malloc's bytes in use (what the server
holds: a leak grows it) and its free pool (freed chunks kept for reuse; RssAnon is the bytes in use
plus the resident part of the pool).

The verdict is on the last half of the run (the first half is warm-up: caches filling, the
snapshots' first allocations): the median of its second half against the median of its first
half (medians, because a sample taken while several 100,000-member snapshots are in flight is a
spike that goes away), with the least-squares slope over the whole half reported beside it, for
RssAnon and for RssAnon less SQLite's page caches (the server's own heap).

That heap swings by about 90 MiB whenever every library subscriber has left for a moment: the
100,000 members' models are let go, then loaded again by the next one. A median then moves by a
few MiB with how many samples fall in a swing (and in the reload after it), leak or not; so the
verdict is on the two levels the heap swings between, each quarter's against the other's: its
lowest sample (no model loaded) and its upper quartile (the models loaded, without the spikes of
several snapshots in flight). A leak raises both. Flat means each grew by under 2 % (or 2 MiB,
whichever is larger); anything more fails the run (exit status 1). The medians are reported beside.
It samples every second (75 samples a quarter).

Writes Benchmarks/results/memory.json (read by Benchmarks/figures.py). Talks to 127.0.0.1 only,
every step has a time limit, and it stops by itself.
"""

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import Server, log, metrics, stop_all, write_result  # noqa: E402

LIBRARY = "00000000-0000-4000-8000-000000000001"
SAMPLE_EVERY = 1.0
LOG_EVERY = 5
FLAT_FRACTION = 0.02
FLAT_MIB = 2.0


def book_id(n):
    return "00000000-0000-4000-9000-%012d" % n


class Churner(threading.Thread):
    """A live subscriber that reads a stream for a few seconds, hangs up, and comes back."""

    def __init__(self, port, paths, stop, seed):
        super().__init__(daemon=True)
        self.port, self.paths, self.stop, self.random = port, paths, stop, random.Random(seed)
        self.connections = 0
        self.bytes = 0

    def run(self):
        while not self.stop.is_set():
            path = self.random.choice(self.paths)
            lifetime = self.random.uniform(2.0, 8.0)
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=10) as connection:
                    connection.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
                                        % path).encode())
                    self.connections += 1
                    ends = time.monotonic() + lifetime
                    connection.settimeout(0.5)
                    while time.monotonic() < ends and not self.stop.is_set():
                        try:
                            data = connection.recv(1 << 16)
                        except socket.timeout:
                            continue
                        if not data:
                            break
                        self.bytes += len(data)
            except OSError:
                time.sleep(0.5)


def sample(server, started):
    sqlite, in_use, free = metrics(server.port, "library_sqlite_memory_bytes", "library_heap_in_use_bytes",
                                   "library_heap_free_bytes")
    return {
        "t": round(time.monotonic() - started, 1),
        "rss_anon_kib": server.status("RssAnon"),
        "rss_file_kib": server.status("RssFile"),
        "vm_rss_kib": server.status("VmRSS"),
        "fds": len(os.listdir("/proc/%d/fd" % server.process.pid)),
        "sqlite_kib": sqlite // 1024, "malloc_in_use_kib": in_use // 1024, "malloc_free_kib": free // 1024,
        "cpu_s": server.cpu_seconds(),
    }


def slope(points):
    """Least-squares slope of (x, y) points."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=int, default=100_000)
    parser.add_argument("--seconds", type=int, default=300)
    parser.add_argument("--server", default=os.path.join(ROOT, ".build", "release", "library-server"))
    parser.add_argument("--no-results", action="store_true", help="print only; leave results/ alone")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="library-memory.")
    database = os.path.join(work, "memory.sqlite")
    subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), args.server, database, str(args.books), "1"],
                   check=True, timeout=900)
    server = Server([args.server, "--port", "0", "--database", database])
    stop = threading.Event()
    wrk = []
    try:
        environment = dict(os.environ, BENCH_LUA=os.path.join(HERE, "wrk"), BOOKS=str(args.books), LIBRARIES="1")
        for script, connections in (("mix.lua", 16), ("list.lua", 4)):
            wrk.append(subprocess.Popen(
                ["wrk", "-t1", "-c%d" % connections, "-d%ds" % args.seconds, "--timeout", "5s",
                 "-s", os.path.join(HERE, "wrk", script), "http://127.0.0.1:%d" % server.port],
                env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        paths = (["/libraries/%s/events?fields=name,books.title" % LIBRARY] * 2
                 + ["/books/events?libraryId=%s&fields=title" % LIBRARY] * 2
                 + ["/books/%s/events?fields=title,version" % book_id(n) for n in range(1, 7)])
        churners = [Churner(server.port, paths, stop, seed) for seed in range(12)]
        for churner in churners:
            churner.start()
        started = time.monotonic()
        samples = []
        while time.monotonic() - started < args.seconds:
            time.sleep(SAMPLE_EVERY)
            samples.append(sample(server, started))
            last = samples[-1]
            if len(samples) % LOG_EVERY == 0:
                log("t %5.0f s  RssAnon %7.1f MiB (SQLite %5.1f; malloc in use %6.1f, free %6.1f)  RssFile %5.1f MiB  "
                    "FDs %4d  CPU %6.1f s"
                    % (last["t"], last["rss_anon_kib"] / 1024, last["sqlite_kib"] / 1024,
                       last["malloc_in_use_kib"] / 1024, last["malloc_free_kib"] / 1024,
                       last["rss_file_kib"] / 1024, last["fds"], last["cpu_s"]))
        stop.set()
        outputs = [process.communicate(timeout=60)[0] for process in wrk]
    finally:
        stop.set()
        for process in wrk:
            if process.poll() is None:
                process.kill()
        server.stop()
        stop_all()
        subprocess.run(["rm", "-rf", work])

    requests = sum(int(line.split("requests=")[1].split()[0]) for output in outputs
                   for line in output.splitlines() if line.startswith("RESULT"))
    half = samples[len(samples) // 2:]

    def trend(points):
        early = statistics.median(value for _, value in points[:len(points) // 2])
        late = statistics.median(value for _, value in points[len(points) // 2:])
        return early, late, slope(points) * 60

    anon_early, anon_late, anon_slope = trend([(s["t"], s["rss_anon_kib"] / 1024) for s in half])
    early, late, per_minute = trend([(s["t"], (s["rss_anon_kib"] - s["sqlite_kib"]) / 1024) for s in half])
    growth = late - early
    live_early, live_late, live_slope = trend(
        [(s["t"], (s["malloc_in_use_kib"] - s["sqlite_kib"]) / 1024) for s in half])
    (lowest_early, upper_early), (lowest_late, upper_late) = levels(
        [(s["rss_anon_kib"] - s["sqlite_kib"]) / 1024 for s in half])
    # The same two levels of what the server holds (malloc's bytes in use less SQLite's): when
    # RssAnon rises and these do not, what rose is malloc's pool of freed chunks still resident.
    (held_lowest_early, held_upper_early), (held_lowest_late, held_upper_late) = levels(
        [(s["malloc_in_use_kib"] - s["sqlite_kib"]) / 1024 for s in half])
    allowed = max(FLAT_MIB, upper_early * FLAT_FRACTION)
    flat = upper_late - upper_early <= allowed and lowest_late - lowest_early <= allowed
    cpu = samples[-1]["cpu_s"] - samples[0]["cpu_s"]
    result = {
        "books": args.books, "seconds": args.seconds, "requests": requests,
        "subscriptions": sum(churner.connections for churner in churners),
        "samples": samples,
        "rss_anon_first_mib": samples[0]["rss_anon_kib"] / 1024,
        "rss_anon_third_quarter_median_mib": anon_early, "rss_anon_last_quarter_median_mib": anon_late,
        "rss_anon_growth_mib": anon_late - anon_early, "rss_anon_slope_mib_per_min": anon_slope,
        "own_heap_third_quarter_median_mib": early, "own_heap_last_quarter_median_mib": late,
        "sqlite_first_mib": samples[0]["sqlite_kib"] / 1024, "sqlite_last_mib": samples[-1]["sqlite_kib"] / 1024,
        "rss_anon_max_mib": max(s["rss_anon_kib"] for s in samples) / 1024,
        "rss_file_last_mib": samples[-1]["rss_file_kib"] / 1024,
        "own_heap_third_quarter_lowest_mib": lowest_early, "own_heap_last_quarter_lowest_mib": lowest_late,
        "own_heap_third_quarter_upper_quartile_mib": upper_early,
        "own_heap_last_quarter_upper_quartile_mib": upper_late,
        "last_half_growth_mib": growth, "last_half_slope_mib_per_min": per_minute, "allowed_growth_mib": allowed,
        "flat": flat,
        "live_heap_third_quarter_median_mib": live_early, "live_heap_last_quarter_median_mib": live_late,
        "live_heap_slope_mib_per_min": live_slope,
        "held_third_quarter_lowest_mib": held_lowest_early, "held_last_quarter_lowest_mib": held_lowest_late,
        "held_third_quarter_upper_quartile_mib": held_upper_early,
        "held_last_quarter_upper_quartile_mib": held_upper_late,
        "malloc_free_max_mib": max(s["malloc_free_kib"] for s in samples) / 1024,
        "cpu_us_per_request": cpu * 1e6 / requests if requests else None,
        "fds_first": samples[0]["fds"], "fds_last": samples[-1]["fds"],
    }
    log("%d requests and %d subscriptions in %d s on %d books" % (requests, result["subscriptions"], args.seconds,
                                                                  args.books))
    log("RssAnon: %.1f MiB after %.0f s; medians %.1f MiB in the third quarter, %.1f MiB in the last (max %.1f); "
        "RssFile %.1f MiB at the end" % (result["rss_anon_first_mib"], samples[0]["t"], anon_early, anon_late,
                                        result["rss_anon_max_mib"], result["rss_file_last_mib"]))
    log("SQLite's page caches: %.1f MiB after %.0f s, %.1f MiB at the end"
        % (result["sqlite_first_mib"], samples[0]["t"], result["sqlite_last_mib"]))
    log("last half, the server's own heap (RssAnon less SQLite's), third quarter -> last: lowest (no model loaded) "
        "%.1f -> %.1f MiB (%+.2f), upper quartile (models loaded) %.1f -> %.1f MiB (%+.2f); flat means each at most "
        "%+.1f MiB: %s" % (lowest_early, lowest_late, lowest_late - lowest_early, upper_early, upper_late,
                           upper_late - upper_early, allowed, "flat" if flat else "GROWS"))
    log("last half, the server's own heap's medians: %.1f -> %.1f MiB, %+.2f MiB (slope %+.2f MiB/min)"
        % (early, late, growth, per_minute))
    log("last half, malloc's bytes in use less SQLite's (what the server holds, without the freed chunks malloc "
        "keeps for reuse): %.1f -> %.1f MiB (slope %+.2f MiB/min); malloc's free pool at most %.1f MiB"
        % (live_early, live_late, live_slope, result["malloc_free_max_mib"]))
    log("last half, what the server holds, third quarter -> last: lowest %.1f -> %.1f MiB (%+.2f), upper quartile "
        "%.1f -> %.1f MiB (%+.2f)" % (held_lowest_early, held_lowest_late, held_lowest_late - held_lowest_early,
                                      held_upper_early, held_upper_late, held_upper_late - held_upper_early))
    if not args.no_results:
        write_result("memory", result)
    return 0 if result["flat"] else 1


def levels(values):
    """The two levels a heap that swings between them shows, in each half of `values`: its lowest
    sample (no model loaded) and its upper quartile (the models loaded, without the spikes of
    several snapshots in flight)."""
    halves = values[:len(values) // 2], values[len(values) // 2:]
    return [(min(half), statistics.quantiles(half, n=4)[2]) for half in halves]


if __name__ == "__main__":
    sys.exit(main())
