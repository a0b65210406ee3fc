#!/usr/bin/env python3
"""Slow and greedy clients against library-server: does it stay responsive, and let go of them?

Starts its own server (``--port 0``, a temporary database, ``--log-level warning``), creates one
library and one book, then holds open at once (default scale; ``--quick`` is a quarter of it):

  (a) 2,000 connections that send a partial request head and then nothing (slowloris);
  (b) 500 connections that send nothing at all;
  (c) 200 SSE subscribers, ``GET /books/{id}/events?fields=title`` with a small SO_RCVBUF set
      before connect, that never read a byte, while a writer PATCHes that book's title 300 times
      with ~400-character titles, so every subscriber's buffers fill up.

Meanwhile a probe opens a fresh connection every 100 ms and does GET /healthz and GET /books/{id}
on it; every answer must be a 200 and the slowest must take under 1 s (p50/p99/max are printed).
A thread samples GET /metrics twice a second.

Then the timeouts, each measured per connection (or from the gauges, for the subscribers that we
must not read from):
  * each half-sent head is ended by the server 9-20 s after it was sent (a 408, or a plain close):
    the 10 s request timeout;
  * each silent connection is ended within 20 s of connecting (the same slowloris defence: a
    client that sends nothing must not get longer than one that sends a little). The script keeps
    watching until 75 s, so a failure says when they were closed after all;
  * the never-reading subscribers are dropped by the server ~30 s after they stopped accepting data
    (between 25 s after the writer started and 60 s after it ended); some of their changes were
    coalesced (``library_sse_changes_coalesced_total``); once we do read, each stream ends in EOF;
  * a greedy client that pipelines 50,000 GET /healthz at once (~2 MiB, about twice the input the
    server buffers per connection) while reading the answers gets every one of them;
  * a client that reads a 500-book page (~480 KB) slowly but steadily, 2 KB every 200 ms, gets
    all of it in ~50 s: only a client that takes nothing for the 30 s write timeout is dropped;
  * afterwards ``library_http_open_connections`` is back to a handful and
    ``library_sse_subscribers`` to 0, the server still answers, stops with exit 0 on SIGTERM, and
    logged no `error` or `critical` line.

Usage: scripts/slow-clients.py SERVER_BINARY [--scale F | --quick]
Raises its own RLIMIT_NOFILE soft limit to the hard limit. Talks to 127.0.0.1 only. Prints one
`ok - ...` / `FAIL - ...` line per check, `# ...` lines with measurements, then
`slow-clients: N passed, M failed`; exits 1 when anything failed. Takes 130-150 s whatever the
scale (the timeouts set the pace) and never more than TIME_LIMIT seconds.
"""

import argparse
import json
import os
import re
import resource
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import HOST, Report, open_non_readers, parse_metrics, run_server, start_watchdog  # noqa: E402

NAME = "slow-clients"
TIME_LIMIT = 240  # seconds for the whole run; a watchdog stops everything past it
IO_TIMEOUT = 5.0  # seconds for any single socket operation of the well-behaved clients

DEFAULT_HEADS, DEFAULT_IDLE, DEFAULT_SUBSCRIBERS = 2000, 500, 200
TITLE_CHANGES = 300  # PATCHes by the writer; enough to fill every subscriber's buffers many times
SUBSCRIBER_RCVBUF = 4096  # bytes; the kernel doubles it

REQUEST_TIMEOUT = 10  # the server's: a request must be complete 10 s after its first byte
HEAD_CLOSE_WINDOW = (9.0, 20.0)  # seconds after sending a partial head
IDLE_CLOSE_LIMIT = 20.0  # seconds after connecting without sending anything
IDLE_WATCH = 75.0  # how long to keep watching silent connections to say when they did close
STALL_CLOSE = (25.0, 60.0)  # after the writer's first PATCH / after its last one
PROBE_INTERVAL = 0.1
PROBE_MAX_LATENCY = 1.0
SMALL_CONNECTION_COUNT = 5  # open connections we call "a handful" once every client is gone
PIPELINED = 50_000  # GET /healthz requests a greedy client sends at once: ~2 MiB
PIPELINE_SILENCE = 15.0  # seconds without an answer after which the pipeline is declared stuck
WRITE_TIMEOUT = 30  # the server's: output a client takes nothing of for 30 s ends the connection
STEADY_BOOKS = 500  # books in the page a slow but steady client reads: ~480 KB
STEADY_READ, STEADY_PAUSE = 2048, 0.2  # bytes it reads, then seconds it waits: ~10 KB/s, ~50 s
STEADY_LIMIT = 100.0  # seconds it may take at most


# --- the server under test ------------------------------------------------------------------


def rss_mib(server):
    try:
        with open(f"/proc/{server.pid}/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        return kib / 1024
    except (OSError, StopIteration):
        return float("nan")


# --- well-behaved HTTP over raw sockets -----------------------------------------------------


def encode_request(method, path, body=None, content_type="application/json"):
    payload = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\n"
    if body is not None:
        head += f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n"
    return head.encode() + b"\r\n" + payload


class Client:
    """One keep-alive HTTP/1.1 connection for well-formed requests with JSON bodies."""

    def __init__(self, port, timeout=IO_TIMEOUT):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buffer = b""

    def close(self):
        self.sock.close()

    def request(self, method, path, body=None, content_type="application/json"):
        """Returns (status, body bytes)."""
        self.sock.sendall(encode_request(method, path, body, content_type))
        return self.receive()

    def receive(self):
        """The next response: (status, body bytes)."""
        while b"\r\n\r\n" not in self.buffer:
            self._receive()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status = int(head.split(b" ", 2)[1])
        match = re.search(rb"\r\ncontent-length:\s*(\d+)", head, re.IGNORECASE)
        length = int(match.group(1)) if match else 0
        while len(self.buffer) < length:
            self._receive()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, body

    def _receive(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-response")
        self.buffer += chunk


def get_json(port, path):
    client = Client(port)
    try:
        status, body = client.request("GET", path)
        return status, json.loads(body) if body else None
    finally:
        client.close()


def scrape_metrics(port):
    """The samples of GET /metrics, by name (and labels, if any)."""
    client = Client(port)
    try:
        status, body = client.request("GET", "/metrics")
    finally:
        client.close()
    if status != 200:
        raise ConnectionError(f"GET /metrics answered {status}")
    return parse_metrics(body.decode())


# --- background workers ---------------------------------------------------------------------


class Worker(threading.Thread):
    """A daemon thread with a `stopping` event; `stop` sets it and joins."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stopping = threading.Event()

    def stop(self):
        self.stopping.set()
        self.join(10)


class LatencyProbe(Worker):
    """Every 100 ms: a fresh connection, GET /healthz and GET /books/{id} on it, each timed."""

    def __init__(self, port, book_id):
        super().__init__()
        self.port, self.book_id = port, book_id
        self.latencies = []
        self.failures = []

    def run(self):
        next_start = time.monotonic()
        while not self.stopping.is_set():
            self._probe()
            next_start += PROBE_INTERVAL
            self.stopping.wait(max(0.0, next_start - time.monotonic()))

    def _probe(self):
        started = time.monotonic()
        try:
            client = Client(self.port, timeout=IO_TIMEOUT)
            try:
                for path in ("/healthz", f"/books/{self.book_id}"):
                    status, _ = client.request("GET", path)
                    self.latencies.append(time.monotonic() - started)
                    if status != 200:
                        self.failures.append(f"GET {path}: {status}")
                    started = time.monotonic()
            finally:
                client.close()
        except OSError as error:
            self.failures.append(f"{error!r} after {time.monotonic() - started:.2f} s")


class MetricsSampler(Worker):
    """GET /metrics twice a second; keeps (time, samples)."""

    def __init__(self, port):
        super().__init__()
        self.port = port
        self.samples = []

    def run(self):
        while not self.stopping.is_set():
            try:
                self.samples.append((time.monotonic(), scrape_metrics(self.port)))
            except OSError:
                pass  # a missed sample; the probe reports unanswered requests
            self.stopping.wait(0.5)

    def latest(self, name):
        return self.samples[-1][1].get(name) if self.samples else None

    def first_time(self, condition, after=0.0):
        """When a sample taken after `after` first satisfied `condition`."""
        return next((when for when, values in self.samples if when >= after and condition(values)), None)


@dataclass
class Tracked:
    """A connection the server is expected to end by itself."""
    sock: socket.socket
    started: float  # when we connected (idle) or sent the partial head
    ended: Optional[float] = None
    how: str = ""  # "408 then close", "close", "reset", or what else came
    received: bytes = b""


class CloseWatcher(Worker):
    """epoll over connections we expect the server to end; records when and how each one ends."""

    def __init__(self):
        super().__init__()
        self.epoll = select.epoll()
        self.tracked = {}
        self.lock = threading.Lock()

    def add(self, sock, started):
        sock.setblocking(False)
        entry = Tracked(sock, started)
        with self.lock:
            self.tracked[sock.fileno()] = entry
        self.epoll.register(sock.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
        return entry

    def run(self):
        while not self.stopping.is_set():
            for fd, _ in self.epoll.poll(0.2):
                with self.lock:
                    entry = self.tracked.get(fd)
                if entry is not None:
                    self._read(fd, entry)

    def _read(self, fd, entry):
        try:
            data = entry.sock.recv(4096)
        except BlockingIOError:
            return
        except ConnectionResetError:
            self._ended(fd, entry, "reset")
            return
        if data:
            entry.received += data
            return
        if entry.received.startswith(b"HTTP/1.1 408 "):
            self._ended(fd, entry, "408 then close")
        elif entry.received:
            self._ended(fd, entry, f"close after {entry.received[:40]!r}")
        else:
            self._ended(fd, entry, "close")

    def _ended(self, fd, entry, how):
        entry.ended, entry.how = time.monotonic(), how
        self.epoll.unregister(fd)
        entry.sock.close()

    def stop(self):
        super().stop()
        for entry in self.tracked.values():
            if entry.ended is None:
                entry.sock.close()
        self.epoll.close()


# --- the greedy clients ---------------------------------------------------------------------


def open_subscribers(port, book_id, count):
    """SSE subscribers with a small receive buffer that never read."""
    request = (f"GET /books/{book_id}/events?fields=title HTTP/1.1\r\nHost: {HOST}\r\n"
               "Accept: text/event-stream\r\n\r\n").encode()
    return open_non_readers(port, request, count, SUBSCRIBER_RCVBUF, IO_TIMEOUT)


def open_silent(port, count, watcher):
    entries = []
    for _ in range(count):
        sock = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
        entries.append(watcher.add(sock, time.monotonic()))
    return entries


def open_half_heads(port, count, watcher):
    partial = f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: slow-clients\r\nX-Slow: ".encode()
    entries = []
    for _ in range(count):
        sock = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
        sock.sendall(partial)
        entries.append(watcher.add(sock, time.monotonic()))
    return entries


def change_titles(port, book_id, count):
    """PATCHes the title `count` times with ~400-character titles; returns the statuses."""
    client = Client(port)
    try:
        return [client.request("PATCH", f"/books/{book_id}", {"title": f"{n:05d} " + "t" * 394},
                               content_type="application/merge-patch+json")[0]
                for n in range(count)]
    finally:
        client.close()


def wait_until(condition, deadline, step=0.25):
    while not condition() and time.monotonic() < deadline:
        time.sleep(step)
    return condition()


def drain_to_eof(sockets, seconds):
    """Reads every socket until EOF (or `seconds`); returns bytes received per socket, None if open."""
    epoll = select.epoll()
    by_fd = {sock.fileno(): sock for sock in sockets}
    received = {fd: bytearray() for fd in by_fd}
    for fd, sock in by_fd.items():
        sock.setblocking(False)
        epoll.register(fd, select.EPOLLIN | select.EPOLLRDHUP)
    still_open = set(by_fd)
    deadline = time.monotonic() + seconds
    while still_open and time.monotonic() < deadline:
        for fd, _ in epoll.poll(0.2):
            try:
                data = by_fd[fd].recv(65536)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                data = b""
            if data:
                received[fd] += data
            else:
                still_open.discard(fd)
                epoll.unregister(fd)
    epoll.close()
    return [None if fd in still_open else bytes(received[fd]) for fd in by_fd]


# --- checks ---------------------------------------------------------------------------------


def spread(values):
    values = sorted(values)
    if not values:
        return "none"
    return f"min {values[0]:.1f} s, median {values[len(values) // 2]:.1f} s, max {values[-1]:.1f} s"


def tally(entries):
    counts = {}
    for entry in entries:
        counts[entry.how or "still open"] = counts.get(entry.how or "still open", 0) + 1
    return ", ".join(f"{count} {how}" for how, count in sorted(counts.items()))


def check_half_heads(report, heads):
    low, high = HEAD_CLOSE_WINDOW
    after = [entry.ended - entry.started for entry in heads if entry.ended is not None]
    in_window = [delay for delay in after if low <= delay <= high]
    good_how = all(entry.how in ("408 then close", "close") for entry in heads)
    report.check(len(in_window) == len(heads) and good_how,
                 f"{len(heads)} half-sent heads ended by the server {low:.0f}-{high:.0f} s after they were sent: "
                 f"{len(in_window)} did ({tally(heads)}; {spread(after)})")


def check_silent(report, silent):
    after = [entry.ended - entry.started for entry in silent if entry.ended is not None]
    in_time = [delay for delay in after if delay <= IDLE_CLOSE_LIMIT]
    ok = len(in_time) == len(silent) and all(entry.how == "close" or "408" in entry.how for entry in silent)
    message = (f"{len(silent)} silent connections ended by the server within {IDLE_CLOSE_LIMIT:.0f} s: "
               f"{len(in_time)} were ({tally(silent)}; {spread(after)})")
    if not ok:
        message += (f". A connection that never sends a byte is held for the idle keep-alive timeout"
                    f" (watched for {IDLE_WATCH:.0f} s), not the {REQUEST_TIMEOUT} s request timeout: sending"
                    f" nothing keeps a connection longer than the slowloris the request timeout stops")
    report.check(ok, message)


def check_stalled_subscribers(report, sampler, count, burst):
    """The gauge of subscribers falls to 0 ~30 s after their buffers filled up during the burst."""
    first_patch, last_patch = burst
    low, high = STALL_CLOSE
    began = sampler.first_time(lambda values: values.get("library_sse_subscribers", count) < count, first_patch)
    done = sampler.first_time(lambda values: values.get("library_sse_subscribers") == 0, first_patch)
    if done is None:
        left = sampler.latest("library_sse_subscribers")
        report.check(False, f"{count} never-reading subscribers dropped by the server: {left} still subscribed "
                            f"{time.monotonic() - last_patch:.0f} s after the last PATCH "
                            f"(library_http_open_connections {sampler.latest('library_http_open_connections')})")
        return
    ok = began is not None and began - first_patch >= low and done - last_patch <= high
    report.check(ok, f"{count} never-reading subscribers dropped by the server: the first {began - first_patch:.1f} s"
                     f" and the last {done - first_patch:.1f} s after the first PATCH ({done - last_patch:.1f} s"
                     f" after the last; expected >= {low:.0f} s after the first, <= {high:.0f} s after the last)")


def check_streams_end(report, subscribers):
    """Reading the stalled subscribers now: each stream starts with a 200 snapshot and ends in EOF."""
    streams = drain_to_eof(subscribers, seconds=15)
    ended = [data for data in streams if data is not None]
    well_formed = [data for data in ended
                   if data.startswith(b"HTTP/1.1 200 ") and b"text/event-stream" in data and b"event: snapshot" in data]
    sizes = sorted(len(data) for data in ended)
    detail = f"received {sizes[0]}-{sizes[-1]} bytes each" if sizes else "nothing ended"
    report.check(len(well_formed) == len(subscribers),
                 f"{len(subscribers)} stalled streams, read at last: {len(ended)} end in EOF, {len(well_formed)} "
                 f"with a 200 text/event-stream and a snapshot ({detail})")
    for sock in subscribers:
        sock.close()


def check_latency(report, probe):
    latencies = sorted(probe.latencies)
    if not latencies:
        report.check(False, "the latency probe got no answer at all")
        return

    def pick(fraction):
        return latencies[min(len(latencies) - 1, int(fraction * len(latencies)))] * 1000
    report.check(not probe.failures and latencies[-1] < PROBE_MAX_LATENCY,
                 f"{len(latencies)} probe requests during the load: p50 {pick(0.5):.1f} ms, p99 {pick(0.99):.1f} ms, "
                 f"max {latencies[-1] * 1000:.1f} ms (limit {PROBE_MAX_LATENCY * 1000:.0f} ms), "
                 f"{len(probe.failures)} failures{': ' + '; '.join(probe.failures[:3]) if probe.failures else ''}")


def check_gauges_settle(report, port):
    """Once every greedy client is gone: a handful of open connections, no subscriber."""
    values = {}

    def settled():
        values.update(scrape_metrics(port))
        return (values.get("library_http_open_connections", 1e9) <= SMALL_CONNECTION_COUNT
                and values.get("library_sse_subscribers") == 0)

    wait_until(settled, time.monotonic() + 10, step=0.5)
    report.check(values.get("library_http_open_connections", 1e9) <= SMALL_CONNECTION_COUNT,
                 f"library_http_open_connections back to {values.get('library_http_open_connections'):.0f} "
                 f"(<= {SMALL_CONNECTION_COUNT}, this scrape included)")
    report.check(values.get("library_sse_subscribers") == 0,
                 f"library_sse_subscribers back to {values.get('library_sse_subscribers'):.0f}")
    coalesced = values.get("library_sse_changes_coalesced_total", 0)
    report.check(coalesced > 0, f"changes coalesced for the slow subscribers: {coalesced:.0f} "
                                f"(events sent: {values.get('library_sse_events_sent_total', 0):.0f})")


def check_deep_pipeline(report, port):
    """A greedy client sends PIPELINED requests at once, about twice the input the server buffers, and
    reads the answers as they come: the server must hold it back (stop reading), then catch up."""
    client = Client(port, timeout=PIPELINE_SILENCE)
    payload = encode_request("GET", "/healthz") * PIPELINED

    def send():
        try:
            client.sock.sendall(payload)
        except OSError:
            pass  # the server stopped reading, or we gave up and closed; the answers tell which

    started = time.monotonic()
    threading.Thread(target=send, daemon=True).start()
    answered, ending = 0, ""
    try:
        while answered < PIPELINED:
            status, _ = client.receive()
            if status != 200:
                ending = f", then a {status}"
                break
            answered += 1
    except TimeoutError:
        ending = f", then nothing for {PIPELINE_SILENCE:.0f} s"
    except ConnectionError as error:
        ending = f", then {error}"
    finally:
        client.close()
    report.check(answered == PIPELINED,
                 f"{PIPELINED} pipelined GET /healthz sent at once ({len(payload) / 2**20:.1f} MiB): "
                 f"{answered} answered 200{ending}, after {time.monotonic() - started:.1f} s")


# --- the run --------------------------------------------------------------------------------


def check_steady_slow_reader(report, port):
    """A client that reads a large response (500 books, ~480 KB) slowly but steadily, 2 KB every
    200 ms, gets all of it although that takes ~50 s: the write timeout counts the time since the
    client last took bytes, not since the server's buffers first filled (issue 12, 8). A small
    MSS and receive buffer keep the kernel from taking the whole response off the server's hands."""
    client = Client(port)
    try:
        status, body = client.request("POST", "/libraries", {"name": "Steady Reader Library"})
        library_id = json.loads(body)["id"]
        statuses = [client.request("POST", "/books", {"libraryId": library_id, "title": f"{n:03d} " + "t" * 496,
                                                      "author": "a" * 300})[0]
                    for n in range(STEADY_BOOKS)]
    finally:
        client.close()
    if set(statuses) != {201}:
        report.check(False, f"creating {STEADY_BOOKS} books for the steady reader: {sorted(set(statuses))}")
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SUBSCRIBER_RCVBUF)
    sock.settimeout(IO_TIMEOUT)
    sock.connect((HOST, port))
    sock.sendall(f"GET /libraries/{library_id}/books?limit={STEADY_BOOKS} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    started, data, ended, expected = time.monotonic(), b"", None, None
    try:
        while time.monotonic() - started < STEADY_LIMIT:
            chunk = sock.recv(STEADY_READ)
            if not chunk:
                ended = time.monotonic() - started
                break
            data += chunk
            if expected is None and b"\r\n\r\n" in data:
                head = data.split(b"\r\n\r\n", 1)[0]
                expected = len(head) + 4 + int(re.search(rb"content-length:\s*(\d+)", head, re.IGNORECASE).group(1))
            if expected is not None and len(data) >= expected:
                break
            time.sleep(STEADY_PAUSE)
    except ConnectionResetError:
        ended = time.monotonic() - started
    finally:
        sock.close()
    seconds = time.monotonic() - started
    complete = expected is not None and len(data) >= expected
    shown = f"all {len(data)} bytes in {seconds:.0f} s" if complete else (
        f"cut off after {ended:.0f} s" if ended is not None else "not done in time") + f", {len(data)} bytes"
    report.check(complete, f"a client reading {STEADY_READ} B every {STEADY_PAUSE * 1000:.0f} ms of "
                           f"{STEADY_BOOKS} books: {shown} [the {WRITE_TIMEOUT} s write timeout counts inactivity]")


def raise_fd_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    Report.note(f"RLIMIT_NOFILE soft limit {soft} -> {hard} (about {needed} descriptors needed)")
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise RuntimeError(f"the hard RLIMIT_NOFILE {hard} is below the {needed} descriptors needed; "
                           "use a smaller --scale")


def create_book(port):
    client = Client(port)
    try:
        status, body = client.request("POST", "/libraries", {"name": "Slow Clients Library"})
        if status != 201:
            raise RuntimeError(f"POST /libraries answered {status}")
        library_id = json.loads(body)["id"]
        status, body = client.request("POST", "/books", {"libraryId": library_id, "title": "Initial title"})
        if status != 201:
            raise RuntimeError(f"POST /books answered {status}")
        return json.loads(body)["id"]
    finally:
        client.close()


def run(report, server, heads_count, silent_count, subscriber_count):
    port = server.port
    book_id = create_book(port)
    sampler, probe, watcher = MetricsSampler(port), LatencyProbe(port, book_id), CloseWatcher()
    for worker in (sampler, probe, watcher):
        worker.start()
    try:
        subscribers = open_subscribers(port, book_id, subscriber_count)
        subscribed = wait_until(lambda: sampler.latest("library_sse_subscribers") == subscriber_count,
                                time.monotonic() + 15)
        report.check(subscribed, f"{subscriber_count} SSE subscribers on /books/{{id}}/events?fields=title "
                                 f"(library_sse_subscribers {sampler.latest('library_sse_subscribers')})")
        silent = open_silent(port, silent_count, watcher)
        heads = open_half_heads(port, heads_count, watcher)
        Report.note(f"opened {subscriber_count} subscribers, {silent_count} silent connections and "
                    f"{heads_count} half-sent heads; open connections "
                    f"{scrape_metrics(port)['library_http_open_connections']:.0f}, server RSS {rss_mib(server):.0f} MiB")

        first_patch = time.monotonic()
        statuses = change_titles(port, book_id, TITLE_CHANGES)
        last_patch = time.monotonic()
        report.check(statuses == [200] * TITLE_CHANGES,
                     f"{TITLE_CHANGES} title PATCHes (~400 characters) while the clients hang on: "
                     f"{statuses.count(200)} answered 200 in {last_patch - first_patch:.1f} s; "
                     f"server RSS {rss_mib(server):.0f} MiB")

        last_activity = max([entry.started for entry in heads + silent] + [last_patch])
        wait_until(lambda: all(entry.ended for entry in heads), heads[-1].started + HEAD_CLOSE_WINDOW[1] + 2)
        wait_until(lambda: sampler.latest("library_sse_subscribers") == 0, last_patch + STALL_CLOSE[1] + 2)
        wait_until(lambda: all(entry.ended for entry in silent), silent[0].started + IDLE_WATCH)
        Report.note(f"waited {time.monotonic() - last_activity:.0f} s after the last client and PATCH; "
                    f"server RSS {rss_mib(server):.0f} MiB")
    finally:
        probe.stop()
        watcher.stop()
        sampler.stop()

    check_latency(report, probe)
    check_half_heads(report, heads)
    check_silent(report, silent)
    check_stalled_subscribers(report, sampler, subscriber_count, (first_patch, last_patch))
    check_gauges_settle(report, port)
    check_streams_end(report, subscribers)
    check_deep_pipeline(report, port)
    check_steady_slow_reader(report, port)
    status, body = get_json(port, "/healthz")
    report.check(status == 200 and server.alive(), f"the server still answers GET /healthz: {status} {body}")


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("server", help="path to the library-server binary")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scale", type=float, default=1.0,
                       help=f"multiplies {DEFAULT_HEADS} half-sent heads, {DEFAULT_IDLE} silent connections "
                            f"and {DEFAULT_SUBSCRIBERS} subscribers (default 1)")
    group.add_argument("--quick", action="store_const", const=0.25, dest="scale", help="--scale 0.25, for CI")
    return parser.parse_args()


def main():
    arguments = parse_arguments()
    counts = [max(1, round(default * arguments.scale))
              for default in (DEFAULT_HEADS, DEFAULT_IDLE, DEFAULT_SUBSCRIBERS)]
    report = Report(NAME)
    holder = []
    start_watchdog(report, holder, TIME_LIMIT)
    started = time.monotonic()
    try:
        raise_fd_limit(sum(counts) + 200)
    except (ValueError, RuntimeError) as error:
        report.check(False, str(error))
        return report.summary()
    if run_server(report, arguments.server, lambda server: run(report, server, *counts), holder,
                  stderr_most=20, stderr_show=lambda line: line[:200]):
        Report.note(f"{time.monotonic() - started:.1f} s")
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())
