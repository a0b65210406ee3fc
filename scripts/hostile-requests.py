#!/usr/bin/env python3
"""Live hostile-request suite for library-server.

Starts its own server (``--port 0``, a temporary database, ``--log-level warning``), writes one
library and one book with valid requests and remembers their JSON, then sends malformed, ambiguous
or abusive requests as raw bytes, each on a fresh connection to 127.0.0.1:

  * request smuggling shapes: Content-Length with Transfer-Encoding (both orders), duplicate or
    non-decimal Content-Length, unsupported or repeated transfer codings, whitespace before a colon;
  * header syntax: obs-fold, bare CR, bare LF line endings, NUL and control bytes;
  * size limits: request line over 32 KiB (414; 9,000 bytes are served), head over 40 KiB (431),
    header count (431), body (413);
  * broken chunked framing, truncated bodies, bodies shorter than Content-Length: with the client
    waiting they must end in a 408 (10 s request timeout); with the client's end-of-stream sent
    along with the bytes they must end at once (within EOF_REACTION), not at a timeout;
  * hostile JSON: invalid UTF-8, 100,000 levels of nesting, huge numbers, duplicate keys,
    non-object documents;
  * hostile URLs: bad percent-encoding in path and query, absurd ``limit`` and ``cursor`` values;
  * protocol confusion: HTTP/2 preface, HTTP/3.0, HTTP/0.9-style lines, no Host, absolute-form
    targets naming other hosts, a 10 KiB method, a lowercase method; an absolute-form target's
    authority replaces Host (RFC 9112 3.2.2, issue 25): `GET http://evil.example/libraries` with
    `Host: 127.0.0.1` is a 421, `GET http://127.0.0.1:PORT/libraries` a 200;
  * API abuse (issue 12): If-Match tags that are equal as numbers but not as text ("+1", "01"),
    a 1 MiB body of 60,000 unknown members (the 422 must stay small), a write without
    Content-Type (a browser's no-cors request), a Host naming another site (DNS rebinding: 421).
  * `Expect: 100-continue` with the body held back: a head refused for its route, method, media
    type or length gets its final status at once, never a 100 first; HTTP/1.0 never gets a 100.

Then: 150 requests with invented 3,000-byte methods must not grow /metrics by more than a few
lines (labels come from a closed set), and a flood of concurrent health checks is answered.

Each case must be answered with a 4xx (or 501/505), or the connection closed without a response:
never a 2xx, never a 5xx, never a hang. Hostile bodies carry otherwise valid writes (and smuggling
cases a complete second request), so a server that misread the framing would write something.
Two shapes RFC 9112 lets a server accept are recorded rather than required to fail: bare-LF line
endings (section 2.2, "MAY recognize a single LF") and absolute-form targets (section 3.2.2, "MUST
accept the absolute-form"); for them the normal answer is also allowed, and printed.

Alongside the cases, a client that sends only CRLF every 2 s must be closed by the 10 s request
timeout (blank lines are not activity). Afterwards: a complete request sent together with
end-of-stream is answered and the connection closed; two pipelined requests followed by our FIN
(in the same segment, or just after) are both answered, 40 times in a row; GET /healthz answers 200 promptly; GET /libraries and GET /books hold exactly the library
and book written at the start, with the same JSON as before (no hostile request wrote
anything); the process is still alive, it stops with exit 0 on SIGTERM, and its stderr has no
`error` or `critical` line (bad input is the client's mistake, not a server error).

Then a second server runs under RLIMIT_NOFILE 128 with `--max-connections 1000`: it must log
that it lowered the cap, answer each of 200 simultaneous clients (200, or 503 past the cap)
instead of hanging on EMFILE, stay idle while they hold on, and serve again once they are gone.

A third server runs with `--api-token` and `--read-token` (issue 25): two `Authorization` fields on
one request are a 400, on a write, a read and a stream, even when both carry a valid token (a
proxy and the server could each pick another one); one is served; nothing was written.

A fourth server, with 101 books and one by author a759800, takes the live-query cases (issue 25):
  * `/events?watch=/books/ID?fields=title&lastEventId=abc` with `Last-Event-ID: 5` is a 200
    stream (the header wins and the parameter is not read); without the header, a 400;
  * `/events?watch=/books/UUID` for a book never created, with `Last-Event-ID: 1`, is a stream whose
    first frame is that watch's `delete` (`/books/UUID/events` with the same id is a 404
    problem+json);
  * 100 watches written as a browser's URLSearchParams does (`watch=%2Fbooks%2FID%3Ffields%3D
    title%2Cavailable` x100) get a snapshot each; reopened with `lastEventId=` the id of that first
    frame (about 10 KB of request line) they are a 200, not a 414, and the resume takes (a PATCH of
    one book is then the only entry); 101 such watches are a 400;
  * tag collision: `/books?author=a41602&fields=title` and `/books?author=a759800&fields=title`
    have the same 32-bit FNV-1a hash; resuming both with the frame id of a stream that had only the
    first must send the second its snapshot, holding the a759800 book.

Usage: scripts/hostile-requests.py SERVER_BINARY
Prints one `ok - ...` or `FAIL - ...` line per check, then `hostile-requests: N passed, M failed`;
exits 1 when anything failed. Takes about 40 s and never more than TIME_LIMIT seconds.
"""

import collections
import concurrent.futures
import json
import os
import re
import resource
import select
import socket
import sys
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Callable, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import HOST, Report, dechunk, next_event, parse_headers, run_server, shorten, start_watchdog  # noqa: E402

NAME = "hostile-requests"
TIME_LIMIT = 150  # seconds for the whole run; a watchdog stops everything past it
CASE_TIMEOUT = 5.0  # seconds a case may take to be answered (or closed)
SLOW_CASE_TIMEOUT = 15.0  # for cases that must run into the server's 10 s request timeout
EOF_REACTION = 2.0  # seconds within which a client's end-of-stream must end a pending request
PIPELINE_ROUNDS = 40  # rounds of two pipelined requests and a half-close; one in three failed before
BLANK_LINE_WATCH = 25.0  # seconds a CRLF-only client is watched for the server's close
LOW_FD_LIMIT, LOW_FD_CLIENTS = 128, 200  # RLIMIT_NOFILE of the second server, clients sent to it
CRLF = b"\r\n"


# --- talking HTTP over raw sockets ----------------------------------------------------------


@dataclass
class Outcome:
    """What the server did with one request."""
    status: Optional[int] = None  # the final status code; None when no response came
    reason: str = ""
    detail: str = ""  # the problem+json `detail`, when there is one
    body: bytes = b""
    after: str = ""  # what the connection did after the response (or instead of one)
    garbage: bytes = b""  # bytes that were not a well-formed response
    hung: bool = False  # neither a response nor a close before our deadline
    informational: bool = False  # a 1xx (100 Continue) came before the final response
    seconds: float = 0.0

    @property
    def closed_silently(self):
        return self.status is None and not self.hung and not self.garbage

    def describe(self):
        if self.garbage:
            return f"MALFORMED RESPONSE {self.garbage[:80]!r}"
        if self.hung:
            return f"NO RESPONSE, connection still open after {self.seconds:.1f} s"
        if self.status is None:
            return f"no response, connection {self.after} after {self.seconds:.1f} s"
        text = f"{self.status} {self.reason}"
        if self.detail:
            text += f" ({shorten(self.detail, 90)})"
        return f"{text}, connection {self.after}, {self.seconds:.1f} s"


def connect(port, timeout=CASE_TIMEOUT):
    return socket.create_connection((HOST, port), timeout=timeout)


def recv_some(sock, deadline):
    """One recv bounded by `deadline`; raises TimeoutError past it."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    sock.settimeout(remaining)
    return sock.recv(65536)


def read_response(sock, deadline, outcome):
    """Reads one final response (skipping 1xx) into `outcome`; notes a close, reset or hang."""
    buffer = b""
    while True:
        end = buffer.find(CRLF + CRLF)
        if end >= 0:
            head, buffer = buffer[:end], buffer[end + 4:]
            match = re.match(rb"HTTP/1\.[01] (\d{3}) ?([^\r\n]*)", head)
            if not match:
                outcome.garbage = head
                return
            status = int(match.group(1))
            if 100 <= status < 200:
                outcome.informational = True
                continue
            headers = parse_headers(head)
            length = int(headers.get("content-length", "0"))
            try:
                while len(buffer) < length:
                    chunk = recv_some(sock, deadline)
                    if not chunk:
                        break
                    buffer += chunk
            except (TimeoutError, ConnectionResetError):
                pass
            outcome.status, outcome.reason = status, match.group(2).decode("latin-1")
            outcome.body = buffer[:length]
            outcome.detail = problem_detail(outcome.body)
            return
        try:
            chunk = recv_some(sock, deadline)
        except TimeoutError:
            outcome.hung = not buffer
            outcome.garbage = buffer
            return
        except ConnectionResetError:
            outcome.after = "reset"
            outcome.garbage = buffer
            return
        if not chunk:
            outcome.after = "closed"
            outcome.garbage = buffer
            return
        buffer += chunk


def problem_detail(body):
    try:
        return str(json.loads(body).get("detail", ""))
    except (ValueError, AttributeError):
        return ""


def watch_after_response(sock, outcome, seconds=EOF_REACTION):
    """After a response: does the server close, keep the connection, or (wrongly) send more?"""
    deadline = time.monotonic() + seconds
    try:
        extra = recv_some(sock, deadline)
    except TimeoutError:
        outcome.after = "kept open"
        return
    except ConnectionResetError:
        outcome.after = "reset"
        return
    if extra:
        outcome.garbage = b"unexpected bytes after the response: " + extra
    else:
        outcome.after = "closed"


def exchange(port, payload, then=None, timeout=CASE_TIMEOUT):
    """Sends raw bytes on a fresh connection, optionally half-closes, and reads what comes back.

    With then="half-close" the bytes are corked so that our FIN travels in the same TCP segment as
    the last of them: the server sees data and end-of-stream at once, every time (without the cork
    it depends on scheduling whether it wakes up between the two).
    """
    started = time.monotonic()
    deadline = started + timeout
    outcome = Outcome()
    with connect(port, timeout) as sock:
        try:
            sock.settimeout(timeout)
            if then == "half-close":
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            sock.sendall(payload)
            if then == "half-close":
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered (or gave up) before taking everything; read what it said
        read_response(sock, deadline, outcome)
        if outcome.status is not None and not outcome.garbage:
            watch_after_response(sock, outcome)
    outcome.seconds = time.monotonic() - started
    return outcome


def http(port, method, path, body=None, timeout=CASE_TIMEOUT):
    """A well-formed request; returns (status, parsed JSON body or None)."""
    payload = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}", "Connection: close"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    outcome = Outcome()
    with connect(port, timeout) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        read_response(sock, time.monotonic() + timeout, outcome)
    try:
        return outcome.status, json.loads(outcome.body) if outcome.body else None
    except ValueError:
        return outcome.status, None


# --- building hostile requests --------------------------------------------------------------


def request(line, *headers, body=b""):
    """Raw request bytes: `line`, the header lines as given (str or bytes), CRLFs, then `body`."""
    parts = [part if isinstance(part, bytes) else part.encode() for part in (line, *headers)]
    return CRLF.join(parts) + CRLF + CRLF + body


def host():
    return f"Host: {HOST}"


def post(path, body, *headers, content_type="application/json", method="POST"):
    """A request with a body, a correct Content-Length and any extra (hostile) header lines."""
    return request(f"{method} {path} HTTP/1.1", host(), f"Content-Type: {content_type}",
                   f"Content-Length: {len(body)}", *headers, body=body)


def patch(path, body):
    return post(path, body, method="PATCH")


def chunked(*chunks):
    """A well-formed chunked body."""
    return b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"


# A complete request a framing confusion would run as a second request: it writes a library.
SMUGGLED = post("/libraries", b'{"name":"smuggled"}')
LIBRARY = b'{"name":"hostile"}'


# --- what each case accepts -----------------------------------------------------------------


def rejected(outcome):
    """A 4xx, 501 or 505, or a close without any response."""
    return outcome.closed_silently or (
        outcome.status is not None and (400 <= outcome.status < 500 or outcome.status in (501, 505)))


def status_is(*codes):
    return lambda outcome: outcome.status in codes


def timed_out(outcome):
    """A 408 (or a silent close) within the slow-case bound: the 10 s request timeout works."""
    return (outcome.status == 408 or outcome.closed_silently) and outcome.seconds <= SLOW_CASE_TIMEOUT


def ended_on_eof(outcome):
    """After our half-close the request can never complete: rejected, and at once, not at a timeout."""
    return rejected(outcome) and outcome.seconds < EOF_REACTION


def rejected_or(normal_status):
    """For shapes RFC 9112 lets a server accept: rejected, or the normal answer."""
    return lambda outcome: rejected(outcome) or outcome.status == normal_status


@dataclass
class Case:
    name: str
    payload: bytes
    accept: Callable[[Outcome], bool] = rejected
    then: Optional[str] = None  # "half-close": shut our sending side after the payload
    timeout: float = CASE_TIMEOUT
    note: str = ""


def half_closed(name, payload):
    """A case that sends an incomplete request and its end-of-stream together."""
    return Case(name, payload, accept=ended_on_eof, then="half-close", timeout=SLOW_CASE_TIMEOUT,
                note=f"our FIN came with the bytes; expected a close or 4xx within {EOF_REACTION:.0f} s")


def smuggling_cases():
    te_body = chunked(LIBRARY) + SMUGGLED
    cl_te = ["Content-Type: application/json", f"Content-Length: {len(te_body)}"]
    return [
        Case("Content-Length then Transfer-Encoding", request("POST /libraries HTTP/1.1", host(), *cl_te,
                                   "Transfer-Encoding: chunked", body=te_body)),
        Case("Transfer-Encoding then Content-Length", request("POST /libraries HTTP/1.1", host(), "Transfer-Encoding: chunked",
                                   *cl_te, body=te_body)),
        Case("two Content-Length, different values",
             post("/libraries", LIBRARY, f"Content-Length: {len(LIBRARY) + len(SMUGGLED)}") + SMUGGLED),
        Case("Content-Length list '18, 18'",
             request("POST /libraries HTTP/1.1", host(), "Content-Type: application/json",
                     f"Content-Length: {len(LIBRARY)}, {len(LIBRARY)}", body=LIBRARY)),
        Case("Content-Length +18", request("POST /libraries HTTP/1.1", host(), "Content-Type: application/json",
                                           f"Content-Length: +{len(LIBRARY)}", body=LIBRARY)),
        Case("Content-Length -1", request("POST /libraries HTTP/1.1", host(), "Content-Type: application/json",
                                          "Content-Length: -1", body=LIBRARY)),
        Case("Content-Length 0x12 (hex)", request("POST /libraries HTTP/1.1", host(),
                                                  "Content-Type: application/json",
                                                  f"Content-Length: {len(LIBRARY):#x}", body=LIBRARY)),
        Case("Content-Length 2,000,000 (over 1 MiB)", request("POST /libraries HTTP/1.1", host(),
                                                              "Content-Length: 2000000"),
             accept=status_is(413)),
        *[Case(f"Transfer-Encoding: {coding}",
               request("POST /libraries HTTP/1.1", host(), "Content-Type: application/json",
                       f"Transfer-Encoding: {coding}", body=chunked(LIBRARY)))
          for coding in ("xchunked", "chunked, chunked", "gzip, chunked", "identity", "chunked;q=1")],
        Case("Transfer-Encoding: chunked on two lines",
             request("POST /libraries HTTP/1.1", host(), "Transfer-Encoding: chunked",
                     "Transfer-Encoding: chunked", body=chunked(LIBRARY))),
        Case("Transfer-Encoding in HTTP/1.0",
             request("POST /libraries HTTP/1.0", host(), "Content-Type: application/json",
                     "Transfer-Encoding: chunked", body=chunked(LIBRARY))),
        Case("whitespace before colon 'Content-Length : 18'",
             request("POST /libraries HTTP/1.1", host(), "Content-Type: application/json",
                     f"Content-Length : {len(LIBRARY)}", body=LIBRARY)),
        Case("whitespace before colon 'Transfer-Encoding\\t:'",
             request("POST /libraries HTTP/1.1", host(), f"Content-Length: {len(te_body)}",
                     "Transfer-Encoding\t: chunked", body=te_body)),
    ]


def header_syntax_cases():
    get = "GET /healthz HTTP/1.1"
    return [
        Case("obs-fold (space)", request(get, host(), "X-Folded: a", " b")),
        Case("obs-fold (tab)", request(get, host(), "X-Folded: a", "\tb")),
        Case("obs-fold first line after request line", request(get, " X-Folded: a", host())),
        Case("bare CR inside a header line", request(get, host(), b"X-A: b\rX-B: c")),
        Case("bare CR as a line ending", request(get, host() + "\rX-A: b")),
        Case("bare LF line endings throughout", f"{get}\n{host()}\n\n".encode(),
             accept=rejected_or(200), note="RFC 9112 2.2: a recipient MAY accept bare LF"),
        Case("one bare LF line ending", f"{get}\r\n{host()}\nX-A: b\r\n\r\n".encode(),
             accept=rejected_or(200), note="RFC 9112 2.2: a recipient MAY accept bare LF"),
        Case("NUL in request target", request(b"GET /healthz\x00 HTTP/1.1", host())),
        Case("NUL in method", request(b"GE\x00T /healthz HTTP/1.1", host())),
        Case("NUL after version", request(b"GET /healthz HTTP/1.1\x00", host())),
        Case("vertical tab as separator in request line", request(b"GET\x0b/healthz HTTP/1.1", host())),
        Case("DEL in request target", request(b"GET /health\x7fz HTTP/1.1", host())),
        Case("raw non-ASCII byte in request target", request(b"GET /healthz\xc3\xa9 HTTP/1.1", host())),
        Case("NUL in header name", request(get, host(), b"X-A\x00B: c")),
        Case("DEL in header name", request(get, host(), b"X-A\x7f: c")),
        Case("NUL in header value", request(get, host(), b"X-A: b\x00c")),
        Case("ESC in header value", request(get, host(), b"X-A: \x1b[31mred")),
        Case("DEL in header value", request(get, host(), b"X-A: \x7f")),
        Case("NUL in Host value", request(get, b"Host: 127.0.0.1\x00evil")),
        Case("header line without colon", request(get, host(), "X-No-Colon")),
        Case("empty header name", request(get, host(), ": value")),
        Case("two Host headers", request(get, host(), "Host: other.example")),
    ]


def size_limit_cases():
    return [
        Case("request line of 33,000 bytes (over 32 KiB)",
             request("GET /healthz?pad=" + "a" * 33000 + " HTTP/1.1", host()), accept=status_is(414)),
        Case("request line of 33,000 bytes, no line end yet", b"GET /healthz?pad=" + b"a" * 33000,
             accept=status_is(414)),
        Case("request line of 9,000 bytes (under 32 KiB)", request("GET /healthz?pad=" + "a" * 9000 + " HTTP/1.1",
                                                                   host()), accept=status_is(200)),
        Case("head of ~45 KiB in 80 fields (over 40 KiB)",
             request("GET /healthz HTTP/1.1", host(), *[f"X-Pad-{i}: " + "a" * 560 for i in range(80)]),
             accept=status_is(431)),
        Case("head over 40 KiB with no end yet", b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"a" * 42000,
             accept=status_is(431)),
        Case("150 header fields", request("GET /healthz HTTP/1.1", host(),
                                          *[f"X-H-{i}: 1" for i in range(150)]),
             accept=status_is(431)),
        Case("method of 10 KiB", request("A" * 10240 + " /healthz HTTP/1.1", host())),
    ]


def chunked_framing_cases():
    def with_chunks(raw_body):
        return request("POST /libraries HTTP/1.1", host(), "Content-Type: application/json",
                       "Transfer-Encoding: chunked", body=raw_body)

    shapes = [
        ("chunk size 'zz'", b"zz\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("chunk size '-12'", b"-12\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("chunk size '0x12'", b"0x12\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("chunk size '+12'", b"+12\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("empty chunk size line", b"\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("chunk size with junk after it", b"12 junk\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("chunk size of 17 hex digits (overflow)", b"10000000000000012\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("chunk size 'fffffff' (256 MiB)", b"fffffff\r\n" + LIBRARY),
        ("chunk size line with bare LF", b"12\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("chunk data not followed by CRLF", b"12\r\n" + LIBRARY + b"XX0\r\n\r\n"),
        ("chunk size smaller than its data", b"5\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("NUL in a chunk extension", b"12;a=\x00\r\n" + LIBRARY + b"\r\n0\r\n\r\n"),
        ("bad trailer field", b"12\r\n" + LIBRARY + b"\r\n0\r\nX Bad: trailer\r\n\r\n"),
    ]
    return [Case(f"chunked: {name}", with_chunks(body)) for name, body in shapes] + [
        half_closed("chunked: truncated in chunk data, then half-close", with_chunks(b"12\r\n" + LIBRARY[:8])),
        half_closed("chunked: no last chunk, then half-close", with_chunks(b"12\r\n" + LIBRARY + b"\r\n")),
        Case("chunked: no last chunk, then wait", with_chunks(b"12\r\n" + LIBRARY + b"\r\n"),
             accept=timed_out, timeout=SLOW_CASE_TIMEOUT),
    ]


def short_body_cases():
    short = request("POST /libraries HTTP/1.1", host(), "Content-Type: application/json",
                    "Content-Length: 100", body=LIBRARY)
    return [
        half_closed("body shorter than Content-Length, then half-close", short),
        half_closed("head never finished, then half-close", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
        Case("body shorter than Content-Length, then wait", short, accept=timed_out,
             timeout=SLOW_CASE_TIMEOUT),
        Case("head never finished, then wait", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n",
             accept=timed_out, timeout=SLOW_CASE_TIMEOUT),
    ]


def json_cases(library_id, book_id):
    def book(extra):
        return ('{"libraryId":"%s","title":"Hostile book",%s}' % (library_id, extra)).encode()

    digits = "9" * 400
    return [
        Case("JSON with invalid UTF-8", post("/libraries", b'{"name":"bad \xff\xfe utf8"}')),
        Case("JSON with overlong UTF-8", post("/libraries", b'{"name":"over\xc0\xaflong"}')),
        Case("JSON with a lone surrogate escape", post("/libraries", b'{"name":"lone \\ud800"}')),
        Case("JSON with a NUL byte", post("/libraries", b'{"name":"nul\x00"}')),
        Case("JSON nested 100,000 levels ([ only)", post("/libraries", b"[" * 100_000)),
        Case("JSON nested 100,000 levels in a field",
             post("/libraries", b'{"name":"deep","address":' + b"[" * 100_000 + b"]" * 100_000 + b"}")),
        Case("JSON nested 100,000 levels of objects",
             post("/libraries", b'{"a":' * 100_000 + b"1" + b"}" * 100_000)),
        Case("publishedYear 1e999999", post("/books", book('"publishedYear":1e999999'))),
        Case("publishedYear with 400 digits", post("/books", book(f'"publishedYear":{digits}'))),
        Case("publishedYear with -400 digits", post("/books", book(f'"publishedYear":-{digits}'))),
        Case("publishedYear 1999.5 (a fraction)", post("/books", book('"publishedYear":1999.5'))),
        Case("PATCH publishedYear 1e999999", patch(f"/books/{book_id}", b'{"publishedYear":1e999999}')),
        Case("PATCH publishedYear with 400 digits",
             patch(f"/books/{book_id}", f'{{"publishedYear":{digits}}}'.encode())),
        Case("duplicate JSON keys in POST", post("/libraries", b'{"name":"first","name":"second"}')),
        Case("duplicate JSON keys in PATCH", patch(f"/books/{book_id}", b'{"title":"a","title":"b"}')),
        *[Case(f"POST /libraries with JSON {name}", post("/libraries", body))
          for name, body in (("array", b'[{"name":"in an array"}]'), ("string", b'"a library"'),
                             ("number", b"42"), ("null", b"null"), ("true", b"true"), ("empty body", b""))],
        Case("JSON followed by a second document", post("/libraries", LIBRARY + b'{"name":"x"}')),
        Case("JSON with a trailing comma", post("/libraries", b'{"name":"comma",}')),
        Case("JSON in a text/plain body", post("/libraries", LIBRARY, content_type="text/plain")),
    ]


def url_cases():
    def get(target):
        return request(f"GET {target} HTTP/1.1", host())

    targets = [
        "/books/%zz", "/books/%", "/books/%00", "/books/%2", "/libraries/%ff%fe",
        "/books?limit=%", "/books?fields=%ff", "/books?fields=%zz", "/books?libraryId=%00",
        *[f"/books?limit={value}" for value in ("0", "-1", "501", "99999999999999999999", "1e3", "abc",
                                                 "", "50.0", "%2050", "50&limit=50")],
        "/books?cursor=c" + "a" * 5000, "/books?cursor=%00", "/books?cursor=%C3%A9", "/books?cursor=c%00",
        "/books?cursor=cZZZ", "/books?cursor=c-1", "/books?cursor=czzzzzzzzzzzzz",
        "/books?fields=title,nosuchfield", "/books?available=yes",
        # Live queries: each of these is refused before any stream starts (a 200 would be a stream).
        "/books/events?libraryId=x", "/books/events?available=1", "/books/events?fields=books.title",
        "/libraries/events?fields=books", "/libraries/events?lastEventId=1.", "/events", "/events?watch=",
        "/events?watch=%00", "/events?watch=/events", "/events?watch=/metrics", "/events?watch=/books/%zz",
        "/events?watch=/books%3Fwatch%3D/libraries", "/events?watch=%2Fbooks%3Favailable%3D2",
        "/events?watch=/libraries&watch=/libraries", "/events?watch=/libraries&lastEventId=1.zz",
        "/events?watch=/libraries&lastEventId=99999999999999999999", "/events?watch=/libraries&lastEventId=1.abc",
        "/events?watch=/books?fields=" + "a" * 6000,
        "/events?" + "&".join("watch=/books?author=%d" % n for n in range(101)),
    ]
    cases = [Case(f"GET {shorten(target, 60)}", get(target)) for target in targets]
    cases.append(Case("GET /books?cursor= raw UTF-8", request(b"GET /books?cursor=\xc3\xa9 HTTP/1.1", host())))
    return cases


def protocol_cases():
    return [
        Case("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        Case("GET /healthz HTTP/1.1 without Host", request("GET /healthz HTTP/1.1")),
        Case("GET / HTTP/1.1 without Host", request("GET / HTTP/1.1")),
        Case("HTTP/3.0", request("GET /healthz HTTP/3.0", host())),
        Case("HTTP/1.2", request("GET /healthz HTTP/1.2", host())),
        Case("HTTP/1.10", request("GET /healthz HTTP/1.10", host())),
        Case("lowercase version http/1.1", request("GET /healthz http/1.1", host())),
        Case("HTTP/0.9-style line, blank line after", b"GET /healthz\r\n\r\n"),
        Case("HTTP/0.9-style line, then wait", b"GET /healthz\r\n", accept=timed_out,
             timeout=SLOW_CASE_TIMEOUT),
        Case("two spaces in request line", request("GET  /healthz HTTP/1.1", host())),
        Case("absolute-form to another host", request("GET http://other.example/healthz HTTP/1.1",
                                                      "Host: other.example"),
             accept=rejected_or(200),
             note="RFC 9112 3.2.2: a server MUST accept absolute-form; the server has no name to check"),
        Case("absolute-form to another host, Host mismatch",
             request("GET https://other.example/healthz HTTP/1.1", host()),
             accept=rejected_or(200),
             note="RFC 9112 3.2.2: a server MUST accept absolute-form; the server has no name to check"),
        Case("absolute-form ftp:// target", request("GET ftp://other.example/healthz HTTP/1.1", host())),
        Case("authority-form CONNECT", request("CONNECT other.example:443 HTTP/1.1", "Host: other.example:443")),
        Case("asterisk-form for GET", request("GET * HTTP/1.1", host())),
        Case("lowercase method get", request("get /healthz HTTP/1.1", host())),
        Case("unknown method BREW", request("BREW /healthz HTTP/1.1", host())),
        Case("Expect: 200-ok", request("GET /healthz HTTP/1.1", host(), "Expect: 200-ok")),
    ]


def authority_cases(port):
    """An absolute-form target's authority replaces Host (RFC 9112 3.2.2), so it is checked against
    the allowed hosts as Host is: a page that gets a browser or proxy to send `GET http://evil.example/`
    with a Host we allow must not be answered (issue 25)."""
    return [
        Case("absolute-form naming a foreign host, Host 127.0.0.1",
             request("GET http://evil.example/libraries HTTP/1.1", host()), accept=status_is(421)),
        Case("absolute-form naming a foreign host with a port, Host 127.0.0.1",
             request(f"GET http://evil.example:{port}/libraries HTTP/1.1", host()), accept=status_is(421)),
        Case("absolute-form naming this server, Host 127.0.0.1",
             request(f"GET http://{HOST}:{port}/libraries HTTP/1.1", host()), accept=status_is(200)),
    ]


def api_abuse_cases(library_id, book_id):
    def if_match(tag):
        return post(f"/books/{book_id}", b'{"title":"If-Match was read as a number"}', f"If-Match: {tag}",
                     method="PATCH")

    members = b",".join(b'"m%d":0' % index for index in range(60_000))
    many = b'{"name":"many",' + members + b"}"
    return [
        Case('If-Match "+1" on version 1 (strong comparison is exact text)', if_match('"+1"'),
             accept=status_is(412)),
        Case('If-Match "01" on version 1', if_match('"01"'), accept=status_is(412)),
        Case(f"422 for 60,000 unknown members ({len(many):,} bytes) stays under 8 KiB",
             post("/libraries", many), accept=lambda outcome: outcome.status == 422 and len(outcome.body) < 8192),
        Case("POST without Content-Type (a no-cors browser request)",
             request("POST /libraries HTTP/1.1", host(), f"Content-Length: {len(LIBRARY)}", body=LIBRARY),
             accept=status_is(415)),
        Case("PATCH without Content-Type", request(f"PATCH /books/{book_id} HTTP/1.1", host(), "Content-Length: 2",
                                                   body=b"{}"), accept=status_is(415)),
        Case("Host naming another site (DNS rebinding)", request("GET /books HTTP/1.1", "Host: rebind.example"),
             accept=status_is(421)),
        Case("write with a Host naming another site", post("/libraries", LIBRARY).replace(
            host().encode(), b"Host: rebind.example:80"), accept=status_is(421)),
    ]


def expect_cases():
    """`Expect: 100-continue` with the body held back: a head the server refuses is answered at once
    with its final status, never after a 100 (the client would upload its body for nothing);
    an HTTP/1.0 request never gets a 100 (RFC 9110 10.1.1), so held back it times out."""
    def waiting(method, path, *headers, version="HTTP/1.1", length=len(LIBRARY)):
        hosts = (host(),) if version == "HTTP/1.1" else ()
        return request(f"{method} {path} {version}", *hosts, "Expect: 100-continue",
                       f"Content-Length: {length}", *headers)

    def final(code):
        return lambda outcome: not outcome.informational and outcome.status == code

    json_type = "Content-Type: application/json"
    return [
        Case("Expect: 100-continue to an unknown route", waiting("POST", "/nowhere", json_type), accept=final(404)),
        Case("Expect: 100-continue with a method the route lacks", waiting("PATCH", "/libraries", json_type),
             accept=final(405)),
        Case("Expect: 100-continue with a body that is not JSON",
             waiting("POST", "/libraries", "Content-Type: text/plain"), accept=final(415)),
        Case("Expect: 100-continue with Content-Length over 1 MiB",
             waiting("POST", "/libraries", json_type, length=2 << 20), accept=final(413)),
        Case("Expect: 100-continue on HTTP/1.0, body held back",
             waiting("POST", "/libraries", json_type, version="HTTP/1.0"),
             accept=lambda outcome: not outcome.informational and timed_out(outcome), timeout=SLOW_CASE_TIMEOUT,
             note="RFC 9110 10.1.1: never a 100 to HTTP/1.0; expected a 408 at the request timeout"),
    ]


def all_cases(port, library_id, book_id):
    return (smuggling_cases() + header_syntax_cases() + size_limit_cases() + chunked_framing_cases()
            + short_body_cases() + json_cases(library_id, book_id) + url_cases() + protocol_cases()
            + authority_cases(port) + api_abuse_cases(library_id, book_id) + expect_cases())


# --- the run --------------------------------------------------------------------------------


def create_fixtures(port):
    """One library and one book; returns their JSON as GET returns it."""
    status, library = http(port, "POST", "/libraries", {"name": "Hostile Test Library", "address": "1 Test St"})
    if status != 201:
        raise RuntimeError(f"POST /libraries answered {status}")
    status, book = http(port, "POST", "/books", {"libraryId": library["id"], "title": "Original Title",
                                                 "author": "A. Author", "publishedYear": 1999})
    if status != 201:
        raise RuntimeError(f"POST /books answered {status}")
    _, library = http(port, "GET", f"/libraries/{library['id']}")
    _, book = http(port, "GET", f"/books/{book['id']}")
    return library, book


def run_cases(report, port, cases):
    """Runs every case concurrently (slow ones wait out the server's timeouts), reports in order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        futures = [pool.submit(exchange, port, case.payload, case.then, case.timeout) for case in cases]
        for case, future in zip(cases, futures):
            try:
                outcome = future.result()
            except OSError as error:
                report.check(False, f"{case.name}: could not talk to the server: {error!r}")
                continue
            ok = case.accept(outcome) and not outcome.garbage
            note = f" [{case.note}]" if case.note else ""
            report.check(ok, f"{case.name}: {outcome.describe()}{note}")


def check_state(report, server, library, book):
    started = time.monotonic()
    status, body = http(server.port, "GET", "/healthz", timeout=2)
    elapsed = time.monotonic() - started
    report.check(status == 200 and elapsed < 1, f"GET /healthz afterwards: {status} {body} in {elapsed:.3f} s")
    for path, expected in (("/libraries?limit=500", library), ("/books?limit=500", book)):
        status, body = http(server.port, "GET", path)
        items = body.get("items") if isinstance(body, dict) else None
        same = status == 200 and items == [expected] and body.get("nextCursor") is None
        shown = "exactly the item written before the cases, unchanged" if same else f"{status} {body}"
        report.check(same, f"GET {path} afterwards: {shown}")
    report.check(server.alive(), "the server process is still alive after all cases")


def check_eof_after_request(report, port):
    """A complete keep-alive request sent together with our FIN: answered, then closed at once."""
    outcome = exchange(port, request("GET /healthz HTTP/1.1", host()), then="half-close")
    report.check(outcome.status == 200 and outcome.after == "closed",
                 f"GET /healthz then half-close (FIN in the same segment): {outcome.describe()}"
                 f" [expected 200, then a close within {EOF_REACTION:.0f} s]")


def metrics_text(port):
    with connect(port) as sock:
        sock.sendall(request("GET /metrics HTTP/1.1", host(), "Connection: close"))
        outcome = Outcome()
        read_response(sock, time.monotonic() + CASE_TIMEOUT, outcome)
    return outcome.body.decode("utf-8", "replace")


def check_metrics_labels(report, port):
    """Invented methods must not add label values (and lines) to /metrics: issue 12, defect 2."""
    before = metrics_text(port)
    payloads = [request(f"X{index:03d}" + "M" * 3000 + " /books HTTP/1.1", host()) for index in range(150)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda payload: exchange(port, payload), payloads))
    after = metrics_text(port)
    grown = len(after) - len(before)
    report.check("X000" not in after and grown < 2000,
                 f"/metrics after 150 requests with invented 3,000-byte methods: grew {grown} bytes"
                 " [labels come from a closed set]")


def check_health_flood(report, port):
    """200 concurrent health checks share one probe of the write lock and are all answered."""
    def health(_):
        return exchange(port, request("GET /healthz HTTP/1.1", host(), "Connection: close"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        outcomes = list(pool.map(health, range(200)))
    answered = sum(outcome.status == 200 for outcome in outcomes)
    report.check(answered == 200, f"200 concurrent GET /healthz: {answered} answered 200")


def read_to_eof(sock, deadline):
    """Everything the server sends until it closes; (bytes, closed) where closed is False when
    the deadline came first."""
    data = b""
    try:
        while chunk := recv_some(sock, deadline):
            data += chunk
        return data, True
    except TimeoutError:
        return data, False
    except ConnectionResetError:
        return data, True


def check_pipelined_then_eof(report, port, rounds=PIPELINE_ROUNDS):
    """Two pipelined GET /healthz, then our FIN: both are answered, then the connection closes.
    Half the rounds send the FIN in the same segment (corked), half just after, where it used to
    arrive while the first answer was pending and close the connection after it (issue 12, 1)."""
    two = request("GET /healthz HTTP/1.1", host()) * 2
    answered = []
    for index in range(rounds):
        with connect(port) as sock:
            corked = index % 2 == 0
            if corked:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            sock.sendall(two)
            sock.shutdown(socket.SHUT_WR)
            data, closed = read_to_eof(sock, time.monotonic() + CASE_TIMEOUT)
            answered.append((data.count(b"HTTP/1.1 200 "), closed))
    complete = sum(1 for count, closed in answered if count == 2 and closed)
    report.check(complete == rounds,
                 f"two pipelined GET /healthz then half-close, {rounds} rounds: {complete} answered both and "
                 f"closed (answers per round: {sorted(set(count for count, _ in answered))})")


def check_blank_lines(report, port):
    """A client that sends only CRLF every 2 s is closed by the first-request timeout (10 s): blank
    lines before a request are not activity (issue 12, 10). Runs ~10 s, alongside the cases."""
    started = time.monotonic()
    closed_after = None
    with connect(port) as sock:
        while closed_after is None and time.monotonic() - started < BLANK_LINE_WATCH:
            try:
                sock.sendall(CRLF)
                readable, _, _ = select.select([sock], [], [], 2.0)
                if readable and not sock.recv(65536):
                    closed_after = time.monotonic() - started
            except (BrokenPipeError, ConnectionResetError):
                closed_after = time.monotonic() - started
    shown = f"closed after {closed_after:.1f} s" if closed_after else f"still open after {BLANK_LINE_WATCH:.0f} s"
    report.check(closed_after is not None and closed_after <= SLOW_CASE_TIMEOUT,
                 f"CRLF every 2 s and never a request: {shown} [expected a close by the 10 s request timeout]")


def run(report, server):
    library, book = create_fixtures(server.port)
    print(f"# server on port {server.port}; library {library['id']}, book {book['id']}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as side:
        blank_lines = side.submit(check_blank_lines, report, server.port)
        run_cases(report, server.port, all_cases(server.port, library["id"], book["id"]))
        blank_lines.result()
    check_metrics_labels(report, server.port)
    check_health_flood(report, server.port)
    check_eof_after_request(report, server.port)
    check_pipelined_then_eof(report, server.port)
    check_state(report, server, library, book)


# --- issue 25's smaller items: credentials, resume parameters, many watches, tags ------------

API_TOKEN, READ_TOKEN = "hostile-write-token", "hostile-read-token"
WATCH_LIMIT = 100  # watches one /events stream may carry
BROWSER_WATCH = "/books/{}?fields=title,available"  # as the README's browser example writes them
COLLIDING_WATCHES = ("/books?author=a41602&fields=title", "/books?author=a759800&fields=title")  # same FNV-1a
FRAME_ID = re.compile(rb"(?m)^id: ?(\d+)\.([A-Za-z0-9_-]*)$")


def run_tokens(report, server):
    """Under --api-token and --read-token: two Authorization fields are a 400, on a write and on a
    read, even when both carry a valid token (the field is a singleton: a proxy and the server could
    each pick another one); one valid field is served; nothing was written."""
    write, read = f"Authorization: Bearer {API_TOKEN}", f"Authorization: Bearer {READ_TOKEN}"
    run_cases(report, server.port, [
        Case("two Authorization fields on a write, both the write token", post("/libraries", LIBRARY, write, write),
             accept=status_is(400)),
        Case("two Authorization fields on a write, a wrong token then the write token",
             post("/libraries", LIBRARY, "Authorization: Bearer wrong", write), accept=status_is(400)),
        Case("two Authorization fields on a read, the read token then the write token",
             request("GET /libraries HTTP/1.1", host(), read, write), accept=status_is(400)),
        Case("two Authorization fields on a stream, both the read token",
             request("GET /libraries/events HTTP/1.1", host(), read, read), accept=status_is(400)),
        Case("one Authorization field on a read, the read token", request("GET /libraries HTTP/1.1", host(), read),
             accept=status_is(200)),
    ])
    outcome = exchange(server.port, request("GET /libraries HTTP/1.1", host(), read, "Connection: close"))
    try:
        items = json.loads(outcome.body).get("items")
    except (ValueError, AttributeError):
        items = None
    report.check(outcome.status == 200 and items == [],
                 f"GET /libraries afterwards: {outcome.status}, {shorten(items, 120)} [expected no library]")


class EventStream:
    """One event stream on a raw socket, read with harness.dechunk and harness.next_event. next_event
    reads ids as integers, so the `<seq>.<tag>` id of a multiplexed frame is cut to `<seq>` for it
    and kept whole in `frame_ids`."""

    def __init__(self, port, target, *headers):
        self.sock = connect(port)
        self.sock.sendall(request(f"GET {target} HTTP/1.1", host(), *headers))
        self.raw, self.text, self.ended, self.frame_ids = b"", b"", False, collections.deque()
        deadline = time.monotonic() + CASE_TIMEOUT
        while CRLF + CRLF not in self.raw:
            self._receive(deadline)
        head, self.raw = self.raw.split(CRLF + CRLF, 1)
        self.status = int(head.split(b" ", 2)[1])
        self.headers = parse_headers(head)
        self.body = b""
        if self.status != 200:
            length = int(self.headers.get("content-length", "0"))
            while len(self.raw) < length:
                self._receive(deadline)
            self.body = self.raw[:length]

    def _receive(self, deadline):
        chunk = recv_some(self.sock, deadline)
        if not chunk:
            raise ConnectionError("the server closed the stream")
        self.raw += chunk

    def close(self):
        self.sock.close()

    def frame(self, timeout=CASE_TIMEOUT):
        """The next event with data as (kind, id, data), or None after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            dechunk(self)
            end = self.text.rfind(b"\n\n")
            if end >= 0:
                def cut(match):
                    self.frame_ids.append(match.group(0).split(b":", 1)[1].strip().decode())
                    return b"id: " + match.group(1)
                self.text = FRAME_ID.sub(cut, self.text[:end]) + self.text[end:]
                event = next_event(self)
                if event is not None:
                    return (event[0], self.frame_ids.popleft(), event[2]) if self.frame_ids else event
            if self.ended:
                raise ConnectionError("the stream ended")
            try:
                self._receive(deadline)
            except TimeoutError:
                return None

    def describe(self):
        if self.status == 200:
            return f"200 {self.headers.get('content-type', '')}"
        return f"{self.status} {self.headers.get('content-type', '')} ({shorten(problem_detail(self.body), 90)})"


def watches_target(watches, last_event_id=None):
    """/events with each watch URL-encoded the way URLSearchParams does (`/` as %2F, `?` as %3F, ...)."""
    parameters = [("watch", watch) for watch in watches]
    if last_event_id is not None:
        parameters.append(("lastEventId", last_event_id))
    return "/events?" + urllib.parse.urlencode(parameters)


def is_stream(stream):
    return stream.status == 200 and stream.headers.get("content-type", "").startswith("text/event-stream")


def is_problem(stream, status):
    return stream.status == status and stream.headers.get("content-type", "").startswith("application/problem+json")


def check_stream(report, port, name, target, headers, accept, expected):
    """Opens a stream, checks its answer with accept(stream), closes it."""
    try:
        stream = EventStream(port, target, *headers)
    except (OSError, ValueError) as error:
        report.check(False, f"{name}: {error!r} [{expected}]")
        return
    try:
        report.check(accept(stream), f"{name}: {stream.describe()} [{expected}]")
    finally:
        stream.close()


def create_books(port, count, author=""):
    status, library = http(port, "POST", "/libraries", {"name": "Hostile live"})
    if status != 201:
        raise RuntimeError(f"POST /libraries answered {status}")
    books = []
    for index in range(count):
        status, book = http(port, "POST", "/books", {"libraryId": library["id"], "title": f"Live {index}",
                                                     "author": author})
        if status != 201:
            raise RuntimeError(f"POST /books answered {status}")
        books.append(book["id"])
    return library["id"], books


def check_resume_parameters(report, port, book):
    """`Last-Event-ID` wins over `?lastEventId=`, which is then not read (EventSource sends the
    header on reconnect while the page's URL still carries an old parameter); a watch of a book that
    never existed gets a `delete` entry on `/events` and a 404 on `/books/{id}/events`."""
    watch = f"/books/{book}?fields=title"
    check_stream(report, port, "/events?watch=/books/ID?fields=title&lastEventId=abc, Last-Event-ID: 5",
                 f"/events?watch={watch}&lastEventId=abc", ["Last-Event-ID: 5"], is_stream,
                 "expected a 200 stream: the header wins, the parameter is not read")
    check_stream(report, port, "/events?watch=/books/ID?fields=title&lastEventId=abc without the header",
                 f"/events?watch={watch}&lastEventId=abc", [], lambda stream: is_problem(stream, 400),
                 "expected 400 problem+json: a malformed id")
    never = uuid.uuid4()
    check_stream(report, port, "/books/<a uuid never created>/events, Last-Event-ID: 1", f"/books/{never}/events",
                 ["Last-Event-ID: 1"], lambda stream: is_problem(stream, 404), "expected 404 problem+json")

    def deleted_watch(stream):
        # One gone watch does not end a multiplexed stream with a 404 (a browser's EventSource
        # would stop for good): it gets a `delete` entry, never silence.
        frame = stream.frame() if is_stream(stream) else None
        entries = frame[2] if frame else []
        return [(entry.get("watch"), entry.get("event")) for entry in entries] == [(f"/books/{never}", "delete")]
    check_stream(report, port, "/events?watch=/books/<a uuid never created>, Last-Event-ID: 1",
                 f"/events?watch=/books/{never}", ["Last-Event-ID: 1"], deleted_watch,
                 "expected a 200 stream whose first frame is that watch's delete")


def check_browser_watches(report, port, books):
    """100 watches as a browser's URLSearchParams writes them (each `/`, `?`, `=` and `,` escaped),
    plus a `lastEventId` naming all 100 (16 characters a watch): within the request-line limit, and
    the resume takes (a change to one book is the only entry, no snapshot); 101 watches are a 400."""
    watches = [BROWSER_WATCH.format(book) for book in books[:WATCH_LIMIT]]
    first = EventStream(port, watches_target(watches))
    try:
        frame = first.frame() if first.status == 200 else None
    finally:
        first.close()
    kinds = collections.Counter(entry.get("event") for entry in frame[2]) if frame else {}
    report.check(frame is not None and kinds == {"snapshot": WATCH_LIMIT},
                 f"{WATCH_LIMIT} browser-encoded watches: {first.describe()}, first frame "
                 f"{dict(kinds) if frame else 'none'} [expected a snapshot for each]")
    if frame is None:
        return
    target = watches_target(watches, frame[1])
    resumed = EventStream(port, target)
    try:
        ok = is_stream(resumed)
        if ok:
            http(port, "PATCH", f"/books/{books[0]}", {"title": "Browser resume"})
            change = resumed.frame()
            ok = change is not None and [(entry["watch"], entry["event"]) for entry in change[2]] == [
                (watches[0], "change")]
            entries = [(shorten(entry["watch"], 30), entry["event"]) for entry in change[2]] if change else "no frame"
            shown = f"then {entries}"
        else:
            shown = ""
        report.check(ok, f"{WATCH_LIMIT} browser-encoded watches + lastEventId of {len(frame[1])} characters "
                         f"(request line {len(target) + 15:,} bytes): {resumed.describe()} {shown} "
                         "[expected a 200 stream, not 414; then one change entry for the patched book]")
    finally:
        resumed.close()
    extra = watches + [BROWSER_WATCH.format(books[WATCH_LIMIT])]
    check_stream(report, port, f"{WATCH_LIMIT + 1} browser-encoded watches", watches_target(extra), [],
                 lambda stream: is_problem(stream, 400), "expected 400 problem+json: over the limit")


def check_tag_collision(report, port, book):
    """Two watches whose 32-bit FNV-1a hashes are equal: resuming with the id of a stream that had
    only the first must still send the second its snapshot (it must not pass for resumed)."""
    old, new = COLLIDING_WATCHES
    first = EventStream(port, watches_target([old]))
    try:
        frame = first.frame() if first.status == 200 else None
    finally:
        first.close()
    if frame is None:
        report.check(False, f"watch {old}: {first.describe()}, no first frame")
        return
    second = EventStream(port, watches_target([old, new], frame[1]))
    try:
        reply = second.frame() if second.status == 200 else None
    finally:
        second.close()
    entries = reply[2] if reply else []
    snapshot = next((entry for entry in entries if entry.get("watch") == new and entry.get("event") == "snapshot"),
                    None)
    items = [item.get("id") for item in snapshot["data"].get("items", [])] if snapshot else []
    report.check(items == [book],
                 f"watches {old} and {new} (same FNV-1a hash) resumed with the id {frame[1]} of a stream with the "
                 f"first only: {second.describe()}, "
                 f"{[(entry.get('watch'), entry.get('event')) for entry in entries] if reply else 'no frame'} "
                 "[expected the second watch's snapshot, holding the one a759800 book]")


def run_live(report, server):
    """The live-query cases, on a server of their own: 101 books, one by author a759800."""
    _, books = create_books(server.port, WATCH_LIMIT + 1)
    _, (colliding,) = create_books(server.port, 1, author="a759800")
    for check, argument in ((check_resume_parameters, books[0]), (check_browser_watches, books),
                            (check_tag_collision, colliding)):
        try:
            check(report, server.port, argument)
        except (OSError, ValueError, LookupError, TypeError, AttributeError) as error:  # a close, an odd answer
            report.check(False, f"{check.__name__}: stopped early: {error!r}")


def run_out_of_descriptors(report, server):
    """Under `ulimit -n 128` the server lowered --max-connections (and logged it). 200 clients at
    once each get an answer (200, or a 503 past the cap) instead of hanging while accept fails
    with EMFILE, the server does not spin while they hold on, and once they are gone a new client
    is served (issue 12, 9)."""
    lowered = [line for line in server.stderr_lines() if "max-connections lowered" in line]
    report.check(bool(lowered), f"under ulimit -n {LOW_FD_LIMIT}: {shorten(lowered[0], 160) if lowered else 'no line'}"
                                " [expected one line saying max-connections was lowered]")
    clients, statuses = [], []
    for _ in range(LOW_FD_CLIENTS):
        sock = connect(server.port)
        sock.sendall(request("GET /healthz HTTP/1.1", host()))
        clients.append(sock)
    for sock in clients:
        outcome = Outcome()
        read_response(sock, time.monotonic() + CASE_TIMEOUT, outcome)
        statuses.append(outcome.status)
    counts = {status: statuses.count(status) for status in set(statuses)}
    report.check(set(statuses) <= {200, 503} and 503 in statuses,
                 f"{LOW_FD_CLIENTS} clients at once under ulimit -n {LOW_FD_LIMIT}: {counts} "
                 "[expected 200 or 503 each, None is no answer]")
    before = cpu_seconds(server.pid)
    time.sleep(2)
    spent = cpu_seconds(server.pid) - before
    report.check(spent < 0.5, f"CPU while {LOW_FD_CLIENTS} clients hold on: {spent:.2f} s in 2 s [expected idle]")
    for sock in clients:
        sock.close()
    time.sleep(0.5)
    status, body = http(server.port, "GET", "/healthz")
    report.check(status == 200, f"GET /healthz once they are gone: {status} {body}")


def cpu_seconds(pid):
    """User plus system CPU time of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def low_fd_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOW_FD_LIMIT, LOW_FD_LIMIT))


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} SERVER_BINARY")
    report = Report(NAME)
    holder = []
    start_watchdog(report, holder, TIME_LIMIT)
    started = time.monotonic()
    if run_server(report, sys.argv[1], lambda server: run(report, server), holder, stop_timeout=15):
        print(f"# {time.monotonic() - started:.1f} s")
    run_server(report, sys.argv[1], lambda server: run_out_of_descriptors(report, server), holder, stop_timeout=15,
               arguments=["--max-connections", "1000"], preexec_fn=low_fd_limit)
    run_server(report, sys.argv[1], lambda server: run_tokens(report, server), holder, stop_timeout=15,
               arguments=["--api-token", API_TOKEN, "--read-token", READ_TOKEN])
    run_server(report, sys.argv[1], lambda server: run_live(report, server), holder, stop_timeout=15)
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())
