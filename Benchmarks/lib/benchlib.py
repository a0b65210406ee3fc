"""What the benchmark scripts share: logging, SSE framing, /metrics, percentiles and result files,
and from scripts/lib/harness.py (the scripts' and benchmarks' one harness) the server starter.
Each script imports this, never another script.

Standard library only; everything talks to 127.0.0.1.
"""

import datetime
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # Benchmarks/
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
import harness  # noqa: E402
# The one server starter (scripts/lib/harness.py): a process on a free port (`--port 0`, read
# back from `listening on ...`), stopped with SIGTERM (or killed); its stderr is discarded
# (library-server's access log is a line per request) unless `keep_errors`.
Server = harness.Process
running = harness.running


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


def metrics(port, *names):
    """The values of `names` in one read of `/metrics` (0 for one it does not have)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    values = []
    for name in names:
        match = re.search((r"^%s(?:\{[^}]*\})? (\d+)" % name).encode(), data, re.M)
        values.append(int(match.group(1)) if match else 0)
    return values


def metric(port, name):
    return metrics(port, name)[0]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")




def commit():
    """The short hash of the checked-out commit, with `+` when what is measured differs from it:
    a tracked file changed other than Markdown and Benchmarks/results/ (which the runs themselves
    rewrite, the README's tables included)."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    status = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True)
    changed = [line[3:] for line in status.stdout.splitlines()]
    dirty = [path for path in changed if not path.endswith(".md") and not path.startswith("Benchmarks/results/")]
    return head.stdout.strip() + ("+" if dirty else "")


def machine():
    return "%s, %d cores" % (platform.machine(), os.cpu_count() or 0)


def write_result(name, data):
    """Writes Benchmarks/results/NAME.json: `data` with the date, the commit and the machine."""
    record = dict(data, date=datetime.date.today().isoformat(), commit=commit(), machine=machine())
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name + ".json")
    with open(path, "w") as out:
        json.dump(record, out, indent=1, sort_keys=True)
        out.write("\n")
    return path
