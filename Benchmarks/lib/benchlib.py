"""What the benchmark scripts share: their server processes, logging, SSE framing,
/metrics, percentiles and result files. Each script imports this, never another script.

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
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # Benchmarks/
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

running = []


def stop_all(*_):
    for process in running:
        if process.poll() is None:
            process.kill()
    if _:
        sys.exit(130)


signal.signal(signal.SIGTERM, stop_all)
signal.signal(signal.SIGINT, stop_all)


def log(message):
    print(message, flush=True)


class Server:
    """A server process on a free port (`--port 0`, read back from `listening on ...`), stopped with
    SIGTERM (or killed) when done. Its stderr is discarded (library-server's access log is a line
    per request) unless `keep_errors`, which keeps it to explain a failed start."""

    def __init__(self, command, ready_timeout=120, name=None, keep_errors=False):
        started = time.monotonic()
        self.name = name or os.path.basename(command[0])
        self.errors = tempfile.TemporaryFile(mode="w+") if keep_errors else subprocess.DEVNULL
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.errors, text=True)
        running.append(self.process)
        self.port = None
        deadline = started + ready_timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            match = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if match:
                self.port = int(match.group(1))
                break
        if self.port is None:
            self.stop()
            detail = "(stderr not kept)"
            if keep_errors:
                self.errors.seek(0)
                detail = self.errors.read()[-4000:]
            raise RuntimeError("%s did not start: %s" % (command[0], detail))
        self.startup_seconds = time.monotonic() - started
        # Keep reading stdout, so a chatty server never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()

    def status(self, key):
        """A `/proc/PID/status` field in kB (`VmRSS`, `VmHWM`, `RssAnon`)."""
        with open("/proc/%d/status" % self.process.pid) as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return 0

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.process.pid) as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process in running:
            running.remove(self.process)


def dechunk(raw, body):
    """Moves the complete chunks of chunked framing from `raw` to `body` (both bytearrays),
    leaving an incomplete one in `raw`."""
    position = 0
    while True:
        end = raw.find(b"\r\n", position)
        if end < 0:
            break
        size = int(raw[position:end], 16)
        if len(raw) < end + 4 + size:
            break
        body += raw[end + 2:end + 2 + size]
        position = end + 4 + size
    del raw[:position]


def metric(port, name):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    match = re.search((r"^%s(?:\{[^}]*\})? (\d+)" % name).encode(), data, re.M)
    return int(match.group(1)) if match else 0


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")




def commit():
    """The short hash of the checked-out commit (with `+` when the tree has changes)."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


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
