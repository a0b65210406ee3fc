#!/usr/bin/env bash
# Real-client checks of the Server-Sent Events streams, against a running library-server:
#
#   1. curl: a book's event stream (`fields=title`) gets a snapshot, one change per PATCH and a
#      delete, and then ends by itself; `?lastEventId=` and `Last-Event-ID` replay without a snapshot.
#   2. headless Chromium: a page's `EventSource` gets the snapshot and the changes; the server is
#      stopped with SIGTERM and restarted on the same port and database; the browser reconnects by
#      itself (sending Last-Event-ID), gets the later changes with no second snapshot, and after the
#      book is deleted stops reconnecting. This server runs with `--read-token`, and the page passes
#      the token as `?access_token=` (EventSource cannot send headers); without it the stream is a
#      401, and the token never shows in the server's log.
#   3. headless Chromium, `GET /events` (many watches on one stream): one page opens ONE
#      `EventSource` with 20 `watch=/books/{id}?fields=title`, gets the 20 snapshots in its first
#      frame, then issues REST calls itself with fetch (20 PATCHes, then a GET /books) which must
#      complete while the stream is open (20 EventSources would take every one of the browser's 6
#      connections to the origin and stall them), and sees the 20 new titles come down the stream
#      in frames whose ids strictly increase. It then changes its watch set the documented way:
#      closes the stream and opens one with 21 watches and `lastEventId=<last id>`; only the new
#      watch gets a snapshot, the 20 old ones resume (a title PATCHed while closed comes as a
#      change). Last, a control: with 20 single-book EventSources open, a fetch does stall. The
#      page writes its verdicts into the DOM ("ok NAME" / "FAIL NAME (why)" lines, then "done").
#
# Usage: scripts/sse-clients.sh [SERVER_BINARY]   (or SERVER=... ; default .build/debug/library-server)
# Installs curl and Debian's chromium with apt-get when they are missing (needs root).
# Only ever talks to 127.0.0.1. Prints "sse-clients: N passed, M failed"; exits non-zero on failure.
#
# How the browser check works: `chromium --headless=new --dump-dom` prints the DOM once the page's
# load event has fired. The page holds its load event back with an async <script> whose file is a
# named pipe (FIFO): Chromium's read blocks until this script opens the pipe for writing and closes
# it. Meanwhile the page records every event in the DOM and also logs it with console.log, which
# `--enable-logging=stderr` copies to Chromium's stderr as it happens; this script watches that log
# to know when to act (connected, change arrived, reconnected), then releases the pipe and checks
# the DOM that Chromium dumps. (`--virtual-time-budget` does not work here: virtual time does not
# advance while a fetch is pending, and an EventSource always is, so Chromium never dumps.)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVER=${1:-${SERVER:-$ROOT/.build/debug/library-server}}
[[ $SERVER == /* ]] || SERVER=$PWD/$SERVER
TIME_LIMIT=${SSE_CLIENTS_TIME_LIMIT:-480}   # seconds for everything after the installs (normally ~15)
NAME=sse-clients
PASS_PREFIX="ok   - "   # "ok" lines, "FAIL" lines and notes line up
NOTE_PREFIX="       "
# shellcheck source-path=SCRIPTDIR source=lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"

# --- tools -------------------------------------------------------------------------------------

missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if ((${#missing[@]} > 0)); then
    [[ $(id -u) == 0 ]] || die "missing ${missing[*]}, and only root can install them"
    echo "sse-clients: installing ${missing[*]}"
    timeout 300 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        >/dev/null
    for tool in curl chromium; do
        command -v "$tool" >/dev/null 2>&1 || die "$tool is still not on PATH after apt-get install"
    done
fi
[[ -x $SERVER ]] || die "no server binary at $SERVER (pass it as the first argument or in SERVER)"

# --- bookkeeping and cleanup -------------------------------------------------------------------

harness_start   # WORK, the traps and the watchdog (scripts/lib/harness.sh)
SERVER_PID=""
CURL_PID=""
CHROMIUM_PID=""
CLEANUP_PIDS+=(CURL_PID CHROMIUM_PID SERVER_PID)

STARTED=$SECONDS

# --- helpers -----------------------------------------------------------------------------------

URL=""
SERVER_EXTRA=()   # more flags for start_server
# start_server NAME PORT DATABASE: starts the server, sets SERVER_PID and URL.
start_server() {
    local name=$1 port=$2 database=$3 i line=""
    "$SERVER" --port "$port" --database "$database" --log-level warning --cors-origin '*' \
        --heartbeat-interval 1 ${SERVER_EXTRA[@]+"${SERVER_EXTRA[@]}"} >"$WORK/$name.out" 2>"$WORK/$name.err" &
    SERVER_PID=$!
    for ((i = 0; i < 200; i++)); do
        # (2>/dev/null: the file is not there until the background shell has opened it)
        if [[ $(wc -l 2>/dev/null <"$WORK/$name.out") -ge 1 ]]; then
            line=$(head -n 1 "$WORK/$name.out")
            break
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [[ $line =~ ^listening\ on\ (http://127\.0\.0\.1:[0-9]+)$ ]]; then
        URL=${BASH_REMATCH[1]}
        return 0
    fi
    echo "server $name did not start; stdout: $(cat "$WORK/$name.out"); stderr:" >&2
    tail -n 20 "$WORK/$name.err" >&2 || true
    stop_pid "$SERVER_PID"
    SERVER_PID=""
    return 1
}

# request METHOD PATH [JSON]: prints the body then a line with the status code.
request() {
    local method=$1 path=$2 body=${3:-}
    local args=(-sS --max-time 10 -X "$method" -w '\n%{http_code}')
    [[ -z $body ]] || args+=(-H 'Content-Type: application/json' --data-binary "$body")
    curl "${args[@]}" "$URL$path" || echo $'\n000'
}
status_of() { tail -n 1 <<<"$1"; }
# id_of JSON: the first "id" member (a string or a number).
id_of() {
    local text=$1
    [[ $text =~ \"id\":\"?([^\",}]+) ]] && echo "${BASH_REMATCH[1]}"
}

# make_book TITLE: creates a library and a book in it; sets BOOK.
BOOK=""
make_book() {
    local response library
    BOOK=""
    response=$(request POST /libraries '{"name":"sse-clients"}')
    [[ $(status_of "$response") == 201 ]] || { echo "POST /libraries: $response" >&2; return 1; }
    library=$(id_of "$response") || return 1
    [[ $library =~ ^[0-9]+$ ]] || library="\"$library\""
    response=$(request POST /books "{\"libraryId\":$library,\"title\":\"$1\"}")
    [[ $(status_of "$response") == 201 ]] || { echo "POST /books: $response" >&2; return 1; }
    BOOK=$(id_of "$response")
}

patch_title() { # patch_title TITLE: 0 when the server answered 200
    local response
    response=$(request PATCH "/books/$BOOK" "{\"title\":\"$1\"}")
    [[ $(status_of "$response") == 200 ]] || { echo "PATCH /books/$BOOK: $response" >&2; return 1; }
}

patch_titles() { # patch_titles TITLE...: one PATCH per title, back to back
    local title
    for title in "$@"; do patch_title "$title" || return 1; done
}

delete_book() {
    local response
    response=$(request DELETE "/books/$BOOK")
    [[ $(status_of "$response") == 20[04] ]] || { echo "DELETE /books/$BOOK: $response" >&2; return 1; }
}

# wait_until SECONDS COMMAND...: polls every 0.1 s.
wait_until() {
    local tenths=$(($1 * 10)) i
    shift
    for ((i = 0; i < tenths; i++)); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}

# events FILE: the events in an SSE transcript, one per line as "TYPE ID DATA", in order.
events() {
    awk '
        /^event: / { type = substr($0, 8) }
        /^id: / { id = substr($0, 5) }
        /^data: / { data = substr($0, 7) }
        /^$/ { if (type != "") print type " " id " " data; type = ""; id = ""; data = "" }
    ' "$1"
}

# ids_increase: reads "TYPE ID DATA" lines; true when the ids only go up.
ids_increase() {
    awk 'BEGIN { last = -1 } { if ($2 + 0 <= last) exit 1; last = $2 + 0 }'
}

# dropped_and_reopened FILE: the page record has "error 0" then "open" after b3 and before r1.
dropped_and_reopened() {
    awk '
        index($0, "\"title\":\"b3\"}") { after_b3 = 1 }
        after_b3 && $0 == "error 0" { dropped = 1 }
        dropped && $0 == "open" { reopened = 1 }
        index($0, "\"title\":\"r1\"}") { found = 1; exit !reopened }
        END { if (!found) exit 1 }
    ' "$1"
}

title_json() { echo "{\"id\":\"$BOOK\",\"title\":\"$1\"}"; }

# =============================================================================================
# 1. curl
# =============================================================================================
echo "# curl"
if start_server curl-server 0 :memory: && make_book "first"; then
    stream=$WORK/curl-stream.txt
    headers=$WORK/curl-headers.txt
    curl -sN --max-time 60 -D "$headers" -H 'Origin: http://sse-clients.invalid' \
        "$URL/books/$BOOK/events?fields=title" >"$stream" 2>"$WORK/curl.err" &
    CURL_PID=$!
    check "curl: the stream starts with retry: 2000 and a snapshot" \
        wait_until 10 grep -q '^event: snapshot' "$stream"
    check "curl: 200 text/event-stream with Access-Control-Allow-Origin: *" \
        bash -c 'grep -q "^HTTP/1.1 200" "$1" && grep -qi "^content-type: text/event-stream" "$1" &&
                 grep -qi "^access-control-allow-origin: \*" "$1"' _ "$headers"
    check "curl: PATCH the title twice" patch_titles second third
    check "curl: DELETE the book" delete_book
    curl_status=0
    if wait_until 10 bash -c '! kill -0 "$1" 2>/dev/null' _ "$CURL_PID"; then
        wait "$CURL_PID" || curl_status=$?
        check "curl: the stream ended by itself after the delete (curl exit 0, got $curl_status)" \
            test "$curl_status" = 0
    else
        fail "curl: the stream did not end within 10 s of the delete"
        stop_pid "$CURL_PID"
    fi
    CURL_PID=""
    events "$stream" >"$WORK/curl-events.txt"
    mapfile -t got <"$WORK/curl-events.txt"
    count=${#got[@]}
    while ((${#got[@]} < 4)); do got+=(""); done   # (set -u: missing events compare as empty)
    check "curl: first block is retry: 2000" test "$(head -n 1 "$stream")" = "retry: 2000"
    check "curl: snapshot, change, change, delete in that order (got $count events)" \
        test "$(cut -d ' ' -f 1 "$WORK/curl-events.txt" | tr '\n' ' ')" = "snapshot change change delete "
    check "curl: snapshot carries the first title" test "${got[0]#* * }" = "$(title_json first)"
    check "curl: change events carry the new titles" \
        test "${got[1]#* * }|${got[2]#* * }" = "$(title_json second)|$(title_json third)"
    check "curl: delete event carries the book id" test "${got[3]#* * }" = "{\"id\":\"$BOOK\"}"
    check "curl: event ids increase" ids_increase <"$WORK/curl-events.txt"
    if ((failed > 0)); then
        echo "--- stream:"
        cat "$stream"
        echo "---"
    fi

    # Resume on a second book: the missed changes come back, without a snapshot.
    if make_book "one"; then
        snapshot_id=$(curl -sN --max-time 2 "$URL/books/$BOOK/events?fields=title" |
            awk '/^event: snapshot/ { s = 1 } s && /^id: / { print substr($0, 5); exit }') || true
        patch_title two && patch_title three || fail "curl: PATCH the second book"
        for way in query header; do
            if [[ $way == query ]]; then
                curl -sN --max-time 1.5 "$URL/books/$BOOK/events?fields=title&lastEventId=$snapshot_id" \
                    >"$WORK/resume-$way.txt" || true
            else
                curl -sN --max-time 1.5 -H "Last-Event-ID: $snapshot_id" "$URL/books/$BOOK/events?fields=title" \
                    >"$WORK/resume-$way.txt" || true
            fi
            check "curl: resume by $way after id ${snapshot_id:-?} replays both changes, no snapshot" \
                test "$(events "$WORK/resume-$way.txt" | cut -d ' ' -f 1,3- | tr '\n' '|')" \
                = "change $(title_json two)|change $(title_json three)|"
        done
    else
        fail "curl: create a second book"
    fi
    check "curl: server exits with status 0 on SIGTERM" stop_server 10
else
    fail "curl: start the server and create a book"
    stop_pid "$SERVER_PID"
    SERVER_PID=""
fi

# =============================================================================================
# 2. headless Chromium
# =============================================================================================
echo "# chromium ($(chromium --version 2>/dev/null | head -n 1))"
CHROMIUM_FLAGS=(--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run
    --no-default-browser-check --disable-background-networking --disable-component-update
    --disable-extensions --disable-sync --enable-logging=stderr)
page=$WORK/page/sse-page.html
gate=$WORK/page/gate.js
mkdir -p "$WORK/page" "$WORK/profile"
mkfifo "$gate"
cat >"$page" <<'HTML'
<!doctype html>
<html>
<head><meta charset="utf-8"><title>sse-clients</title></head>
<body>
<pre id="events"></pre>
<script>
  // ?server=http://127.0.0.1:PORT&book=ID: follows the book's title and records every event.
  const query = new URLSearchParams(location.search);
  const list = document.getElementById('events');
  function record(line) {
    list.textContent += line + '\n';
    console.log('sse-page ' + line);
  }
  // ?token=T: the server's read token, sent as access_token (EventSource cannot send headers).
  const token = query.get('token') ? '&access_token=' + encodeURIComponent(query.get('token')) : '';
  const source = new EventSource(
    query.get('server') + '/books/' + encodeURIComponent(query.get('book')) + '/events?fields=title' + token);
  source.onopen = () => record('open');
  source.onerror = () => record('error ' + source.readyState);
  for (const type of ['snapshot', 'change', 'delete']) {
    source.addEventListener(type, (event) => record(type + ' ' + event.lastEventId + ' ' + event.data));
  }
</script>
<!-- A named pipe: the load event (and so --dump-dom) waits until the test script releases it. -->
<script async src="gate.js"></script>
</body>
</html>
HTML

console=$WORK/chromium.log
dom=$WORK/dom.html
# page_logged WHAT [TEXT] [COUNT]: the page has console-logged COUNT (default 1) records that start
# with WHAT ("snapshot", "change", "open", "error 2", ...) and contain TEXT (fixed strings).
page_logged() {
    [[ $( (grep -F "sse-page $1" "$console" 2>/dev/null || true) | grep -cF -- "${2:-}") -ge ${3:-1} ]]
}
# wait_page SECONDS WHAT [TEXT] [COUNT]: waits for page_logged; gives up at once when the page's
# EventSource has failed for good (readyState CLOSED) or Chromium has gone.
wait_page() {
    local tenths=$(($1 * 10)) i
    shift
    for ((i = 0; i < tenths; i++)); do
        page_logged "$@" && return 0
        [[ $1 != "error 2" ]] && page_logged "error 2" && return 1
        kill -0 "$CHROMIUM_PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
release_gate() { timeout 5 bash -c ': >"$1"' _ "${1:-$gate}"; }   # release_gate [FIFO]

database=$WORK/library.sqlite
READ_TOKEN="sse-clients-read-$RANDOM$RANDOM"
SERVER_EXTRA=(--read-token "$READ_TOKEN")
# stream_status [CURL ARGS...]: the status of GET the book's stream (the stream cut after 1 s).
stream_status() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$@" "$URL/books/$BOOK/events?fields=title" || true
}
if start_server browser-server 0 "$database" && make_book "b0"; then
    port=${URL##*:}
    check "curl: with --read-token, the stream without a token is a 401" test "$(stream_status)" = 401
    check "curl: with a wrong access_token, a 401" \
        test "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 1 \
            "$URL/books/$BOOK/events?fields=title&access_token=wrong" || true)" = 401
    check "curl: with the read token as a bearer header, the stream opens" \
        test "$(stream_status -H "Authorization: Bearer $READ_TOKEN")" = 200
    page_url="file://$page?server=$URL&book=$BOOK&token=$READ_TOKEN"
    timeout -k 5 240 chromium "${CHROMIUM_FLAGS[@]}" --user-data-dir="$WORK/profile" \
        --dump-dom "$page_url" >"$dom" 2>"$console" &
    CHROMIUM_PID=$!

    check "chromium: the page's EventSource gets the snapshot" wait_page 60 "snapshot " "\"title\":\"b0\"}"
    for title in b1 b2 b3; do
        if patch_title "$title"; then
            check "chromium: change to $title arrives" wait_page 10 change "\"title\":\"$title\"}"
        else
            fail "chromium: PATCH title $title"
        fi
    done

    check "chromium: server stops with status 0 on SIGTERM while the page is connected" stop_server 10
    opens_before=$(grep -cF "sse-page open" "$console" || true)
    if start_server browser-server-2 "$port" "$database"; then
        pass "chromium: server restarted on the same port ($port) and database"
        reconnected_early=$(($(grep -cF "sse-page open" "$console" || true) > opens_before))
        if patch_title r1; then
            if ((reconnected_early)); then
                note "(the page had reconnected before the PATCH: r1 arrives live, not by replay)"
            elif page_logged snapshot; then
                note "(r1 was written before the page reconnected: it must come by replay)"
            fi
            check "chromium: the page reconnects by itself" wait_page 15 open "" $((opens_before + 1))
            check "chromium: change to r1 arrives after the reconnect" \
                wait_page 10 change "\"title\":\"r1\"}"
        else
            fail "chromium: PATCH title r1 after the restart"
        fi
        if patch_title r2; then
            check "chromium: change to r2 arrives live" wait_page 10 change "\"title\":\"r2\"}"
        else
            fail "chromium: PATCH title r2"
        fi
        if delete_book; then
            check "chromium: delete arrives" wait_page 10 "delete "
            # The stream ends; EventSource reconnects (with Last-Event-ID), gets 404 and gives up.
            check "chromium: after the delete, EventSource gives up (readyState CLOSED)" \
                wait_page 10 "error 2"
        else
            fail "chromium: DELETE the book"
        fi
    else
        fail "chromium: restart the server on port $port"
    fi

    # Let the load event fire: Chromium dumps the DOM and exits.
    release_gate || note "(the gate was not being read: Chromium had already finished or failed)"
    chromium_status=0
    if wait_until 30 bash -c '! kill -0 "$1" 2>/dev/null' _ "$CHROMIUM_PID"; then
        wait "$CHROMIUM_PID" || chromium_status=$?
    else
        chromium_status=124
    fi
    CHROMIUM_PID=""
    check "chromium: dumped the DOM and exited by itself (status $chromium_status)" \
        bash -c 'test "$1" = 0 && grep -q "<pre id=\"events\">" "$2"' _ "$chromium_status" "$dom"

    # The events as the DOM holds them: "TYPE ID DATA", "open" and "error STATE" lines.
    sed -n '/<pre id="events">/,/<\/pre>/p' "$dom" | sed -e 's/.*<pre id="events">//' -e 's/<\/pre>.*//' |
        sed -e 's/&quot;/"/g' -e 's/&lt;/</g' -e 's/&gt;/>/g' -e 's/&amp;/\&/g' | grep -v '^$' \
        >"$WORK/dom-lines.txt" || true
    grep -E '^(snapshot|change|delete) ' "$WORK/dom-lines.txt" >"$WORK/dom-events.txt" || true
    expected="snapshot $(title_json b0)|change $(title_json b1)|change $(title_json b2)|change $(title_json b3)|"
    expected+="change $(title_json r1)|change $(title_json r2)|delete {\"id\":\"$BOOK\"}|"
    check "chromium DOM: snapshot b0, changes b1 b2 b3 r1 r2, delete; one snapshot only" \
        test "$(cut -d ' ' -f 1,3- "$WORK/dom-events.txt" | tr '\n' '|')" = "$expected"
    check "chromium DOM: event ids (lastEventId) increase across the restart" \
        ids_increase <"$WORK/dom-events.txt"
    check "chromium DOM: the connection dropped (error, readyState CONNECTING) and reopened between b3 and r1" \
        dropped_and_reopened "$WORK/dom-lines.txt"
    check "chromium DOM: exactly two opens" test "$(grep -c '^open$' "$WORK/dom-lines.txt" || true)" = 2
    check "chromium DOM: after the delete only errors, the last with readyState CLOSED" \
        bash -c 'sed "1,/^delete /d" "$1" | tr "\n" "|" | grep -Eq "^(error [01]\|)*error 2\|$"' _ "$WORK/dom-lines.txt"
    if ((failed > 0)); then
        echo "--- page record (DOM):"
        cat "$WORK/dom-lines.txt"
        echo "--- chromium console (sse-page lines):"
        grep -F 'sse-page' "$console" | sed 's/, source: .*//' || true
        echo "---"
    fi
    [[ -z $SERVER_PID ]] || check "chromium: server exits with status 0 on SIGTERM" stop_server 10
    check "chromium: the read token never shows in the server's log" \
        bash -c '! grep -qF -- "$1" "$2"/browser-server*.err' _ "$READ_TOKEN" "$WORK"
else
    fail "chromium: start the server with a database file and create a book"
fi

# =============================================================================================
# 3. headless Chromium, GET /events: 20 watches on one EventSource
# =============================================================================================
echo "# chromium: /events, 20 watches on one EventSource"
mux_page=$WORK/mux/mux-page.html
mux_gate=$WORK/mux/gate.js
mux_console=$WORK/mux-chromium.log
mux_dom=$WORK/mux-dom.html
MUX_VERDICTS=15   # the "ok"/"FAIL" lines the page writes when it runs to its end
mkdir -p "$WORK/mux" "$WORK/mux-profile"
mkfifo "$mux_gate"
cat >"$mux_page" <<'HTML'
<!doctype html>
<html>
<head><meta charset="utf-8"><title>sse-clients /events</title></head>
<body>
<pre id="verdicts"></pre>
<pre id="frames"></pre>
<script>
  // ?server=http://127.0.0.1:PORT&library=ID&books=ID,…(20)&extra=ID: the books are titled mux-0 …
  // mux-19 and mux-extra, all in the library. Writes "ok NAME" / "FAIL NAME (why)" lines, then
  // "done", into #verdicts, and a line per frame received into #frames.
  const query = new URLSearchParams(location.search);
  const server = query.get('server');
  const books = query.get('books').split(',');
  const extra = query.get('extra');
  const watchOf = (id) => '/books/' + id + '?fields=title';
  const verdicts = document.getElementById('verdicts');
  const frameList = document.getElementById('frames');
  function log(line) { console.log('mux-page ' + line); }
  function verdict(ok, name, why) {
    const line = (ok ? 'ok ' : 'FAIL ') + name + (ok || why === undefined ? '' : ' (' + why + ')');
    verdicts.textContent += line + '\n';
    log(line);
    return ok;
  }
  // until(predicate, ms): true as soon as predicate() holds, false after ms (polls every 20 ms).
  async function until(predicate, ms) {
    const end = performance.now() + ms;
    for (;;) {
      if (predicate()) return true;
      if (performance.now() >= end) return false;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  // A frame id is "<seq>.<tag>", the tag each watch's tag (the first 96 bits of the SHA-256 of
  // its UTF-8 bytes, in 16 base64url characters), sorted and concatenated.
  async function watchTag(text) {
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
    return btoa(String.fromCharCode(...digest.slice(0, 12))).replaceAll('+', '-').replaceAll('/', '_');
  }
  const tagOf = async (watches) => (await Promise.all(watches.map(watchTag))).sort().join('');
  const seqOf = (id) => (/^[0-9]+\.[A-Za-z0-9_-]+$/.test(id) ? Number(id.split('.')[0]) : NaN);
  // increasing(frames, after): every frame id is well formed and the seqs strictly increase from after.
  function increasing(frames, after) {
    let last = after;
    for (const frame of frames) {
      const seq = seqOf(frame.id);
      if (!(seq > last)) return false;
      last = seq;
    }
    return true;
  }
  const ids = (frames) => frames.map((frame) => frame.id.split('.')[0]).join(' ');

  // rest(method, path, body, ms): the response's status and JSON; throws after ms (default 10 s).
  async function rest(method, path, body, ms) {
    const init = { method, signal: AbortSignal.timeout(ms || 10000) };
    if (body !== undefined) {
      init.headers = { 'Content-Type': 'application/json' };
      init.body = JSON.stringify(body);
    }
    const response = await fetch(server + path, init);
    const text = await response.text();
    return { status: response.status, json: text ? JSON.parse(text) : null };
  }

  // open(name, watches, lastId): one EventSource on /events; keeps every frame ({id, entries})
  // and the latest title the stream gave each book.
  function open(name, watches, lastId) {
    const params = new URLSearchParams(watches.map((watch) => ['watch', watch]));
    if (lastId) params.append('lastEventId', lastId);
    const stream = { frames: [], titles: {}, errors: 0, closed: false };
    const source = new EventSource(server + '/events?' + params);
    stream.source = source;
    source.onopen = () => log(name + ' open');
    source.onerror = () => {
      stream.errors += 1;
      stream.closed = source.readyState === EventSource.CLOSED;
      log(name + ' error ' + source.readyState);
    };
    source.onmessage = (event) => {
      let entries = null;
      try { entries = JSON.parse(event.data); } catch (error) { /* kept as null: checked below */ }
      stream.frames.push({ id: event.lastEventId, entries });
      const summary = Array.isArray(entries)
        ? entries.map((entry) => entry.event + ' ' + (entry.data && (entry.data.title || entry.data.id))).join(', ')
        : 'NOT A JSON ARRAY: ' + event.data;
      frameList.textContent += name + ' ' + event.lastEventId + ': ' + summary + '\n';
      log(name + ' frame ' + event.lastEventId.split('.')[0]);   // (the tag is 8 hex digits a watch)
      for (const entry of Array.isArray(entries) ? entries : []) {
        if (entry && entry.data && typeof entry.data.title === 'string') stream.titles[entry.data.id] = entry.data.title;
      }
    };
    return stream;
  }
  const entriesOf = (stream) => stream.frames.flatMap((frame) => frame.entries || []);

  async function main() {
    const watches = books.map(watchOf);
    const created = books.map((_, index) => 'mux-' + index);
    const patched = books.map((_, index) => 'mux-' + index + '-patched');

    // 1. One EventSource, 20 watches: the first frame is the 20 snapshots.
    const first = open('s1', watches);
    const arrived = await until(() => first.frames.length > 0 || first.closed, 15000) && first.frames.length > 0;
    if (!verdict(arrived, 'the first frame arrives within 15 s', 'errors: ' + first.errors)) return;
    const entries = first.frames[0].entries;
    verdict(Array.isArray(entries) && entries.length === 20 && watches.every((watch, index) =>
        entries.some((entry) => entry.watch === watch && entry.event === 'snapshot' &&
            entry.data.id === books[index] && entry.data.title === created[index])),
      'the first frame holds the 20 snapshots, one per watch, titles mux-0 … mux-19',
      JSON.stringify(entries).slice(0, 300));
    verdict(first.frames[0].id.endsWith('.' + await tagOf(watches)),
      'the frame id is <seq>.<the 20 watches\' tags, sorted>', first.frames[0].id);

    // 2. REST calls from the page while the stream is open: with the stream on one connection
    // they have the 5 others (20 EventSources would hold all 6, and these would wait forever).
    let started = performance.now();
    try {
      const statuses = (await Promise.all(books.map((id, index) =>
        rest('PATCH', '/books/' + encodeURIComponent(id), { title: patched[index] })))).map((answer) => answer.status);
      verdict(statuses.every((status) => status === 200),
        '20 PATCHes from the page complete while the stream is open (' + Math.round(performance.now() - started) + ' ms)',
        statuses.join(' '));
    } catch (error) {
      verdict(false, '20 PATCHes from the page complete while the stream is open', error.name + ': ' + error.message);
    }
    started = performance.now();
    try {
      const answer = await rest('GET', '/books?libraryId=' + encodeURIComponent(query.get('library')) + '&limit=100&fields=id,title');
      const items = (answer.json && answer.json.items) || [];
      verdict(answer.status === 200 && books.every((id, index) =>
          items.some((item) => item.id === id && item.title === patched[index])),
        'then GET /books from the page completes (' + Math.round(performance.now() - started) + ' ms) and lists the 20 new titles',
        answer.status + ' ' + JSON.stringify(answer.json).slice(0, 300));
    } catch (error) {
      verdict(false, 'then GET /books from the page completes', error.name + ': ' + error.message);
    }

    // 3. The stream delivers the 20 new titles.
    const delivered = () => books.every((id, index) => first.titles[id] === patched[index]);
    verdict(await until(delivered, 15000), 'the stream delivers the 20 PATCHed titles',
      books.filter((id, index) => first.titles[id] !== patched[index]).length + ' differ');
    verdict(increasing(first.frames, -1), 'the frame ids strictly increase (' + first.frames.length + ' frames)',
      ids(first.frames));
    const later = first.frames.slice(1);
    const tag20 = await tagOf(watches);
    verdict(later.every((frame) => frame.id.endsWith('.' + tag20) && Array.isArray(frame.entries) &&
        frame.entries.every((entry) => entry.event === 'change' && watches.includes(entry.watch) &&
            Object.keys(entry.data).sort().join() === 'id,title')),
      'the later frames hold only changes {id, title} of the 20 watches, under the same tag',
      later.map((frame) => frame.id + ' ' + JSON.stringify(frame.entries)).join(' | ').slice(0, 300));
    verdict(first.errors === 0, 'the stream never failed or reconnected', first.errors + ' errors');

    // 4. Change the watch set: close, PATCH a watched book meanwhile, open the 20 + one new book
    // with lastEventId. Only the new watch gets a snapshot; book 0 resumes with the change it missed.
    const lastId = first.frames[first.frames.length - 1].id;
    first.source.close();
    let answer = await rest('PATCH', '/books/' + encodeURIComponent(books[0]), { title: 'mux-0-missed' });
    if (answer.status !== 200) verdict(false, 'PATCH book 0 while no stream is open', answer.status);
    const watches21 = watches.concat([watchOf(extra)]);
    const second = open('s2', watches21, lastId);
    const resumed = () => second.titles[extra] === 'mux-extra' && second.titles[books[0]] === 'mux-0-missed';
    verdict(await until(resumed, 15000),
      'reopened with 21 watches and lastEventId=<last id>: the new book\'s snapshot and book 0\'s missed title arrive',
      JSON.stringify(second.titles));
    // A live change after those: anything else the resume sent comes before it on the stream.
    answer = await rest('PATCH', '/books/' + encodeURIComponent(extra), { title: 'mux-extra-live' });
    verdict(answer.status === 200 && await until(() => second.titles[extra] === 'mux-extra-live', 10000),
      'a live change of the new book arrives on the reopened stream', answer.status + ' ' + JSON.stringify(second.titles));
    const entries2 = entriesOf(second);
    const snapshots = entries2.filter((entry) => entry.event === 'snapshot');
    verdict(snapshots.length === 1 && snapshots[0].watch === watchOf(extra),
      'only the new watch got a snapshot (the 20 old ones resumed without one)',
      snapshots.map((entry) => entry.watch).join(' '));
    const old = entries2.filter((entry) => entry.watch !== watchOf(extra));
    verdict(old.length === 1 && old[0].watch === watches[0] && old[0].event === 'change' &&
        old[0].data.title === 'mux-0-missed',
      'of the old watches only book 0 sent something: a change to the title it missed',
      JSON.stringify(old).slice(0, 300));
    const tag21 = await tagOf(watches21);
    verdict(increasing(second.frames, seqOf(lastId)) &&
        second.frames.every((frame) => frame.id.endsWith('.' + tag21)),
      'the reopened stream\'s frame ids go on increasing past ' + lastId.split('.')[0] + ', under the 21 watches\' tag',
      second.frames.map((frame) => frame.id).join(' '));
    second.source.close();

    // 5. Control: what the single stream spares. 20 EventSources, one per book, take every one
    // of the browser's 6 connections to the origin; a fetch then waits (here, 3 s in vain).
    let opened = 0;
    const singles = books.map((id) => {
      const source = new EventSource(server + '/books/' + encodeURIComponent(id) + '/events?fields=title');
      source.onopen = () => { opened += 1; };
      return source;
    });
    await until(() => opened >= 6, 10000);
    await new Promise((resolve) => setTimeout(resolve, 300));   // (more would open now, if they could)
    let stalled = false, outcome = '';
    try {
      outcome = 'answered ' + (await rest('GET', '/books?limit=1', undefined, 3000)).status;
    } catch (error) {
      stalled = error.name === 'TimeoutError';
      outcome = error.name + ': ' + error.message;
    }
    verdict(stalled, 'control: with 20 single-book EventSources (' + opened + ' connected) a fetch stalls for 3 s', outcome);
    for (const source of singles) source.close();
  }
  main()
    .catch((error) => verdict(false, 'the page script ran to its end', error.name + ': ' + error.message))
    .finally(() => { verdicts.textContent += 'done\n'; log('done'); });
</script>
<!-- A named pipe: the load event (and so --dump-dom) waits until the test script releases it. -->
<script async src="gate.js"></script>
</body>
</html>
HTML

# make_mux_books: one library and 21 books in it, titled mux-0 … mux-19 and mux-extra; sets
# MUX_LIBRARY, MUX_BOOKS (the first 20) and MUX_EXTRA.
MUX_LIBRARY=""
MUX_BOOKS=()
MUX_EXTRA=""
make_mux_books() {
    local response library i title
    response=$(request POST /libraries '{"name":"sse-clients /events"}')
    [[ $(status_of "$response") == 201 ]] || { echo "POST /libraries: $response" >&2; return 1; }
    MUX_LIBRARY=$(id_of "$response") || return 1
    library=$MUX_LIBRARY
    [[ $library =~ ^[0-9]+$ ]] || library="\"$library\""
    for ((i = 0; i <= 20; i++)); do
        title=mux-$i
        ((i < 20)) || title=mux-extra
        response=$(request POST /books "{\"libraryId\":$library,\"title\":\"$title\"}")
        [[ $(status_of "$response") == 201 ]] || { echo "POST /books: $response" >&2; return 1; }
        if ((i < 20)); then MUX_BOOKS+=("$(id_of "$response")"); else MUX_EXTRA=$(id_of "$response"); fi
    done
}
# mux_page_over: the page has logged "done", or Chromium has gone.
mux_page_over() {
    grep -qF "mux-page done" "$mux_console" 2>/dev/null || ! kill -0 "$CHROMIUM_PID" 2>/dev/null
}
# pre_lines ID FILE: the lines of the DOM dump FILE's <pre id="ID">, unescaped, without blank ones.
pre_lines() {
    sed -n "/<pre id=\"$1\">/,/<\/pre>/p" "$2" | sed -e "s/.*<pre id=\"$1\">//" -e 's/<\/pre>.*//' |
        sed -e 's/&quot;/"/g' -e 's/&lt;/</g' -e 's/&gt;/>/g' -e 's/&amp;/\&/g' | grep -v '^$' || true
}

SERVER_EXTRA=()
if start_server mux-server 0 :memory: && make_mux_books; then
    pass "curl: created a library and 21 books for the page"
    mux_url="file://$mux_page?server=$URL&library=$MUX_LIBRARY&books=$(IFS=,; echo "${MUX_BOOKS[*]}")&extra=$MUX_EXTRA"
    timeout -k 5 240 chromium "${CHROMIUM_FLAGS[@]}" --user-data-dir="$WORK/mux-profile" \
        --dump-dom "$mux_url" >"$mux_dom" 2>"$mux_console" &
    CHROMIUM_PID=$!
    # The page bounds each of its own waits (about 100 s in all at worst).
    wait_until 150 mux_page_over || true
    check "chromium /events: the page ran its steps (logged done)" grep -qF "mux-page done" "$mux_console"

    release_gate "$mux_gate" || note "(the gate was not being read: Chromium had already finished or failed)"
    chromium_status=0
    if wait_until 30 bash -c '! kill -0 "$1" 2>/dev/null' _ "$CHROMIUM_PID"; then
        wait "$CHROMIUM_PID" || chromium_status=$?
    else
        chromium_status=124
    fi
    CHROMIUM_PID=""
    check "chromium /events: dumped the DOM and exited by itself (status $chromium_status)" \
        bash -c 'test "$1" = 0 && grep -q "<pre id=\"verdicts\">" "$2"' _ "$chromium_status" "$mux_dom"

    # The page's verdicts, one check each; then that they are all there, and the last line is "done".
    pre_lines verdicts "$mux_dom" >"$WORK/mux-verdicts.txt"
    while IFS= read -r line; do
        case $line in
        "ok "*) pass "chromium /events: ${line#ok }" ;;
        "FAIL "*) fail "chromium /events: ${line#FAIL }" ;;
        done) ;;
        *) fail "chromium /events: unexpected verdict line: $line" ;;
        esac
    done <"$WORK/mux-verdicts.txt"
    verdict_count=$(grep -cE '^(ok|FAIL) ' "$WORK/mux-verdicts.txt" || true)
    check "chromium /events: the page wrote all $MUX_VERDICTS verdicts (got $verdict_count), then done" \
        test "$verdict_count|$(tail -n 1 "$WORK/mux-verdicts.txt")" = "$MUX_VERDICTS|done"
    if ((failed > 0)); then
        echo "--- frames the page received (DOM):"
        pre_lines frames "$mux_dom"
        echo "--- chromium console (mux-page lines):"
        grep -F 'mux-page' "$mux_console" | sed 's/, source: .*//' || true
        echo "---"
    fi
    check "chromium /events: server exits with status 0 on SIGTERM" stop_server 10
else
    fail "chromium /events: start the server and create a library and 21 books"
    stop_pid "$SERVER_PID"
    SERVER_PID=""
fi

echo "# took $((SECONDS - STARTED)) s"
echo "sse-clients: $passed passed, $failed failed"
((failed == 0))
