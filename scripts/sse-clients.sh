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
release_gate() { timeout 5 bash -c ': >"$1"' _ "$gate"; }

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
    timeout -k 5 240 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --user-data-dir="$WORK/profile" --no-first-run --no-default-browser-check \
        --disable-background-networking --disable-component-update --disable-extensions \
        --disable-sync --enable-logging=stderr --dump-dom "$page_url" >"$dom" 2>"$console" &
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

echo "# took $((SECONDS - STARTED)) s"
echo "sse-clients: $passed passed, $failed failed"
((failed == 0))
