"""What the benchmark scripts share: logging, SSE framing, /metrics, percentiles and result files,
and from scripts/lib/harness.py (the scripts' and benchmarks' one harness) the server starter.
Each script imports this, never another script.

Standard library only; everything talks to 127.0.0.1.
"""

import contextlib
import json
import os
import re
import signal
import socket
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # Benchmarks/
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
import autogroup  # noqa: E402
import harness  # noqa: E402
import result_files  # noqa: E402
# The one server starter (scripts/lib/harness.py): a process on a free port (`--port 0`, read
# back from `listening on ...`), stopped with SIGTERM (or killed); its stderr is discarded
# (library-server's access log is a line per request) unless `keep_errors`.
Server = harness.Process
running = harness.running
# Result files (Benchmarks/lib/result_files.py, which has no import-time effects: scripts outside
# Benchmarks/ write their results through it without taking the signal handlers below).
RESULTS = result_files.RESULTS
commit, machine, write_result = result_files.commit, result_files.machine, result_files.write_result


def stop_all(*_):
    harness.stop_all()
    if _:
        sys.exit(130)


signal.signal(signal.SIGTERM, stop_all)
signal.signal(signal.SIGINT, stop_all)


def log(message):
    print(message, flush=True)


# The SSE framing of every benchmark: harness.unchunk (chunked framing off a raw socket's bytes)
# and harness.event_fields (one event's fields).
dechunk = harness.unchunk
event_fields = harness.event_fields


def open_stream(port, path):
    """A raw socket with `GET path` sent for an event stream (read it with `read_snapshot` or recv)."""
    stream = socket.create_connection(("127.0.0.1", port), timeout=120)
    stream.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n" % path).encode())
    return stream


def read_snapshot(stream):
    """Reads until the end of the stream's snapshot event (a blank line after `event: snapshot`),
    without parsing it: a million members' snapshot is 75 MB."""
    tail, seen = b"", False
    while True:
        data = stream.recv(1 << 20)
        if not data:
            raise RuntimeError("the stream closed before its snapshot ended")
        window = tail + data
        if not seen and b"event: snapshot" in window:
            seen, window = True, window[window.index(b"event: snapshot"):]
        if seen and b"\n\n" in window:
            return
        tail = window[-64:]


def metrics_page(port):
    """One read of `/metrics`: (the HTTP status, the text)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = re.match(rb"HTTP/1\.1 (\d{3})", head)
    return (int(status.group(1)) if status else 0), body.decode("utf-8", "replace")


def metrics(port, *names):
    """The values of `names` in one read of `/metrics` (`values`)."""
    return values(metrics_page(port)[1], *names)


def values(text, *names):
    """The values of `names` in a `/metrics` text (0 for one it does not have; of a labelled
    metric, its first series)."""
    parsed = harness.parse_metrics(text)
    return [int(next((value for key, value in parsed.items() if key.partition("{")[0] == name), 0))
            for name in names]


def series(text, name):
    """Every series of the metric `name` in a `/metrics` text (`harness.parse_metrics`, the one
    reader of it): {((label, value), ...): number}."""
    found = {}
    for key, value in harness.parse_metrics(text).items():
        metric, _, labels = key.partition("{")
        if metric == name:
            found[tuple(re.findall(r'(\w+)="([^"]*)"', labels))] = value
    return found


def slower_than(text, histogram, seconds):
    """How many observations of `histogram` (every series, summed) took over `seconds`, which must
    be one of its bucket bounds: each series' `+Inf` bucket less its bucket at that bound (none
    when the histogram has no such bound)."""
    buckets = {tuple(sorted(labels)): count for labels, count in series(text, histogram + "_bucket").items()}
    bound = repr(float(seconds))
    total = 0
    for labels, count in buckets.items():
        rest = dict(labels)
        if rest.pop("le", None) != "+Inf":
            continue
        total += int(count - buckets.get(tuple(sorted(dict(rest, le=bound).items())), count))
    return total


def metric(port, name):
    return metrics(port, name)[0]


def page_cursors(connection, path, count, every, page_size):
    """Cursors spread over the list `GET path` pages (on `connection`, an http.client connection):
    the `nextCursor` of every `every`-th page of `page_size` rows, `count` of them at most."""
    found, cursor, page = [], None, 0
    while len(found) < count:
        query = path + ("&" if "?" in path else "?") + "limit=%d" % page_size + ("&cursor=" + cursor if cursor else "")
        connection.request("GET", query)
        response = connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise SystemExit("%s: %d %s" % (query, response.status, data[:200]))
        cursor = json.loads(data)["nextCursor"]
        if cursor is None:
            break
        page += 1
        if page % every == 0:
            found.append(cursor)
    return found


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")




@contextlib.contextmanager
def one_scheduling_group():
    """Turns the kernel's autogroup scheduling off while the block runs (as root), and back as it
    was after; yields what the run had: "off", "turned off" or "on" (not root: a warning is
    logged). Why: Benchmarks/lib/autogroup.py, which decides it for the shell benchmarks too."""
    state, previous = autogroup.turn_off()
    if state == "on":
        log(autogroup.WARNING)
    try:
        yield state
    finally:
        autogroup.restore(previous)
