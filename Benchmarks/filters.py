#!/usr/bin/env python3
"""Times GET /books for every filter combination the API offers, on a seeded database.

    Benchmarks/filters.py URL [REQUESTS]

URL is a running server on a database from Benchmarks/seed.py (its ids are fixed). Each
combination is asked REQUESTS times (default 200) over one keep-alive connection; prints the
median and 95th percentile in milliseconds, first page of 50.
"""

import http.client
import statistics
import sys
import time
import urllib.parse

LIBRARY = "00000000-0000-4000-8000-000000000007"
AUTHOR = "Author 7"
COMBINATIONS = [
    ("none", "/books"),
    ("libraryId", f"/books?libraryId={LIBRARY}"),
    ("author", f"/books?author={urllib.parse.quote(AUTHOR)}"),
    ("available", "/books?available=true"),
    ("libraryId+author", f"/books?libraryId={LIBRARY}&author={urllib.parse.quote(AUTHOR)}"),
    ("libraryId+available", f"/books?libraryId={LIBRARY}&available=true"),
    ("author+available", f"/books?author={urllib.parse.quote(AUTHOR)}&available=true"),
    ("all three", f"/books?libraryId={LIBRARY}&author={urllib.parse.quote(AUTHOR)}&available=true"),
    ("/libraries/{id}/books?available=true", f"/libraries/{LIBRARY}/books?available=true"),
    ("/libraries/{id}/books?author=", f"/libraries/{LIBRARY}/books?author={urllib.parse.quote(AUTHOR)}"),
]


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    url = urllib.parse.urlsplit(sys.argv[1])
    requests = int(sys.argv[2]) if len(sys.argv) == 3 else 200
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    print(f"{'combination':40} {'median ms':>10} {'p95 ms':>8}")
    for name, path in COMBINATIONS:
        times = []
        for _ in range(requests):
            started = time.perf_counter()
            connection.request("GET", path, headers={"Host": f"{url.hostname}:{url.port}"})
            response = connection.getresponse()
            response.read()
            times.append((time.perf_counter() - started) * 1000)
            if response.status != 200:
                raise SystemExit(f"{path}: {response.status}")
        times.sort()
        print(f"{name:40} {statistics.median(times):10.2f} {times[int(len(times) * 0.95)]:8.2f}")


if __name__ == "__main__":
    main()
