#!/usr/bin/env bash
# Crash durability: acknowledged writes survive `kill -9` of library-server.
#
# The server keeps SQLite in WAL mode with synchronous=NORMAL: a commit is written (not fsynced)
# to the WAL before the response leaves, so a killed *process* must lose nothing it acknowledged
# (a power loss may lose the last commits; this script cannot and does not test that).
#
# Each round, on the same database file:
#   1. a Python writer (4 threads, one keep-alive connection each) POSTs books and PATCHes titles,
#      every title unique; a write enters the journal as acknowledged only once its 2xx response
#      has been read whole, with the version it returned (checked against its ETag);
#   2. after a random 0.3–2.5 s the server gets SIGKILL, mid-write;
#   3. the server restarts on the same file and the checks run:
#      - every acknowledged write is stored at its acknowledged version or later (at exactly that
#        version, it has exactly that title): a later, unacknowledged write may have gone further;
#      - books stored = acknowledged POSTs plus at most the POSTs that were in flight;
#      - the writer never got a non-2xx answer;
#      - `PRAGMA integrity_check` is ok (sqlite3 CLI, read-only, next to the running server);
#      - one SSE subscriber on one book (`fields=title`), alive across all rounds, reconnected to
#        the restarted server with Last-Event-ID, got no second snapshot, saw strictly increasing
#        ids, every acknowledged title of that book in version order, and ends on its final title.
# At the end: SIGTERM gives exit status 0, the `-wal` file is empty or gone (checkpointed on a clean
# shutdown) and the closed database passes `PRAGMA integrity_check`.
#
# Usage: scripts/crash-durability.sh [SERVER_BINARY] [ROUNDS]   (default .build/debug/library-server, 5)
# Needs bash, python3 (standard library only) and the sqlite3 CLI (installed with apt-get when
# missing, if running as root). Talks to 127.0.0.1 only. A round takes 1-4 s here (bounded near 15 s);
# the whole run stops itself after 30 s + 20 s per round. Prints "crash-durability: N passed, M failed";
# exits non-zero on any failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVER=${1:-$ROOT/.build/debug/library-server}
[[ $SERVER == /* ]] || SERVER=$PWD/$SERVER
ROUNDS=${2:-5}
TIME_LIMIT=$((30 + 20 * ROUNDS))
NAME=crash-durability
# shellcheck source-path=SCRIPTDIR source=lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number, not '$ROUNDS'"
[[ -x $SERVER ]] || die "no server binary at $SERVER"
command -v python3 >/dev/null || die "python3 is missing"
if ! command -v sqlite3 >/dev/null; then
    [[ $(id -u) == 0 ]] || die "the sqlite3 CLI is missing, and only root can install it"
    echo "# installing sqlite3"
    timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq sqlite3 \
        >/dev/null || die "cannot install sqlite3"
fi

# --- processes, temporary files, time limit -----------------------------------------------------

harness_start   # WORK, the traps and the watchdog (scripts/lib/harness.sh)
DB=$WORK/library.sqlite
CLIENT=$WORK/client.py
SERVER_PID=""
WRITER_PID=""
SUBSCRIBER_PID=""
CLEANUP_PIDS+=(WRITER_PID SUBSCRIBER_PID SERVER_PID)

# --- the Python client: setup, writer, subscriber, verifier -------------------------------------

cat >"$CLIENT" <<'PYTHON'
"""Client side of crash-durability.sh. Usage: client.py COMMAND WORKDIR [ARGS]

setup PORT                 creates the library and the watched book (state.json)
write PORT ROUND SECONDS   concurrent writer; journals attempts and acknowledged writes (writes.jsonl)
subscribe                  SSE subscriber on the watched book, across restarts (events.jsonl);
                           reads "GENERATION PORT" from WORKDIR/port, resumes with Last-Event-ID
verify PORT ROUND          prints "PASS|..." / "FAIL|..." lines for the checks after a restart
"""
import http.client
import json
import os
import random
import sys
import threading
import time

WORK = sys.argv[2]


def path(name):
    return os.path.join(WORK, name)


class Journal:
    """An append-only JSON-lines file, one flushed line per record, shared by threads."""

    def __init__(self, name):
        self.file = open(path(name), "a", buffering=1)
        self.lock = threading.Lock()

    def add(self, **record):
        with self.lock:
            self.file.write(json.dumps(record) + "\n")


def read_journal(name):
    try:
        with open(path(name)) as file:
            return [json.loads(line) for line in file if line.endswith("\n")]
    except FileNotFoundError:
        return []


def connect(port, timeout=10):
    return http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)


def request(conn, method, target, body=None):
    """Status, ETag and body; the body is read whole before this returns."""
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, target, body=data, headers={"Content-Type": "application/json"} if data else {})
    response = conn.getresponse()
    return response.status, response.getheader("ETag"), response.read()


def setup(port):
    conn = connect(port)
    journal = Journal("writes.jsonl")
    status, _, body = request(conn, "POST", "/libraries", {"name": "crash-durability"})
    assert status == 201, (status, body)
    library = json.loads(body)["id"]
    journal.add(kind="attempt", round=0, title="watched-0")
    status, _, body = request(conn, "POST", "/books", {"libraryId": library, "title": "watched-0"})
    assert status == 201, (status, body)
    book = json.loads(body)
    journal.add(kind="ack", round=0, method="POST", id=book["id"], title=book["title"], version=book["version"])
    with open(path("state.json"), "w") as file:
        json.dump({"library": library, "watched": book["id"]}, file)


def load_state():
    with open(path("state.json")) as file:
        return json.load(file)


def writer_thread(port, round_, number, state, journal, deadline):
    """Writes until the deadline or until the server goes away (its last request then is unacknowledged)."""
    conn = connect(port)
    rng = random.Random()
    own = []
    count = 0
    while time.monotonic() < deadline:
        count += 1
        title = f"r{round_}-w{number}-{count}"
        if number == 0 and rng.random() < 0.5:
            method, target, body = "PATCH", f"/books/{state['watched']}", {"title": title}
        elif own and rng.random() < 0.5:
            method, target, body = "PATCH", f"/books/{rng.choice(own)}", {"title": title}
        else:
            method, target, body = "POST", "/books", {"libraryId": state["library"], "title": title}
            journal.add(kind="attempt", round=round_, title=title)
        try:
            status, etag, raw = request(conn, method, target, body)
        except (OSError, http.client.HTTPException):
            return
        try:
            record = json.loads(raw)
            good = status in (200, 201) and record["title"] == title and etag == f'"{record["version"]}"'
        except (ValueError, KeyError, TypeError):
            good = False
        if not good:
            journal.add(kind="unexpected", round=round_, method=method, target=target, status=status,
                        etag=etag, body=raw.decode("utf-8", "replace")[:300])
            continue
        journal.add(kind="ack", round=round_, method=method, id=record["id"], title=title,
                    version=record["version"])
        if method == "POST":
            own.append(record["id"])


def write(port, round_, seconds):
    state = load_state()
    journal = Journal("writes.jsonl")
    deadline = time.monotonic() + float(seconds)
    threads = [threading.Thread(target=writer_thread, args=(port, int(round_), n, state, journal, deadline))
               for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def read_port():
    """Waits for WORKDIR/port ("GENERATION PORT"), which the script removes while the server is down."""
    while True:
        try:
            with open(path("port")) as file:
                generation, port = file.read().split()
                return int(generation), int(port)
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)


def sse_events(response):
    """The events of an SSE response as dicts of their fields, until the stream ends."""
    fields = {}
    while True:
        line = response.readline()
        if not line:
            return
        line = line.decode("utf-8").rstrip("\r\n")
        if not line:
            if "event" in fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value


def subscribe():
    watched = load_state()["watched"]
    journal = Journal("events.jsonl")
    last_id = None
    connection = 0
    while True:
        generation, port = read_port()
        try:
            conn = connect(port, timeout=5)  # the server sends a keep-alive every second
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = str(last_id)
            conn.request("GET", f"/books/{watched}/events?fields=title", headers=headers)
            response = conn.getresponse()
            if response.status != 200:
                journal.add(kind="refused", generation=generation, status=response.status)
                time.sleep(0.2)
                continue
            connection += 1
            journal.add(kind="connect", connection=connection, generation=generation, lastEventId=last_id)
            for event in sse_events(response):
                last_id = int(event["id"])
                title = json.loads(event.get("data", "{}")).get("title")
                journal.add(kind="event", connection=connection, event=event["event"], id=last_id, title=title)
        except (OSError, http.client.HTTPException, ValueError):
            pass
        time.sleep(0.1)


def list_books(conn, library):
    """{id: (title, version)} of every book of the library, paging with the cursor."""
    books, cursor = {}, None
    while True:
        target = f"/libraries/{library}/books?limit=500&fields=title,version"
        if cursor:
            target += f"&cursor={cursor}"
        status, _, raw = request(conn, "GET", target)
        assert status == 200, (status, raw)
        page = json.loads(raw)
        for book in page["items"]:
            books[book["id"]] = (book["title"], book["version"])
        cursor = page["nextCursor"]
        if not cursor:
            return books


def report(good, description, problems=()):
    print(f"{'PASS' if good else 'FAIL'}|{description}")
    for problem in [] if good else list(problems)[:5]:
        print(f"INFO|  {problem}")
    sys.stdout.flush()


def verify(port, round_):
    round_ = int(round_)
    state = load_state()
    writes = read_journal("writes.jsonl")
    books = list_books(connect(port), state["library"])
    prefix = f"round {round_}:"

    acks = [w for w in writes if w["kind"] == "ack"]
    lost = []
    for ack in acks:
        title, version = books.get(ack["id"], (None, 0))
        if version < ack["version"] or (version == ack["version"] and title != ack["title"]):
            lost.append(f"{ack['method']} {ack['id']} acknowledged v{ack['version']} {ack['title']!r}, "
                        f"stored v{version} {title!r}")
    this_round = sum(1 for a in acks if a["round"] == round_)
    report(not lost, f"{prefix} all {len(acks)} acknowledged writes ({this_round} this round) are stored "
                     f"at their acknowledged version or later", lost)

    posts = sum(1 for a in acks if a["method"] == "POST")
    attempts = sum(1 for w in writes if w["kind"] == "attempt")
    report(posts <= len(books) <= attempts,
           f"{prefix} {len(books)} books stored, between the {posts} acknowledged and {attempts} attempted POSTs")

    unexpected = [w for w in writes if w["kind"] == "unexpected" and w["round"] == round_]
    report(not unexpected, f"{prefix} the writer got only 2xx answers with matching ETags",
           [json.dumps(w) for w in unexpected])

    final_title = books[state["watched"]][0]
    verify_stream(prefix, round_, state["watched"], final_title, acks)


def verify_stream(prefix, round_, watched, final_title, acks):
    deadline = time.monotonic() + 8
    while True:
        records = read_journal("events.jsonl")
        connects = [r for r in records if r["kind"] == "connect" and r["generation"] == round_]
        events = [r for r in records if r["kind"] == "event"]
        caught_up = connects and events and events[-1]["title"] == final_title
        if caught_up or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    report(bool(connects), f"{prefix} the subscriber reconnected to the restarted server")
    if not connects:
        return
    resumed = connects[0]
    snapshots = [e for e in events if e["connection"] >= resumed["connection"] and e["event"] == "snapshot"]
    report(resumed["lastEventId"] is not None and not snapshots,
           f"{prefix} it resumed with Last-Event-ID: {resumed['lastEventId']} and got no new snapshot")

    ids = [e["id"] for e in events]
    report(all(a < b for a, b in zip(ids, ids[1:])), f"{prefix} event ids strictly increase ({len(ids)} events)")

    titles = [e["title"] for e in events]
    position = {title: index for index, title in enumerate(titles)}
    expected = sorted((a for a in acks if a["id"] == watched), key=lambda a: a["version"])
    missing = [f"v{a['version']} {a['title']!r} not in the stream" for a in expected if a["title"] not in position]
    seen = [position[a["title"]] for a in expected if a["title"] in position]
    order = all(a < b for a, b in zip(seen, seen[1:]))
    report(not missing and order,
           f"{prefix} all {len(expected)} acknowledged titles of the watched book arrived, in version order",
           missing + ([] if order else ["the titles arrived out of version order"]))
    report(titles[-1:] == [final_title],
           f"{prefix} the stream ends on the final title {final_title!r}", [f"last event: {events[-1:]}"])


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[3:]
    {"setup": setup, "write": write, "subscribe": subscribe, "verify": verify}[command](*args)
PYTHON

# --- server control -----------------------------------------------------------------------------

PORT=""
# start_server GENERATION: starts the server on $DB, sets SERVER_PID and PORT, publishes the port.
start_server() {
    local generation=$1 i line=""
    "$SERVER" --port 0 --database "$DB" --log-level warning --heartbeat-interval 1 \
        >"$WORK/server-$generation.out" 2>"$WORK/server-$generation.err" &
    SERVER_PID=$!
    for ((i = 0; i < 100; i++)); do
        line=$(head -n 1 "$WORK/server-$generation.out" 2>/dev/null)
        [[ -z $line ]] || break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [[ $line =~ ^listening\ on\ http://127\.0\.0\.1:([0-9]+)$ ]]; then
        PORT=${BASH_REMATCH[1]}
        echo "$generation $PORT" >"$WORK/port.new"
        mv "$WORK/port.new" "$WORK/port"
        return 0
    fi
    echo "server did not start; stderr:" >&2
    tail -n 20 "$WORK/server-$generation.err" >&2 || true
    stop_pid "$SERVER_PID"
    SERVER_PID=""
    return 1
}

kill_server() { # SIGKILL, as a crash; the subscriber waits until the port file is back
    rm -f "$WORK/port"
    kill -KILL "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

# --- checks -------------------------------------------------------------------------------------

# integrity_ok URI: PRAGMA integrity_check answers exactly "ok".
integrity_ok() {
    local answer
    answer=$(timeout 30 sqlite3 "$1" 'PRAGMA integrity_check;' 2>&1) || true
    [[ $answer == ok ]] || { echo "  integrity_check: $answer" | head -n 5; return 1; }
}

# record_results: turns the verifier's PASS|/FAIL|/INFO| lines into checks.
record_results() {
    local line seen=0
    while IFS= read -r line; do
        case $line in
            PASS\|*) pass "${line#PASS|}"; seen=1 ;;
            FAIL\|*) fail "${line#FAIL|}"; seen=1 ;;
            INFO\|*) echo "${line#INFO|}" ;;
            *) echo "  $line" ;;
        esac
    done
    ((seen)) || fail "the verifier reported nothing"
}

verify_round() { # verify_round ROUND: the verifier's checks, and a failure if it broke down
    local status=0
    timeout 30 python3 "$CLIENT" verify "$WORK" "$PORT" "$1" >"$WORK/verify-$1.out" 2>&1 || status=$?
    record_results <"$WORK/verify-$1.out"
    ((status == 0)) || fail "round $1: the verifier stopped with status $status"
}

random_delay() { # 0.3 to 2.5 seconds
    python3 -c 'import random; print(f"{random.uniform(0.3, 2.5):.2f}")'
}

crash_round() {
    local round=$1 delay started=$SECONDS
    delay=$(random_delay)
    timeout 20 python3 "$CLIENT" write "$WORK" "$PORT" "$round" 8 2>"$WORK/writer-$round.err" &
    WRITER_PID=$!
    sleep "$delay"
    kill_server
    echo "# round $round: killed; the WAL file had $(stat -c %s "$DB-wal" 2>/dev/null || echo no) bytes"
    wait "$WRITER_PID" || fail "round $round: the writer exited with status $? ($(tail -n 1 "$WORK/writer-$round.err"))"
    WRITER_PID=""
    if ! start_server "$round"; then
        fail "round $round: the server restarts on the database after kill -9 at ${delay} s"
        return 1
    fi
    pass "round $round: the server restarts on the database after kill -9 at ${delay} s"
    verify_round "$round"
    check "round $round: PRAGMA integrity_check is ok (read-only, beside the running server)" \
        integrity_ok "file:$DB?mode=ro"
    echo "# round $round took $((SECONDS - started)) s"
}

wal_empty_or_gone() { [[ ! -s $DB-wal ]]; }

# --- run ----------------------------------------------------------------------------------------

echo "# $NAME: $ROUNDS rounds on $DB"
start_server 0 || die "the server does not start"
timeout 20 python3 "$CLIENT" setup "$WORK" "$PORT" || die "cannot create the library and the watched book"
python3 "$CLIENT" subscribe "$WORK" 2>"$WORK/subscriber.err" &
# shellcheck disable=SC2034 # stopped by the harness's cleanup, which reads the names in CLEANUP_PIDS
SUBSCRIBER_PID=$!

for ((round = 1; round <= ROUNDS; round++)); do
    crash_round "$round" || break
done

if [[ -n $SERVER_PID ]]; then
    status=0
    started=$(date +%s%N)
    stop_server || status=$?
    check "SIGTERM stops the server with exit status 0 (got $status, in $((($(date +%s%N) - started) / 1000000)) ms)" \
        test "$status" = 0
    check "the WAL is checkpointed on the clean shutdown: ${DB##*/}-wal is empty or gone" wal_empty_or_gone
    check "PRAGMA integrity_check is ok on the closed database" integrity_ok "file:$DB?mode=ro"
fi

echo "$NAME: $passed passed, $failed failed"
((failed == 0))
