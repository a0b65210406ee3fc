"""The Python harness shared by the scripts (scripts/*.py) and the benchmarks (Benchmarks/lib/benchlib.py).

Standard library only, like the scripts; they import it with

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
    from harness import ...

Provides
  HOST                      "127.0.0.1", the only address the scripts talk to
  Report(name)              the counters: check(ok, message) counts a check and prints
                            "ok - message" or "FAIL - message"; note(message) prints "# message";
                            summary() prints "NAME: N passed, M failed" and returns the exit status
                            (0, or 1 when anything failed)
  Process(command, ...)     the one server starter: a program that prints `listening on
                            http://127.0.0.1:PORT` when it serves (library-server, the benchmarks'
                            comparators); port, pid, alive(), status(key), cpu_seconds(), stop()
  Server(binary, workdir)   a Process: the binary on a fresh database in workdir (`--port 0`, `--log-level
                            warning`): a SQLite file, or with LIBRARY_TEST_ENGINE=postgres and
                            LIBRARY_TEST_POSTGRES=URI a PostgreSQL schema of its own (made with
                            psql, dropped by stop()), its port read from the ready line `listening on
                            http://127.0.0.1:PORT` (killed if that does not come within 10 s),
                            stderr to a file; port, pid, alive(), stop(timeout) (SIGTERM, then the
                            exit status; None when it had to be killed), stderr_lines(), stderr_tail()
  run_server(...)           the usual run: the server on a fresh temporary directory, the script's
                            checks, SIGTERM (exit status 0 expected), then check_stderr
  check_stderr(...)         fails on every stderr line that mentions `error` or `critical`
                            (bad input is the client's mistake, not a server error), notes the rest
  start_watchdog(...)       past a time limit: kill the server, one more failure, the summary, exit 2
  shorten(text, limit)      text cut to limit characters, control characters escaped, for printing
  parse_headers(head)       a response head's header fields as {lowercase name: value}
  parse_metrics(text)       GET /metrics as {name or name{labels}: value}
  dechunk(stream)           an event stream's body bytes moved from stream.raw to stream.text,
                            chunked framing undone (stream.headers, stream.ended)
  next_event(stream)        the next complete event in stream.text as (kind, id, data), or None
  unchunk(raw, body)        the same on bytearrays (the benchmarks' readers)
  event_fields(block)       one event's block as (kind, id, data lines): the one SSE field parser
  open_non_readers(port, request, count, receive_buffer, timeout)
                            count sockets, each with a small receive buffer set before connecting,
                            that send `request` and then never read (a stalled SSE client)
"""

import json
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time

HOST = "127.0.0.1"


# --- reporting ------------------------------------------------------------------------------


class Report:
    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0

    def check(self, ok, message):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok' if ok else 'FAIL'} - {message}", flush=True)

    @staticmethod
    def note(message):
        print(f"# {message}", flush=True)

    def summary(self):
        print(f"{self.name}: {self.passed} passed, {self.failed} failed", flush=True)
        return 0 if self.failed == 0 else 1


def shorten(text, limit):
    """`text` cut to `limit` characters, with control characters escaped (it is printed as is)."""
    text = "".join(char if char.isprintable() else repr(char)[1:-1] for char in str(text))
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --- the server under test ------------------------------------------------------------------


running = []  # every Process started and not yet stopped (a script's signal handler kills them)


class Process:
    """A program that prints `listening on http://127.0.0.1:PORT` on stdout once it serves
    (library-server, and the benchmarks' comparators, started with `--port 0`): the one server
    starter of the Python scripts. Other stdout lines before it are skipped; after it, stdout is
    drained so a chatty program never blocks on a full pipe. stderr goes to `stderr_path`, or to a
    temporary file with `keep_errors` (to explain a failed start), or is discarded (an access log
    is a line per request). Killed if the line does not come within `ready_timeout` seconds."""

    def __init__(self, command, name=None, ready_timeout=120, stderr_path=None, keep_errors=False,
                 preexec_fn=None):
        started = time.monotonic()
        self.name = name or os.path.basename(command[0])
        self.stderr_path = stderr_path
        if stderr_path:
            stderr = open(stderr_path, "wb")
        else:
            stderr = tempfile.TemporaryFile() if keep_errors else subprocess.DEVNULL
        self.errors = stderr if keep_errors and not stderr_path else None
        try:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
                                            preexec_fn=preexec_fn)
        finally:
            if stderr_path:
                stderr.close()
        running.append(self.process)
        try:
            self.port = self._read_port(ready_timeout)
        except RuntimeError as error:
            self.process.kill()
            self.process.wait()
            running.remove(self.process)
            raise RuntimeError(f"{self.name} did not start: {error}") from None
        self.startup_seconds = time.monotonic() - started
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()

    def _read_port(self, timeout):
        deadline = time.monotonic() + timeout
        line = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.process.stdout], [], [], remaining)[0]:
                raise RuntimeError(f"no ready line within {timeout} s {self.errors_tail()}")
            byte = os.read(self.process.stdout.fileno(), 1)
            if not byte:
                raise RuntimeError(f"it exited before it was ready {self.errors_tail()}")
            line += byte
            if line.endswith(b"\n"):
                match = re.fullmatch(rb"listening on http://127\.0\.0\.1:(\d+)\n", line)
                if match:
                    return int(match.group(1))
                line = b""

    def errors_tail(self):
        """The end of what it wrote to stderr, when that is kept, for a message."""
        if self.stderr_path:
            with open(self.stderr_path, "rb") as stderr:
                return "(stderr: " + " | ".join(stderr.read().decode("utf-8", "replace").splitlines()[-3:]) + ")"
        if self.errors:
            self.errors.seek(0)
            return "(stderr: " + self.errors.read().decode("utf-8", "replace")[-4000:] + ")"
        return "(stderr not kept)"

    @property
    def pid(self):
        return self.process.pid

    def alive(self):
        return self.process.poll() is None

    def status(self, key):
        """A `/proc/PID/status` field in kB (`VmRSS`, `VmHWM`, `RssAnon`)."""
        with open("/proc/%d/status" % self.process.pid) as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return 0

    def cpu_seconds(self):
        """utime + stime so far."""
        with open("/proc/%d/stat" % self.process.pid) as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout=20):
        """SIGTERM, then the exit status (None if it had to be killed)."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
            return None
        finally:
            if self.process in running:
                running.remove(self.process)


def stop_all():
    """Kills every Process still running (a script's signal handler calls this)."""
    for process in running:
        if process.poll() is None:
            process.kill()


class Server(Process):
    """The binary on a fresh temporary database in `workdir` (`--port 0`, `--log-level warning`),
    stderr to workdir/server.stderr. `arguments` are added to the command line; `preexec_fn` runs
    in the child before it starts (to lower a resource limit, say)."""

    def __init__(self, binary, workdir, arguments=(), preexec_fn=None):
        self.postgres = None
        database = os.path.join(workdir, "lib.sqlite")
        if os.environ.get("LIBRARY_TEST_ENGINE") == "postgres":
            base = os.environ["LIBRARY_TEST_POSTGRES"]
            schema = "h_" + os.urandom(8).hex()
            subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", base, "-c", f"CREATE SCHEMA {schema}"],
                           check=True, stdout=subprocess.DEVNULL)
            self.postgres = (base, schema)
            database = base + ("&" if "?" in base else "?") + f"options=-csearch_path%3D{schema}"
        try:
            super().__init__([binary, "--port", "0", "--database", database, "--log-level", "warning", *arguments],
                             ready_timeout=10, stderr_path=os.path.join(workdir, "server.stderr"),
                             preexec_fn=preexec_fn)
        except RuntimeError:
            self._drop_schema()
            raise

    def stop(self, timeout=20):
        try:
            return super().stop(timeout)
        finally:
            self._drop_schema()

    def _drop_schema(self):
        if self.postgres:
            base, schema = self.postgres
            self.postgres = None
            subprocess.run(["psql", "-q", "-d", base, "-c", "SET client_min_messages = warning",
                            "-c", f"DROP SCHEMA {schema} CASCADE"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stderr_lines(self):
        with open(self.stderr_path, "rb") as stderr:
            return stderr.read().decode("utf-8", "replace").splitlines()

    def stderr_tail(self):
        return " | ".join(self.stderr_lines()[-3:])


def check_stderr(report, server, most=None, show=lambda line: shorten(line, 200)):
    """One failure per stderr line mentioning `error` or `critical` (the first `most` of them), or
    one pass when there is none; the other lines (of the first `most`) as notes, through `show`."""
    lines = server.stderr_lines()
    bad = [line for line in lines if re.search(r"error|critical", line, re.IGNORECASE)]
    for line in bad[:most]:
        report.check(False, f"server stderr: {show(line)}")
    if not bad:
        report.check(True, f"server stderr has no error or critical line ({len(lines)} lines in all)")
    for line in lines[:most]:
        if line not in bad:
            Report.note(f"server stderr: {show(line)}")


def run_server(report, binary, run, holder, stop_timeout=20, stderr_most=None,
               stderr_show=lambda line: shorten(line, 200), arguments=(), preexec_fn=None):
    """Starts the server on a fresh temporary directory named after the report (a failure to start
    is a failed check, and returns False) and puts it in `holder` for the watchdog; calls
    run(server), where an OSError or RuntimeError is a failed check ("the run stopped early");
    then stops it with SIGTERM, which must give exit status 0, and checks its stderr. Returns True.
    `arguments` and `preexec_fn` are passed on to `Server`."""
    with tempfile.TemporaryDirectory(prefix=f"{report.name}-") as workdir:
        try:
            server = Server(os.path.abspath(binary), workdir, arguments, preexec_fn)
        except (OSError, RuntimeError) as error:
            report.check(False, f"could not start the server: {error}")
            return False
        holder.append(server)
        try:
            run(server)
        except (OSError, RuntimeError) as error:
            report.check(False, f"the run stopped early: {error!r}")
        finally:
            status = server.stop(stop_timeout)
        report.check(status == 0, f"the server stopped on SIGTERM with exit status {status}")
        check_stderr(report, server, stderr_most, stderr_show)
    return True


def start_watchdog(report, holder, limit):
    """Past `limit` seconds: kill every server in `holder` (once there is one), print the summary so
    far with one more failure, exit 2."""
    def expire(*_):
        report.check(False, f"the run took more than {limit} s; stopping")
        for server in holder:
            server.process.kill()
        report.summary()
        os._exit(2)

    signal.signal(signal.SIGALRM, expire)
    signal.alarm(limit)


# --- reading responses ----------------------------------------------------------------------


def open_non_readers(port, request, count, receive_buffer, timeout):
    """count sockets that send `request` and never read: SO_RCVBUF is set before connecting, so the
    kernel takes little of what the server sends and the server soon sees a stalled reader."""
    sockets = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(timeout)
        sock.connect((HOST, port))
        sock.sendall(request)
        sockets.append(sock)
    return sockets


def parse_headers(head):
    """The header fields of a response head (bytes, status line first, no final blank line) as
    {lowercase name: value}; a repeated name keeps its last value."""
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return headers


def parse_metrics(text):
    """The samples of a GET /metrics body (Prometheus text) as {name or name{labels}: value}."""
    metrics = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            metrics[name] = float(value)
    return metrics


# --- event streams read off a raw socket ----------------------------------------------------
def unchunk(raw, body):
    """Moves the complete chunks of chunked framing from `raw` to `body` (both bytearrays), leaving
    an incomplete one in `raw`; True once the last chunk (size 0) has come. The one de-chunker of
    the scripts and benchmarks."""
    position = 0
    ended = False
    while True:
        end = raw.find(b"\r\n", position)
        if end < 0:
            break
        size = int(bytes(raw[position:end]).split(b";")[0], 16)
        if size == 0:
            ended = True
            position = end + 2
            break
        if len(raw) < end + 2 + size + 2:
            break
        body += raw[end + 2:end + 2 + size]
        position = end + 4 + size
    del raw[:position]
    return ended


def dechunk(stream):
    """Moves what `stream.raw` holds of the body into `stream.text`, undoing chunked framing
    (when `stream.headers` say so); sets `stream.ended` at the last chunk. A chunk not yet whole
    stays in `raw`."""
    if "chunked" not in stream.headers.get("transfer-encoding", ""):
        stream.text, stream.raw = stream.text + stream.raw, b""
        return
    if stream.ended:
        return
    raw, body = bytearray(stream.raw), bytearray()
    stream.ended = unchunk(raw, body)
    stream.raw = bytes(raw)
    stream.text += body


def event_fields(block):
    """An event's block (the bytes between blank lines) as (kind, id, data lines): `event`
    (default "message"), `id` (bytes, or None), the `data` lines (bytes) in order; a space after
    the colon is dropped, comments and other fields ignored. The one SSE field parser of the
    scripts and benchmarks."""
    kind, ident, data = "message", None, []
    for line in block.split(b"\n"):
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"event":
            kind = value.decode()
        elif name == b"id":
            ident = value
        elif name == b"data":
            data.append(value)
    return kind, ident, data


def next_event(stream):
    """The next complete event in `stream.text` as (kind, id, data), data parsed as JSON, or None;
    comments and `retry:` blocks are skipped."""
    while b"\n\n" in stream.text:
        block, stream.text = stream.text.split(b"\n\n", 1)
        kind, event_id, data = event_fields(bytes(block))
        if data:
            return kind, None if event_id is None else int(event_id), json.loads(b"\n".join(data))
    return None
