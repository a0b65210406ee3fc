#!/usr/bin/env python3
"""The browser console (GET /, Sources/LibraryAPI/Console) in a real headless Chromium, driven
over the DevTools protocol (scripts/lib/cdp.py), against a real server started with an API token
and a read token, one tab through the whole run (about 10 s; a watchdog stops it at 180 s):

  - the console's files: Content-Security-Policy, nosniff, ETag and a 304 for If-None-Match,
    relative references only, nothing inline;
  - tokens: without one the page's 401 opens the token form; typed in (Enter submits), kept in
    sessionStorage, never in the page's markup or console; a write with only the read token asks
    for the API token;
  - live per field: a library renamed and a book retitled over plain HTTP show within 1 s by
    repainting that one row (every other row is still the same DOM node);
  - keyboard: Tab goes through the page in order, each stop with a visible focus outline; Enter
    opens a library;
  - a filtered list (by author; the filter kept in the address, so a reload reopens it) gains and
    loses books another client patches, in list order;
  - watch.js spells the watches of the grammar's shared table (Tests/WatchGrammar/cases.json) as
    the server's printer does;
  - a title-only view (columns unticked) gets a snapshot and changes carrying only id and title,
    as the event inspector shows them;
  - editing: an untouched field follows the server; a 412 lists what changed on the server and
    "Reapply my edit" saves onto the new version; a 422 puts each message next to its field;
    Escape closes the editor; a delete takes two presses (and over a change, a 412 and "Delete
    anyway"); a book deleted by another client is shown deleted; a library is created, edited and
    deleted from the page;
  - the stream resumes by itself after the server restarts (SIGTERM, same port and database): a
    change made after the restart shows, with no snapshot sent again and no stream reopened;
  - 1,000 books render in under a second (measured in the page); "Load more books" pages on with
    the cursor; the inspector keeps the last 200 records; every input has a label;
  - behind nginx under the prefix /library/ (proxy_buffering off) the console loads, goes live and
    writes;
  - a signed token (the server runs with --jwt-keys) typed into the sign-in field shows who it is
    and what it may do, the page shows only the library it reads, and the stream goes live; when
    the token expires the stream ends with `expired` and the page asks to sign in again.
  - no uncaught exception, no console error (bar the network errors of provoked 4xx answers), no
    request leaving the server's origin;
  - screenshots (1280 px, 375 px, 375 px with a conflict, 1280 px dark with the editor) into
    --screenshots DIR (default .build/console-screenshots).

Usage: scripts/console-check.py [SERVER_BINARY] [--screenshots DIR] [--console-directory DIR]
  SERVER_BINARY defaults to $SERVER or .build/debug/library-server; --console-directory makes the
  server read the console from a working copy instead of the one built in (to work on it without
  a rebuild); CONSOLE_CHECK_CPU_SLOWDOWN=4 runs the page at a quarter of the CPU speed, to see how
  it and the waits fare on a slow machine.
Installs Debian's chromium and nginx with apt-get when they are missing (needs root). Only talks
to 127.0.0.1. Prints "console-check: N passed, M failed"; exits non-zero on any failure.
"""

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import HOST, Report, Server, check_stderr, shorten  # noqa: E402
from cdp import CDP, CDPError  # noqa: E402

NAME = "console-check"
TIME_LIMIT = int(os.environ.get("CONSOLE_CHECK_TIME_LIMIT", "180"))  # after the installs
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
API_TOKEN = "console-api-" + os.urandom(6).hex()
READ_TOKEN = "console-read-" + os.urandom(6).hex()
JWT_SECRET = os.urandom(32)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint(sub, rights, lifetime):
    """An HS256 token for `sub` with the rights claim `rights`, expiring in `lifetime` seconds."""
    import hashlib
    import hmac
    head = b64url(json.dumps({"alg": "HS256", "kid": "console", "typ": "JWT"}).encode())
    body = b64url(json.dumps({"sub": sub, "exp": int(time.time()) + lifetime, "libraries": rights}).encode())
    signature = hmac.new(JWT_SECRET, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(signature)}"
EXPECTED_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

report = Report(NAME)
processes = []  # everything started, for the cleanup and the watchdog: Popen or Server
workdirs = []  # the temporary directory (database, browser profile, nginx), removed by the cleanup


# --- tools ------------------------------------------------------------------------------------

def ensure_tools():
    missing = [package for package, tool in (("chromium", "chromium"), ("nginx", "nginx"))
               if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}")]
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit(f"{NAME}: missing {' '.join(missing)}, and only root can install them")
    print(f"{NAME}: installing {' '.join(missing)}", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True, timeout=300)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], check=True,
                   timeout=900, stdout=subprocess.DEVNULL,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def nginx_binary():
    return shutil.which("nginx") or "/usr/sbin/nginx"


# --- the API over plain HTTP, as another client -------------------------------------------------

class Api:
    def __init__(self, port):
        self.port = port

    def call(self, method, path, body=None, token=API_TOKEN, headers=None):
        """(status, headers as {lowercase: value}, parsed JSON or raw bytes)."""
        connection = http.client.HTTPConnection(HOST, self.port, timeout=15)
        try:
            sent = dict(headers or {})
            if token:
                sent["Authorization"] = f"Bearer {token}"
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                sent["Content-Type"] = "application/json"
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            raw = response.read()
            got = {name.lower(): value for name, value in response.getheaders()}
            if "json" in got.get("content-type", "") and raw:
                return response.status, got, json.loads(raw)
            return response.status, got, raw
        finally:
            connection.close()

    def ok(self, method, path, body=None, **options):
        status, _, data = self.call(method, path, body, **options)
        if status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {shorten(data, 200)}")
        return data

    def create_books(self, library, count, prefix):
        """`count` books over one kept-alive connection (1,000 separate connections cost seconds)."""
        connection = http.client.HTTPConnection(HOST, self.port, timeout=15)
        try:
            for index in range(count):
                body = json.dumps({"title": f"{prefix} {index:04d}", "author": f"Author {index % 37}",
                                   "publishedYear": 1900 + index % 120}).encode()
                connection.request("POST", f"/libraries/{library}/books", body=body, headers={
                    "Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                if response.status != 201:
                    raise RuntimeError(f"POST book {index}: {response.status}")
        finally:
            connection.close()


# --- Chromium ------------------------------------------------------------------------------------

class Chromium:
    def __init__(self, workdir):
        self.stderr_path = os.path.join(workdir, "chromium.stderr")
        profile = os.path.join(workdir, "profile")
        os.makedirs(profile)
        self.stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
             "--disable-component-update", "--disable-extensions", "--disable-sync",
             "--disable-features=Translate,OptimizationHints,MediaRouter",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self.stderr, stdin=subprocess.DEVNULL, start_new_session=True)
        processes.append(self.process)
        deadline = time.monotonic() + 30
        url = None
        while url is None:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"chromium gave no DevTools address: {self.stderr_tail()}")
            with open(self.stderr_path, "rb") as stderr:
                match = re.search(rb"DevTools listening on (ws://127\.0\.0\.1:\d+/\S+)", stderr.read())
            if match:
                url = match.group(1).decode()
            else:
                time.sleep(0.05)
        self.cdp = CDP(url)
        self.version = self.cdp.call("Browser.getVersion").get("product", "?")

    def stderr_tail(self):
        with open(self.stderr_path, "rb") as stderr:
            return " | ".join(stderr.read().decode("utf-8", "replace").splitlines()[-3:])

    def stop(self):
        try:
            self.cdp.call("Browser.close", timeout=5)
        except (CDPError, OSError):
            pass
        self.cdp.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        self.stderr.close()


class Page:
    """One tab: every console message, exception and request it makes is recorded."""

    def __init__(self, browser):
        self.cdp = browser.cdp
        target = self.cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.problems = []  # (kind, text)
        self.requests = []  # URLs
        self.console_text = []  # every console message, to check no token is ever logged
        self.cdp.on_event.append(self._event)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        slowdown = float(os.environ.get("CONSOLE_CHECK_CPU_SLOWDOWN", "1"))
        if slowdown > 1:  # to see how the page and the waits fare on a slow machine
            self.call("Emulation.setCPUThrottlingRate", {"rate": slowdown})

    def call(self, method, params=None, timeout=15):
        return self.cdp.call(method, params, session=self.session, timeout=timeout)

    def _event(self, event):
        if event.get("sessionId") != self.session:
            return
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.problems.append(("exception", text))
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", []))
            self.console_text.append(text)
            if params.get("type") == "error":
                self.problems.append(("console.error", text))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.console_text.append(entry.get("text", ""))
            if entry.get("level") == "error":
                self.problems.append((f"log/{entry.get('source')}", f"{entry.get('text')} {entry.get('url', '')}"))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])

    def navigate(self, url=None, timeout=20):
        """Loads `url`, or reloads the page when there is none; waits for the load event."""
        start = len(self.cdp.events)
        if url is None:
            self.call("Page.reload", {"ignoreCache": False})
        else:
            self.call("Page.navigate", {"url": url})
        event = self.cdp.wait_event(lambda e: e.get("sessionId") == self.session
                                    and e["method"] == "Page.loadEventFired", timeout, start)
        if event is None:
            raise RuntimeError(f"{url or 'the reload'} did not load within {timeout} s")

    def eval(self, expression, timeout=15):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise RuntimeError(f"evaluating {shorten(expression, 80)}: "
                               f"{details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def wait(self, expression, timeout=5, interval=0.02):
        """Polls `expression` until it is truthy; (value, seconds) or (None, seconds)."""
        started = time.monotonic()
        while True:
            value = self.eval(expression)
            if value:
                return value, time.monotonic() - started
            if time.monotonic() - started > timeout:
                return None, time.monotonic() - started
            time.sleep(interval)

    def click(self, selector):
        self.eval(f"document.querySelector({json.dumps(selector)}).click()")

    def fill(self, selector, text):
        """Sets a field's value and fires `input`, as typing would."""
        self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus();
            e.value = {json.dumps(text)}; e.dispatchEvent(new Event('input', {{bubbles: true}})); }})()""")

    def type_into(self, selector, text):
        """Real keystrokes into a focused field."""
        self.eval(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", {"text": text})

    def key(self, key, code, key_code, text=None):
        for kind in ("keyDown", "keyUp"):
            params = {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": key_code}
            if text and kind == "keyDown":
                params["text"] = text
            self.call("Input.dispatchKeyEvent", params)

    def enter(self):
        self.key("Enter", "Enter", 13, "\r")

    def escape(self):
        self.key("Escape", "Escape", 27)

    def screenshot(self, width, height, path):
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": width < 600})
        self.wait("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")
        data = self.call("Page.captureScreenshot", {"format": "png"}, timeout=30)["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))
        self.call("Emulation.clearDeviceMetricsOverride")
        return os.path.getsize(path)


# --- nginx ---------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def start_nginx(workdir, upstream_port):
    directory = os.path.join(workdir, "nginx")
    os.makedirs(directory)
    port = free_port()
    temp = {name: os.path.join(directory, name) for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    config = os.path.join(directory, "nginx.conf")
    with open(config, "w") as file:
        file.write(f"""
daemon off;
master_process off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {temp['body']};
    proxy_temp_path {temp['proxy']};
    fastcgi_temp_path {temp['fastcgi']};
    uwsgi_temp_path {temp['uwsgi']};
    scgi_temp_path {temp['scgi']};
    server {{
        listen {HOST}:{port};
        location /library/ {{
            proxy_pass http://{HOST}:{upstream_port}/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
    }}
}}
""")
    with open(os.path.join(directory, "stderr"), "wb") as stderr:
        process = subprocess.Popen([nginx_binary(), "-p", directory, "-c", config, "-e", f"{directory}/error.log"],
                                   stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    processes.append(process)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(os.path.join(directory, "stderr"), "rb") as stderr:
                raise RuntimeError(f"nginx exited: {stderr.read()[-300:]!r}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not listen within 10 s")


def stop_process(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


# --- the checks ----------------------------------------------------------------------------------

def check_headers(api):
    status, headers, body = api.call("GET", "/", token=None)
    report.check(status == 200 and headers.get("content-type") == "text/html; charset=utf-8",
                 f"GET / is the console's HTML ({status}, {headers.get('content-type')})")
    report.check(headers.get("content-security-policy") == EXPECTED_CSP,
                 f"GET / has the Content-Security-Policy ({shorten(headers.get('content-security-policy'), 60)})")
    report.check(headers.get("x-content-type-options") == "nosniff", "GET / has X-Content-Type-Options: nosniff")
    etag = headers.get("etag", "")
    status_304, _, _ = api.call("GET", "/", token=None, headers={"If-None-Match": etag})
    report.check(bool(etag) and status_304 == 304, f"GET / with If-None-Match {etag} is a 304 ({status_304})")
    html = body.decode("utf-8", "replace") if isinstance(body, bytes) else ""
    assets = list(dict.fromkeys(re.findall(r'(?:src|href)="([^"#][^"]*)"', html)))
    bad = [asset for asset in assets if asset.startswith("/") or "//" in asset]
    report.check(assets and not bad, f"index.html refers to its files relatively ({', '.join(assets)})")
    types = {"js": "text/javascript", "css": "text/css", "svg": "image/svg+xml"}
    wrong = []
    for asset in assets:
        status, headers, _ = api.call("GET", "/" + asset, token=None)
        expected = types.get(asset.rsplit(".", 1)[-1], "")
        if status != 200 or not headers.get("content-type", "").startswith(expected) \
                or headers.get("content-security-policy") != EXPECTED_CSP:
            wrong.append(f"{asset}: {status} {headers.get('content-type')}")
    report.check(not wrong, f"each console file is served with its type and the policy {wrong or ''}")
    inline = re.search(r"<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=", html)
    report.check(inline is None, "index.html has no inline script, style or handler (the policy would block it)")


def seed(api):
    central = api.ok("POST", "/libraries", {"name": "Central Library", "address": "1 Main Street"})
    branch = api.ok("POST", "/libraries", {"name": "Harbour Branch", "address": None})
    books = {}
    for title, author, year, available in [
            ("Dune", "Frank Herbert", 1965, True), ("Emma", "Jane Austen", 1815, True),
            ("Children of Dune", "Frank Herbert", 1976, False), ("Persuasion", "Jane Austen", 1817, True),
            ("Middlemarch", "George Eliot", 1871, True), ("The Left Hand of Darkness", "Ursula K. Le Guin", 1969, False)]:
        books[title] = api.ok("POST", f"/libraries/{central['id']}/books",
                              {"title": title, "author": author, "publishedYear": year, "available": available})["id"]
        # A page places a book that joins a list by createdAt (milliseconds): two made in the same
        # millisecond have no order it can see, so these are made apart.
        time.sleep(0.003)
    api.ok("POST", f"/libraries/{branch['id']}/books", {"title": "Moby-Dick", "author": "Herman Melville"})
    return central["id"], branch["id"], books


def masked(text):
    """`text` with the value of any access_token parameter hidden (CI logs are read by many)."""
    return re.sub(r"access_token=[^&\s]*", "access_token=***", str(text))


# --- what the checks ask the page (JavaScript expressions) ----------------------------------------

WATCH_GRAMMAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "WatchGrammar", "cases.json")
LIVE = "document.getElementById('connection').dataset.state === 'live'"
EDITOR = "document.getElementById('editor')"
EDITOR_CLOSED = f"!{EDITOR}.open"
ROW_TITLES = "[...document.querySelectorAll('#books tr')].map(r => r.querySelector('[data-field=title]').textContent)"
CONFLICT_FIELDS = "[...document.querySelectorAll('#conflict-fields tr')].map(r => r.dataset.field).join()"
MARK_ROWS = "document.querySelectorAll('#books tr, #libraries li').forEach(r => r.__mark = r.dataset.bookId || r.dataset.libraryId)"
ROWS_MARKED = ("[...document.querySelectorAll('#books tr, #libraries li')]"
               ".every(r => r.__mark === (r.dataset.bookId || r.dataset.libraryId))")
# What the page was doing, for the message of a failed check.
PAGE_STATE = ("JSON.stringify({connection: document.getElementById('connection').dataset.state, "
              "held: window.libraryConsole?.books.held?.length ?? null, "
              "rows: document.querySelectorAll('#books tr').length, inspector: [...document.querySelectorAll('#frames > li')]"
              ".slice(0, 4).map(l => l.textContent.slice(0, 160))})")


def js(value):
    """A Python value as a JavaScript literal."""
    return json.dumps(value)


def editor_is(state):
    return f"{EDITOR}.dataset.state === {js(state)}"


def book_row(book):
    return f"document.querySelector({js(f'#books tr[data-book-id={chr(39)}{book}{chr(39)}]')})"


def book_title(book):
    return f"{book_row(book)}?.querySelector('[data-field=title]').textContent"


def library_row(library):
    return f"document.querySelector({js(f'#libraries li[data-library-id={chr(39)}{library}{chr(39)}]')})"


def library_name(library):
    return f"{library_row(library)}?.querySelector('[data-field=name]').textContent"


def titles_are(titles):
    return f"JSON.stringify({ROW_TITLES}) === {js(json.dumps(titles, separators=(',', ':')))}"


def count(selector):
    return f"document.querySelectorAll({js(selector)}).length"


def text(element_id):
    return f"document.getElementById({js(element_id)}).textContent"


# --- the run ---------------------------------------------------------------------------------------

class ConsoleRun:
    """One server, one browser tab, the checks in order: each step builds on the state the one
    before left (the same libraries and books, edited along the way)."""

    def __init__(self, binary, arguments, screenshots, workdir):
        self.binary, self.arguments, self.screenshots, self.workdir = binary, arguments, screenshots, workdir
        self.server = Server(binary, workdir, arguments)
        processes.append(self.server)
        self.api = Api(self.server.port)
        self.origin = f"http://{HOST}:{self.server.port}"
        self.allowed = [self.origin + "/"]
        report.note(f"server on {self.origin}")
        check_headers(self.api)
        self.central, self.branch, self.books = seed(self.api)
        self.browser = Chromium(workdir)
        report.note(f"chromium: {self.browser.version}")
        self.page = Page(self.browser)

    def run(self):
        for step in (self.tokens, self.watch_grammar, self.live_fields, self.keyboard, self.filters, self.title_only,
                     self.conflict, self.validation,
                     self.deletes, self.restart, self.thousand_books, self.screenshots_taken, self.library_from_page,
                     self.behind_nginx, self.signed_token, self.whole_run):
            step()
        self.browser.stop()
        status = self.server.stop(20)
        report.check(status == 0, f"the server stopped on SIGTERM with exit status {status}")
        check_stderr(report, self.server)

    def open_editor(self, book):
        self.page.click(f"#books tr[data-book-id='{book}'] [data-field=title] button")
        return self.page.wait(f"{EDITOR}.open && {editor_is('ready')}", 10)[0]

    def tokens(self):
        page = self.page
        page.navigate(self.origin + "/")
        asked, _ = page.wait("document.getElementById('tokens').open && "
                             "document.getElementById('tokens').dataset.reason === 'unauthorized'", 10)
        report.check(bool(asked), "without a token the console's 401 opens the token form with the reason")
        page.type_into("#read-token", READ_TOKEN)
        page.type_into("#api-token", API_TOKEN)
        page.enter()
        loaded, _ = page.wait(f"!document.getElementById('tokens').open && {count('#libraries li[data-library-id]')} === 2", 10)
        report.check(bool(loaded), "tokens typed into the form (Enter submits) load the two libraries")
        live, seconds = page.wait(LIVE, 10)
        report.check(bool(live), f"the connection state shows live ({seconds:.2f} s)")
        stored = page.eval("[sessionStorage.getItem('library-console.read-token'), "
                           "sessionStorage.getItem('library-console.api-token')]")
        report.check(stored == [READ_TOKEN, API_TOKEN], "the tokens are kept in sessionStorage")

    def live_fields(self):
        page, api, central, books = self.page, self.api, self.central, self.books
        page.click(f"#libraries li[data-library-id='{central}'] button")
        shown, _ = page.wait(f"{count('#books tr[data-book-id]')} === 6 && {LIVE} && "
                             f"{text('library-address')} === '1 Main Street'", 10)
        report.check(bool(shown), "opening Central Library shows its 6 books, its address, and the stream is live")
        page.eval(MARK_ROWS)  # a row that is rebuilt loses its mark
        api.ok("PATCH", f"/libraries/{central}", {"name": "Central Library (renamed)"})
        renamed, seconds = page.wait(f"{library_name(central)} === 'Central Library (renamed)' && "
                                     f"{text('library-name')} === 'Central Library (renamed)'", 5)
        report.check(bool(renamed) and seconds < 1,
                     f"a library renamed over HTTP shows in the list and heading in {seconds:.3f} s (< 1 s)")
        api.ok("PATCH", f"/books/{books['Emma']}", {"title": "Emma (annotated)"})
        retitled, seconds = page.wait(f"{book_title(books['Emma'])} === 'Emma (annotated)'", 5)
        report.check(bool(retitled) and seconds < 1, f"a book retitled over HTTP shows in its row in {seconds:.3f} s (< 1 s)")
        same = page.eval(f"{ROWS_MARKED} && {count('#books tr')} === 6")
        report.check(bool(same), "only the changed rows were repainted: every row is still the same DOM node")

    def keyboard(self):
        page = self.page
        page.eval("document.activeElement?.blur(); window.scrollTo(0, 0)")
        visited = []
        for _ in range(5):
            page.key("Tab", "Tab", 9)
            visited.append(page.eval("(() => { const e = document.activeElement; const s = getComputedStyle(e); "
                                     "return [e.id || e.className || e.tagName, s.outlineStyle !== 'none' && "
                                     "parseFloat(s.outlineWidth) >= 2]; })()"))
        order = [name for name, _ in visited]
        report.check(order == ["skip-link", "tokens-button", "inspector-toggle", "new-library", "library-item"],
                     f"Tab goes through the page in order: {', '.join(order)}")
        report.check(all(outlined for _, outlined in visited), "each element reached with Tab shows a focus outline")
        page.key("Tab", "Tab", 9)  # the second library: Harbour Branch
        page.enter()
        opened, _ = page.wait(f"document.getElementById('library-view').dataset.libraryId === {js(self.branch)} && "
                              f"{count('#books tr')} === 1 && {LIVE}", 10)
        report.check(bool(opened), "Enter on a library in the list opens it")
        page.click(f"#libraries li[data-library-id='{self.central}'] button")
        page.wait(f"{count('#books tr')} === 6 && {LIVE}", 10)

    def filters(self):
        page, api, books = self.page, self.api, self.books
        page.fill("#filter-author", "Frank Herbert")
        page.enter()
        filtered, _ = page.wait(f"{titles_are(['Dune', 'Children of Dune'])} && "
                                f"{text('stream-url')}.includes('&author=Frank%20Herbert')", 10)
        address = page.eval("location.hash")
        report.check(bool(filtered) and address == f"#library={self.central}&author=Frank+Herbert",
                     f"filtering by author (Enter in the field) shows Dune and Children of Dune; "
                     f"the address keeps the view ({address})")
        # A fresh page on that address has seen no other book: where one that joins goes, it must ask.
        page.navigate()  # the address is already this one (history.replaceState)
        reopened, _ = page.wait(f"{titles_are(['Dune', 'Children of Dune'])} && "
                                f"document.getElementById('filter-author').value === 'Frank Herbert' && {LIVE}", 10)
        report.check(bool(reopened), "reloading that address (tokens kept in the tab) reopens the filtered view and goes live")
        api.ok("PATCH", f"/books/{books['Emma']}", {"author": "Frank Herbert"})
        gained, seconds = page.wait(titles_are(["Dune", "Emma (annotated)", "Children of Dune"]), 5)
        report.check(bool(gained), f"a book patched to the author joins the filtered list, in list order ({seconds:.3f} s)"
                     + ("" if gained else f": {page.eval(ROW_TITLES)} {shorten(page.eval(PAGE_STATE), 900)}"))
        api.ok("PATCH", f"/books/{books['Dune']}", {"author": "Brian Herbert"})
        lost, seconds = page.wait(titles_are(["Emma (annotated)", "Children of Dune"]), 5)
        report.check(bool(lost), f"a book patched to another author leaves the filtered list ({seconds:.3f} s)"
                     + ("" if lost else f": {page.eval(ROW_TITLES)} {shorten(page.eval(PAGE_STATE), 900)}"))

    def watch_grammar(self):
        """The console's printer (watch.js) against the shared table of the watch grammar, which
        the server's and the Swift client's tests hold theirs to."""
        with open(WATCH_GRAMMAR, encoding="utf-8") as table:
            cases = json.load(table)["printed"]
        spelled = self.page.eval(f"import(new URL('console/watch.js', document.baseURI).href)"
                                 f".then(m => {js(cases)}.map(c => m.watchText(c)))")
        wrong = [f"{case['text']} spelled {got}" for case, got in zip(cases, spelled or []) if got != case["text"]]
        report.check(len(spelled or []) == len(cases) and not wrong,
                     f"watch.js spells each of the shared table's {len(cases)} watches as the server does"
                     + (f": {'; '.join(wrong)}" if wrong else ""))

    def title_only(self):
        page, books = self.page, self.books
        page.eval("document.querySelectorAll('#filters input[name=column]:checked').forEach(b => b.click())")
        watch = f"/books?libraryId={self.central}&author=Frank%20Herbert&fields=title"
        entry = f"#frames .entry[data-watch='{watch}']"
        snapshot, _ = page.wait(f"document.querySelector({js(entry + '[data-event=snapshot] .data')})?.textContent", 10)
        items = json.loads(snapshot)["items"] if snapshot else []
        report.check(len(items) == 2 and all(set(item) == {"id", "title"} for item in items),
                     f"with every column but Title unticked, the inspector shows the watch's snapshot "
                     f"with id and title only: {shorten(snapshot, 120)}")
        page.wait(LIVE, 10)
        self.api.ok("PATCH", f"/books/{books['Children of Dune']}", {"title": "Children of Dune (1976)", "publishedYear": 1977})
        change, _ = page.wait(f"document.querySelector({js(entry + '[data-event=change] .data')})?.textContent", 5)
        changed = json.loads(change) if change else {}
        report.check(changed == {"changed": [{"id": books["Children of Dune"], "title": "Children of Dune (1976)"}]},
                     f"a write of title and year reaches the title-only watch as the title alone: {shorten(change, 120)}")
        hidden = page.eval("getComputedStyle(document.querySelector('#books tr td[data-field=author]')).display")
        report.check(hidden == "none", "unticked columns are hidden")
        page.eval("document.querySelectorAll('#filters input[name=column]:not(:checked)')"
                  ".forEach(b => { if (b.value !== 'isbn') b.click(); })")
        page.fill("#filter-author", "")
        page.enter()
        page.wait(f"{count('#books tr')} === 6 && {LIVE}", 10)

    def conflict(self):
        page, book = self.page, self.books["Persuasion"]
        ready = self.open_editor(book) and page.eval("document.getElementById('edit-title').value") == "Persuasion"
        report.check(bool(ready), "clicking a title opens the editor with the book")
        page.wait(f"{text('stream-url')}.includes('{book}') && {LIVE}", 5)
        page.fill("#edit-title", "Persuasion (my edit)")
        self.api.ok("PATCH", f"/books/{book}", {"author": "J. Austen", "publishedYear": 1818})
        followed, _ = page.wait("document.getElementById('edit-author').value === 'J. Austen'", 5)
        report.check(bool(followed), "an untouched field of the open editor follows the server live")
        page.click("#editor-save")
        fields, _ = page.wait(f"{editor_is('conflict')} && {CONFLICT_FIELDS}", 10)
        report.check(fields == "author,publishedYear",
                     f"saving over a change made elsewhere is a 412 that lists what changed on the server ({fields})")
        os.makedirs(self.screenshots, exist_ok=True)
        path = os.path.join(self.screenshots, "console-375-conflict.png")
        report.check(page.screenshot(375, 812, path) > 5000, f"screenshot of the conflict at 375 px: {path}")
        page.click("#conflict-reapply")
        closed, _ = page.wait(EDITOR_CLOSED, 10)
        current = self.api.ok("GET", f"/books/{book}")
        report.check(bool(closed) and current["title"] == "Persuasion (my edit)" and current["author"] == "J. Austen",
                     f"'Reapply my edit' saves the edit onto the new version "
                     f"(title {current['title']!r}, author {current['author']!r})")

    def validation(self):
        page = self.page
        self.open_editor(self.books["Middlemarch"])
        page.fill("#edit-title", "")
        page.fill("#edit-isbn", "123")
        page.click("#editor-save")
        errors, _ = page.wait("(() => { const t = document.querySelector('[data-field=title] [data-error-for=title]'); "
                              "const i = document.querySelector('[data-field=isbn] [data-error-for=isbn]'); "
                              "return !t.hidden && !i.hidden && [t.textContent, i.textContent]; })()", 10)
        report.check(bool(errors) and "500" in errors[0] and "ISBN" in errors[1],
                     f"a 422 shows each message next to its field: {errors}")
        invalid = page.eval("document.getElementById('edit-title').getAttribute('aria-invalid')")
        report.check(invalid == "true", "the invalid field is marked aria-invalid")
        page.escape()
        escaped, _ = page.wait(EDITOR_CLOSED, 5)
        report.check(bool(escaped), "Escape closes the editor")

    def deletes(self):
        page, api = self.page, self.api
        victim = self.books["The Left Hand of Darkness"]
        self.open_editor(victim)
        api.ok("PATCH", f"/books/{victim}", {"available": True})
        page.click("#editor-delete")
        armed = page.eval("document.getElementById('editor-delete').dataset.armed")
        page.click("#editor-delete")
        conflict, _ = page.wait(f"{editor_is('conflict')} && [{text('conflict-reapply')}, {CONFLICT_FIELDS}]", 10)
        report.check(armed == "true" and conflict == ["Delete anyway", "available"],
                     f"a delete from the page takes two presses; over a change made elsewhere "
                     f"it is a 412 showing it ({conflict})")
        page.click("#conflict-reapply")
        gone, _ = page.wait(f"{EDITOR_CLOSED} && !{book_row(victim)}", 10)
        status, _, _ = api.call("GET", f"/books/{victim}")
        report.check(bool(gone) and status == 404, f"'Delete anyway' deletes it: the row leaves and the book is gone ({status})")
        other = self.books["Middlemarch"]
        self.open_editor(other)
        page.wait(f"{text('stream-url')}.includes('{other}') && {LIVE}", 10)
        api.ok("DELETE", f"/books/{other}")
        deleted, seconds = page.wait(f"{editor_is('deleted')} && !{book_row(other)} && {text('editor-banner')}", 5)
        report.check(bool(deleted), f"a book deleted by another client is shown deleted in its editor "
                                    f"and leaves the list ({deleted!r}, {seconds:.3f} s)")
        page.escape()
        page.wait(EDITOR_CLOSED, 5)

    def restart(self):
        page, books = self.page, self.books
        page.wait(LIVE, 10)
        frames_before = page.eval(count("#frames li[data-kind=frame]"))
        opens_before = page.eval(count("#frames li[data-kind=connect]"))
        port = self.server.port
        status = self.server.stop(20)
        report.check(status == 0, f"the server stopped on SIGTERM with exit status {status} while the page was connected")
        dropped, _ = page.wait("document.getElementById('connection').dataset.state === 'reconnecting'", 10)
        report.check(bool(dropped), "the page shows reconnecting while the server is down")
        self.server = Server(self.binary, self.workdir, [*self.arguments, "--port", str(port)])
        processes.append(self.server)
        self.api.ok("PATCH", f"/books/{books['Dune']}", {"title": "Dune (after the restart)"})
        resumed, seconds = page.wait(f"{book_title(books['Dune'])} === 'Dune (after the restart)' && {LIVE}", 20)
        report.check(bool(resumed), f"after the restart the page reconnects by itself and shows a change made since "
                                    f"({seconds:.2f} s)")
        # The inspector lists the newest first: the frames since the restart are the first ones.
        snapshots = page.eval(f"[...document.querySelectorAll('#frames li[data-kind=frame]')]"
                              f".slice(0, {count('#frames li[data-kind=frame]')} - {frames_before})"
                              ".flatMap(f => [...f.querySelectorAll('.entry[data-event=snapshot]')]).length")
        opens_after = page.eval(count("#frames li[data-kind=connect]"))
        report.check(snapshots == 0 and opens_after == opens_before,
                     f"the browser resumed its own stream with Last-Event-ID: no snapshot again ({snapshots}), "
                     f"no new stream opened by the page")
        titles = page.eval(ROW_TITLES)
        report.check(titles == ["Dune (after the restart)", "Emma (annotated)", "Children of Dune (1976)",
                                "Persuasion (my edit)"], f"the list is right after the restart: {titles}")

    def thousand_books(self):
        page, api = self.page, self.api
        big = api.ok("POST", "/libraries", {"name": "Big Library", "address": "1,200 books"})["id"]
        started = time.monotonic()
        api.create_books(big, 1200, "Volume")
        report.note(f"1,200 books created in {time.monotonic() - started:.1f} s")
        listed, _ = page.wait(f"!!{library_row(big)}", 10)
        page.click(f"#libraries li[data-library-id='{big}'] button")
        rendered, _ = page.wait("(() => { const t = document.getElementById('books-table'); "
                                "return t.dataset.state === 'ready' && t.dataset.renderedRows === '1000' && "
                                f"{count('#books tr')} === 1000 && Number(t.dataset.renderMs); }})()", 30)
        report.check(bool(listed) and bool(rendered) and rendered < 1000,
                     f"the first 1,000 of 1,200 books (two requests of 500) render in {rendered} ms in the page (< 1,000 ms)")
        live, _ = page.wait(f"{LIVE} && !!document.querySelector('#frames .entry[data-event=snapshot][data-truncated=true]')", 20)
        last = page.eval("document.querySelector('#books tr:last-child [data-field=title]').textContent")
        more = page.eval("!document.getElementById('books-more').hidden")
        report.check(bool(live) and last == "Volume 0999" and more,
                     f"its stream goes live with the big snapshot; the last row is {last!r} and 'Load more books' is offered")
        shown, frames = page.eval(f"[{count('#frames > li')}, Number({text('frame-count')})]")
        report.check(shown <= 200 < frames, f"the inspector keeps the last 200 records ({shown} shown of {frames} frames)")
        # A book created now belongs after the 1,200th: not shown until its page is loaded.
        api.ok("POST", f"/libraries/{big}/books", {"title": "Volume 1200"})
        time.sleep(0.3)
        unchanged = page.eval(count("#books tr"))
        page.click("#books-more")
        paged, _ = page.wait(f"{count('#books tr')} === 1201 && document.getElementById('books-more').hidden && "
                             "document.querySelector('#books tr:last-child [data-field=title]').textContent === 'Volume 1200'", 15)
        report.check(unchanged == 1000 and bool(paged),
                     "'Load more books' brings the rest; a book created meanwhile waits for its page, then shows last")
        unlabeled = page.eval("[...document.querySelectorAll('input, select')].filter(e => e.labels.length === 0)"
                              ".map(e => e.id || e.name)")
        report.check(unlabeled == [], f"every input and select has a label {unlabeled or ''}")

    def screenshots_taken(self):
        page = self.page
        page.click(f"#libraries li[data-library-id='{self.central}'] button")
        page.wait(f"{count('#books tr')} === 4 && {LIVE}", 10)
        os.makedirs(self.screenshots, exist_ok=True)
        self.open_editor(self.books["Emma"])
        page.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        path = os.path.join(self.screenshots, "console-1280-dark-editor.png")
        report.check(page.screenshot(1280, 900, path) > 5000, f"screenshot in dark mode with the editor open: {path}")
        page.call("Emulation.setEmulatedMedia", {"features": []})
        page.escape()
        page.wait(EDITOR_CLOSED, 5)
        for width, height in ((1280, 900), (375, 812)):
            path = os.path.join(self.screenshots, f"console-{width}.png")
            size = page.screenshot(width, height, path)
            report.check(size > 5000, f"screenshot at {width} px: {path} ({size:,} bytes)")
        page.call("Emulation.setDeviceMetricsOverride", {"width": 375, "height": 812, "deviceScaleFactor": 1, "mobile": True})
        overflow = page.eval("document.documentElement.scrollWidth")
        page.call("Emulation.clearDeviceMetricsOverride")
        report.check(overflow <= 375, f"at 375 px the page does not scroll sideways (scrollWidth {overflow})")

    def library_from_page(self):
        page = self.page
        page.click("#new-library")
        page.wait(f"{EDITOR}.open && {EDITOR}.dataset.mode === 'create'", 5)
        page.type_into("#edit-name", "Annex")
        page.enter()
        annex, _ = page.wait("(() => { const li = [...document.querySelectorAll('#libraries li')].find(l => "
                             "l.querySelector('[data-field=name]').textContent === 'Annex'); "
                             f"return {EDITOR_CLOSED} && li && li.dataset.libraryId; }})()", 10)
        opened, _ = page.wait(f"document.getElementById('library-view').dataset.libraryId === {js(annex)} && {LIVE}", 10)
        report.check(bool(annex) and bool(opened), "a library created from the page (Enter saves) appears in the list, opened")
        if not annex:
            return
        page.click("#edit-library")
        page.wait(editor_is("ready"), 10)
        page.fill("#edit-address", "2 Side Street")
        page.click("#editor-save")
        edited, _ = page.wait(f"{EDITOR_CLOSED} && {text('library-address')} === '2 Side Street'", 10)
        page.click("#edit-library")
        page.wait(editor_is("ready"), 10)
        page.click("#editor-delete")
        page.click("#editor-delete")
        removed, _ = page.wait(f"!{library_row(annex)} && !document.getElementById('no-library').hidden", 10)
        status, _, _ = self.api.call("GET", f"/libraries/{annex}")
        report.check(bool(edited) and bool(removed) and status == 404,
                     f"it is edited (its address shows live) and deleted from the page: "
                     f"gone from the list and the server ({status})")

    def behind_nginx(self):
        page, branch = self.page, self.branch
        nginx, nginx_port = start_nginx(self.workdir, self.server.port)
        try:
            proxied = f"http://{HOST}:{nginx_port}/library/"
            self.allowed.append(proxied)
            page.navigate(proxied)  # another origin: its sessionStorage has no tokens yet
            page.wait("document.getElementById('tokens').open", 10)
            page.type_into("#read-token", READ_TOKEN)
            page.enter()
            through, _ = page.wait(f"{count('#libraries li[data-library-id]')} === 3 && {LIVE}", 15)
            report.check(bool(through), f"behind nginx at {proxied} the console loads (read token only) and its stream goes live")
            self.api.ok("PATCH", f"/libraries/{branch}", {"name": "Harbour Branch (via nginx)"})
            seen, seconds = page.wait(f"{library_name(branch)} === 'Harbour Branch (via nginx)'", 5)
            report.check(bool(seen), f"a change streams through nginx unbuffered ({seconds:.3f} s)")
            page.click(f"#libraries li[data-library-id='{branch}'] button")
            page.wait(f"{count('#books tr')} === 1", 10)
            page.click("#new-book")
            page.wait(f"{EDITOR}.open", 5)
            page.fill("#edit-title", "Typee")
            page.click("#editor-save")
            refused, _ = page.wait("document.getElementById('tokens').open && document.getElementById('tokens').dataset.reason", 10)
            report.check(bool(refused), "a write with only the read token is a 401 that asks for the API token")
            page.type_into("#api-token", API_TOKEN)
            page.enter()
            page.wait("!document.getElementById('tokens').open", 5)
            page.click("#editor-save")
            created, _ = page.wait(f"{EDITOR_CLOSED} && "
                                   "[...document.querySelectorAll('#books [data-field=title]')].some(c => c.textContent === 'Typee')", 10)
            report.check(bool(created), "with the API token the new book is created and appears in the list")
        finally:
            stop_process(nginx)

    def signed_token(self):
        page, central = self.page, self.central
        page.navigate(self.origin + "/")
        page.eval("sessionStorage.clear()")
        page.navigate(self.origin + "/")
        page.wait("document.getElementById('tokens').open", 10)
        name = self.api.ok("GET", f"/libraries/{central}")["name"]
        page.type_into("#signed-token", mint("console-reader", {"read": [central]}, 3600))
        page.enter()
        shown, seconds = page.wait(f"{count('#libraries li[data-library-id]')} === 1 && {LIVE}", 15)
        report.check(bool(shown), f"signed in with a token that reads one library, the page shows that one and goes live ({seconds:.2f} s)")
        identity = page.eval("document.getElementById('identity').hidden ? '' : document.getElementById('identity').textContent")
        report.check(identity.startswith("Signed in as console-reader") and f"reads {name}" in identity
                     and "writes nothing" in identity, f"the header says who the token is and what it may do: {identity!r}")
        # A token that expires (the server runs with --jwt-leeway 0): `expired` ends the stream,
        # and the page asks for a new token instead of reconnecting into a 401.
        page.eval("sessionStorage.clear()")
        page.navigate(self.origin + "/")
        page.wait("document.getElementById('tokens').open", 10)
        page.type_into("#signed-token", mint("console-reader", {"read": ["*"]}, 3))
        page.enter()
        page.wait(LIVE, 10)
        asked, seconds = page.wait("document.getElementById('connection').dataset.state === 'expired' && "
                                   "document.getElementById('tokens').open", 10)
        report.check(bool(asked), f"when the token expires the stream ends and the page asks to sign in again ({seconds:.2f} s)")
        page.escape()

    def whole_run(self):
        page = self.page
        markup = page.eval("document.documentElement.outerHTML")
        report.check(READ_TOKEN not in markup and API_TOKEN not in markup, "no token appears anywhere in the page's markup")
        logged = [line for line in page.console_text if READ_TOKEN in line or API_TOKEN in line]
        report.check(not logged, "no token appears in any console message")
        # Chromium logs each 4xx the checks provoke (401, 404, 412, 422) and a stream cut by a
        # restart as a network error; any other error, or one about a console file, is a failure.
        expected = re.compile(r"status of (401|404|412|422) |net::ERR_(CONNECTION_REFUSED|EMPTY_RESPONSE|"
                              r"CONNECTION_RESET|INCOMPLETE_CHUNKED_ENCODING|ABORTED)")
        problems = [(kind, line) for kind, line in page.problems
                    if not (kind == "log/network" and expected.search(line) and "/console/" not in line
                            and not re.search(r":\d+/(library/)?\s*$", line))]
        for kind, line in page.problems:
            if (kind, line) not in problems:
                report.note(f"expected: {shorten(masked(line), 160)}")
        for kind, line in problems:
            report.check(False, f"page problem: {kind}: {shorten(masked(line), 200)}")
        if not problems:
            report.check(True, f"no uncaught exception and no console error over the run ({len(page.problems)} "
                               f"network errors, all of provoked 4xx answers or a cut stream)")
        foreign = [url for url in page.requests if not url.startswith(tuple(self.allowed)) and url != "about:blank"]
        report.check(not foreign, f"all {len(page.requests)} requests stayed on the server's origin {foreign[:3] or ''}")


def cleanup():
    """Kills whatever is still running, removes the temporary directory; safe to call twice."""
    for process in processes:
        try:
            if isinstance(process, Server):
                if process.alive():
                    process.process.kill()
                    process.process.wait(5)
            else:
                # Chromium and nginx lead process groups of their own: their helpers go too, even
                # when the leader has already exited.
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except OSError:
                    pass
                process.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
    for workdir in workdirs:
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary", nargs="?", default=os.environ.get("SERVER", os.path.join(ROOT, ".build/debug/library-server")))
    parser.add_argument("--screenshots", default=os.path.join(ROOT, ".build/console-screenshots"))
    parser.add_argument("--console-directory", default=None)
    options = parser.parse_args()
    ensure_tools()
    binary = os.path.abspath(options.binary)
    if not os.access(binary, os.X_OK):
        sys.exit(f"{NAME}: no server binary at {binary}")
    keys = os.path.join(tempfile.mkdtemp(prefix=f"{NAME}-keys-"), "keys.json")
    workdirs.append(os.path.dirname(keys))
    with open(keys, "w") as file:
        json.dump({"keys": [{"kty": "oct", "kid": "console", "k": b64url(JWT_SECRET)}]}, file)
    arguments = ["--api-token", API_TOKEN, "--read-token", READ_TOKEN, "--heartbeat-interval", "2",
                 "--jwt-keys", keys, "--jwt-leeway", "0"]
    if options.console_directory:
        arguments += ["--console-directory", os.path.abspath(options.console_directory)]

    def expire(signal_number, _frame):
        report.check(False, f"the run took more than {TIME_LIMIT} s; stopping" if signal_number == signal.SIGALRM
                     else "stopped by SIGTERM")
        cleanup()
        report.summary()
        os._exit(2)

    signal.signal(signal.SIGALRM, expire)
    signal.signal(signal.SIGTERM, expire)
    signal.alarm(TIME_LIMIT)
    started = time.monotonic()
    workdir = tempfile.mkdtemp(prefix=f"{NAME}-")
    workdirs.append(workdir)
    try:
        ConsoleRun(binary, arguments, os.path.abspath(options.screenshots), workdir).run()
    except Exception as error:  # noqa: BLE001 (any failure of the run is one failed check, then the cleanup)
        report.check(False, f"the run stopped early: {error!r}")
    finally:
        cleanup()
    signal.alarm(0)
    report.note(f"took {time.monotonic() - started:.1f} s")
    sys.exit(report.summary())


if __name__ == "__main__":
    main()
