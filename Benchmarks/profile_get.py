#!/usr/bin/env python3
"""Where a GET's CPU goes: `perf record` of library-server under `wrk`, grouped into categories.

    Benchmarks/profile_get.py SERVER [--books N] [--seconds S]

Seeds N books (default 100,000; Benchmarks/seed.py), starts SERVER with its defaults (access log
on) pinned to CPU 0, loads `GET /books/{id}` (ids cycling over every book,
Benchmarks/wrk/get.lua) with `wrk -t1 -c32` pinned to CPU 1, records the server's samples
for S seconds (default 8) after a warm-up, and prints the share of its CPU time per category
(self time of each sampled function). Needs `perf` (Debian `linux-perf`) and root or a low
`perf_event_paranoid`. Writes Benchmarks/results/profile-get.json (with the commit and the
machine), from which Benchmarks/figures.py makes the README's table. Talks to 127.0.0.1 only;
stops by itself.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import write_result  # noqa: E402

# First match wins; patterns are tried on "dso symbol".
CATEGORIES = [
    ("kernel (TCP, epoll, syscalls, scheduler)", r"\[kernel"),
    ("SQLite (libsqlite3)", r"libsqlite3"),
    ("allocator and reference counting", r"libc\.so\S* \S*(malloc|free|_int_|cfree)|swift_(retain|release|allocObject|"
     r"deallocObject|bridgeObject|isUniquelyReferenced)|RefCounts|swift_slowAlloc|swift_slowDealloc"),
    ("HTTP head parsing and routing", r"HTTPRequestParser|HTTPHeadParser|HTTPRequestHeaders|ByteScanning|Route|"
     r"PathSegments|percentDecode|QueryParameters"),
    ("access log", r"AccessLogLine|LogBuffer|LogSink|Exchange\S*decorate"),
    ("JSON and response head", r"JSONWriter|writeHead|HTTPResponse|HTTPDate|RecordEncoding"),
    ("other library-server code", r"^library-server"),
    ("other libraries (libc, Swift runtime, Foundation)", r"."),
]


def readable(symbols):
    """Each symbol as a reader knows it: Swift's demangled (`swift demangle --simplified`, when the
    toolchain is there), without generic specialization prefixes, at most 70 characters."""
    names = {symbol: symbol for symbol in symbols}
    try:
        output = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(symbols),
                                capture_output=True, text=True, timeout=60).stdout.splitlines()
        if len(output) == len(symbols):
            names = dict(zip(symbols, output))
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {symbol: re.sub(r"^(generic specialization <[^>]*> of |specialized |merged |partial apply for )+", "", name)[:70]
            for symbol, name in names.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("--books", type=int, default=100_000)
    parser.add_argument("--seconds", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        db = os.path.join(work, "profile.db")
        subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), args.server, db, str(args.books), "100"],
                       check=True, capture_output=True, timeout=600)
        server = subprocess.Popen(["taskset", "-c", "0", args.server, "--database", db, "--port", "0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            port = int(server.stdout.readline().rsplit(":", 1)[1].strip().rstrip("/"))
            url = "http://127.0.0.1:%d" % port
            env = dict(os.environ, BOOKS=str(args.books), LIBRARIES="100", BENCH_LUA=os.path.join(HERE, "wrk"))
            wrk = ["taskset", "-c", "1", "wrk", "-t1", "-c32", "-s", os.path.join(HERE, "wrk", "get.lua")]
            subprocess.run(wrk + ["-d3s", url], check=True, capture_output=True, env=env, timeout=60)
            data = os.path.join(work, "perf.data")
            record = subprocess.Popen(["perf", "record", "-F", "999", "-p", str(server.pid), "-o", data, "--",
                                       "sleep", str(args.seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            load = subprocess.run(wrk + ["-d%ds" % (args.seconds + 1), url], check=True, capture_output=True,
                                  text=True, env=env, timeout=120)
            record.wait(timeout=60)
        finally:
            server.terminate()
            server.wait(timeout=30)
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio",
                                 "-g", "none", "--percent-limit", "0"], check=True, capture_output=True, text=True,
                                timeout=300).stdout
    shares = {name: 0.0 for name, _ in CATEGORIES}
    symbols = {name: [] for name, _ in CATEGORIES}
    for line in report.splitlines():
        match = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[.\]\s+(.*)", line)
        if not match:
            continue
        percent, dso, symbol = float(match.group(1)), match.group(2), match.group(3).strip()
        text = dso + " " + symbol
        for name, pattern in CATEGORIES:
            if re.search(pattern, text):
                shares[name] += percent
                symbols[name].append((percent, symbol))
                break
    names = readable([symbol for entries in symbols.values() for _, symbol in entries])
    symbols = {name: [(percent, names[symbol]) for percent, symbol in entries] for name, entries in symbols.items()}
    rate = re.search(r"Requests/sec:\s+([0-9.]+)", load.stdout)
    print("GET /books/{id}, %d books, server on 1 core, wrk -t1 -c32 on the other: %s req/s"
          % (args.books, rate.group(1) if rate else "?"))
    categories = [{"name": name, "share": round(shares[name], 1),
                   "largest": [[percent, symbol] for percent, symbol in sorted(symbols[name], reverse=True)[:3]]}
                  for name, _ in CATEGORIES]
    path = write_result("profile-get", {"books": args.books, "seconds": args.seconds,
                                        "rps": float(rate.group(1)) if rate else 0, "categories": categories})
    print("results in %s" % path)
    print()
    print("| where the server's CPU goes | share | largest |")
    print("|---|---:|---|")
    for name, _ in CATEGORIES:
        top = ", ".join("`%s` %.1f" % (symbol.replace("|", "/"), percent) for percent, symbol in
                        sorted(symbols[name], reverse=True)[:3])
        print("| %s | %.1f %% | %s |" % (name, shares[name], top))


if __name__ == "__main__":
    main()
