#!/usr/bin/env python3
"""Where the first join of a huge library goes: the parts of library-server's work, timed by `perf`.

    Benchmarks/profile_join.py [--books 1000000] [--rounds 3] [--server PATH]

Seeds one library of BOOKS books (Benchmarks/seed.py), then each round starts a fresh server on
it (its defaults, every core), starts `perf record` on it (999 samples per second of each thread's
CPU time, on the monotonic clock this script reads), opens the library's `books.title` stream
and reads it to the end of its snapshot, and stops the recording. Each sample taken between
connecting and the snapshot's end goes to the part of the join its call chain is in: the read
(SQLite's steps and the records made of its rows, in the load's read transaction), the models (the
members' `LiveBook`s, their index by id and the snapshot's table: `LoadedMembers`), the encoding
(the event's bytes; its rows are encoded on the models' thread, beside the read) or the rest
(the event loops, sending). For each part: its CPU time, when it ran (from its first to its last
sample, from connecting), how much of a core it had meanwhile, and the functions it spent most in
(self time). The round whose join took the median time is reported in full.

What it answers is what stands in the way of a first join in 1 s: whether one thread works
through the whole load at a full core (that thread's work is the floor, however the others
overlap it), and the join's CPU time against what this machine's cores can give in its time.
Needs `perf` (Debian `linux-perf`) and root or a low `perf_event_paranoid`. Writes
Benchmarks/results/profile-join.json (with the commit and the machine), from which
Benchmarks/figures.py makes the README's table. Talks to 127.0.0.1 only; stops by itself.
"""

import argparse
import collections
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import Server, log, open_stream, read_snapshot, write_result  # noqa: E402
from profile_get import readable  # noqa: E402

LIBRARY = "00000000-0000-4000-8000-000000000001"  # Benchmarks/seed.py's first library
FREQUENCY = 999

# What tells the part of the join a sample belongs to: a function on its call chain (mangled
# names hold the identifiers), tried in order; a sample with none of them is the rest (sending,
# the event loops, the stream's start). The snapshot's rows are encoded on the models' thread as
# they are read (`appendRows`, called from `LoadedMembers`): encoding, wherever it runs.
PARTS = [
    ("read", r"readInTransaction"),
    ("encoding", r"encodeElsewhere|EventEncoding|appendRows|appendMember"),
    ("models", r"LoadedMembers"),
]
OTHER = "rest"


def join(port):
    """Reads the big library's stream to the end of its snapshot; returns the monotonic times of
    connecting and of the snapshot's last byte."""
    began = time.monotonic()
    with open_stream(port, "/libraries/%s/events?fields=books.title" % LIBRARY) as stream:
        read_snapshot(stream)
        return began, time.monotonic()


def samples(data, began, ended):
    """The samples of `perf record -g` output `data` taken between `began` and `ended` (`parse`)."""
    script = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,ip,sym,dso"], check=True,
                            capture_output=True, text=True, timeout=600).stdout
    return parse(script, began, ended)


def parse(script, began, ended):
    """(thread, seconds from `began`, the part its call chain tells or None, "dso symbol" of the
    function on top) of each sample of `perf script` output taken between `began` and `ended`."""
    found = []
    for block in script.split("\n\n"):
        lines = block.strip("\n").splitlines()
        header = re.match(r"\s*(\d+)\s+([0-9.]+):", lines[0]) if lines else None
        if not header or len(lines) < 2:
            continue
        at = float(header.group(2))
        if not began <= at <= ended:
            continue
        frames = [re.match(r"\s*[0-9a-f]+\s+(.*?)\s*\((.*)\)\s*$", line) for line in lines[1:]]
        frames = [(os.path.basename(frame.group(2)), frame.group(1)) for frame in frames if frame]
        if not frames:
            continue
        chain = " ".join(symbol for _, symbol in frames)
        part = next((name for name, pattern in PARTS if re.search(pattern, chain)), None)
        if part is None and any(dso.startswith("libsqlite3") for dso, _ in frames):
            part = "read"  # Debian's libsqlite3 keeps no frame pointers: its chains stop in it
        found.append((int(header.group(1)), at - began, part, "%s %s" % frames[0]))
    return found


def parts(found):
    """Each part's samples: {part: [(seconds, "dso symbol")]}. A sample whose call chain tells no
    part (a page fault's, an allocator's whose chain was cut short) goes to the part its thread ran
    in the same 50 ms, by most of that stretch's telling samples; the rest when none tell."""
    votes = collections.defaultdict(collections.Counter)
    for tid, at, part, _ in found:
        if part:
            votes[tid, int(at / 0.05)][part] += 1
    grouped = collections.defaultdict(list)
    for tid, at, part, text in found:
        stretch = votes.get((tid, int(at / 0.05)))
        grouped[part or (stretch.most_common(1)[0][0] if stretch else OTHER)].append((at, text))
    return grouped


def describe(entries):
    """CPU seconds, span (first and last sample), busy share of one core over that span, and the
    five functions with most self time (share of the part's samples)."""
    times = sorted(at for at, _ in entries)
    cpu = len(entries) / FREQUENCY
    first, last = times[0], times[-1]
    span = max(last - first, 1 / FREQUENCY)
    top = collections.Counter(text for _, text in entries).most_common(5)
    return {"cpu_s": round(cpu, 3), "first_s": round(first, 3), "last_s": round(last, 3),
            "busy": round(cpu / span, 2), "top": [[round(100 * count / len(entries), 1), text] for text, count in top]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server", default=os.path.join(os.path.dirname(HERE), ".build", "release", "library-server"))
    args = parser.parse_args()
    cores = os.cpu_count()
    rounds = []
    with tempfile.TemporaryDirectory() as work:
        database = os.path.join(work, "join.sqlite")
        log("seeding %d books in one library" % args.books)
        subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), args.server, database, str(args.books), "1"],
                       check=True, stdout=subprocess.DEVNULL, timeout=1800)
        for number in range(1, args.rounds + 1):
            server = Server([args.server, "--port", "0", "--database", database, "--log-level", "warning"])
            data = os.path.join(work, "perf-%d.data" % number)
            try:
                record = subprocess.Popen(["perf", "record", "-g", "-F", str(FREQUENCY), "-k", "CLOCK_MONOTONIC", "-p",
                                           str(server.process.pid), "-o", data], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
                time.sleep(1)  # perf attached to every thread
                began, ended = join(server.port)
                record.send_signal(signal.SIGINT)
                record.wait(timeout=120)
            finally:
                server.process.terminate()
                server.process.wait(timeout=60)
            joined = ended - began
            grouped = parts(samples(data, began, ended))
            cpu = sum(len(entries) for entries in grouped.values()) / FREQUENCY
            described = sorted((dict(describe(entries), part=name) for name, entries in grouped.items()),
                               key=lambda part: (part["part"] == OTHER, part["first_s"]))
            rounds.append({"join_s": round(joined, 3), "cpu_s": round(cpu, 3), "parts": described})
            log("round %d: snapshot in %.2f s, %.2f s of CPU (%.2f s on %d cores at best); %s" % (
                number, joined, cpu, cpu / cores, cores, "; ".join(
                    "%s %.2f s of CPU from %.2f to %.2f s (%.0f %% of a core)" % (
                        part["part"], part["cpu_s"], part["first_s"], part["last_s"], 100 * part["busy"])
                    for part in described)))
    # The round whose join took the median time is the one reported in full; the others' join and
    # CPU times beside it.
    middle = sorted(rounds, key=lambda item: item["join_s"])[len(rounds) // 2]
    names = readable(sorted({text.split(" ", 1)[1] for part in middle["parts"] for _, text in part["top"]}))
    for part in middle["parts"]:
        part["top"] = [[share, names.get(text.split(" ", 1)[1], text.split(" ", 1)[1])] for share, text in part["top"]]
    result = {"books": args.books, "rounds": args.rounds, "cores": cores, "frequency": FREQUENCY,
              "joins_s": [item["join_s"] for item in rounds], "cpus_s": [item["cpu_s"] for item in rounds],
              "median": middle}
    path = write_result("profile-join", result)
    print("median round: snapshot in %.2f s (rounds: %s), CPU %.2f s: at least %.2f s on %d cores"
          % (middle["join_s"], ", ".join("%.2f" % item for item in result["joins_s"]), middle["cpu_s"],
             middle["cpu_s"] / cores, cores))
    for part in middle["parts"]:
        print("  %-8s %.2f s of CPU, %.2f -> %.2f s, %3.0f %% of a core; %s" % (
            part["part"], part["cpu_s"], part["first_s"], part["last_s"], 100 * part["busy"],
            ", ".join("%s %.1f %%" % (symbol, share) for share, symbol in part["top"])))
    print("results in %s" % path)
    print("median of %d rounds: %.2f s" % (len(rounds), statistics.median(result["joins_s"])))


if __name__ == "__main__":
    main()
