#!/usr/bin/env bash
# Server-Sent Events fan-out benchmark: N subscribers on one book, R title changes.
#
#   Benchmarks/fanout.sh [N=18000] [R=20]
#
# SERVER: the library-server binary (default .build/release/library-server under the repository
# root, built with `swift build -c release` when missing). Everything runs on 127.0.0.1: the server
# on a free port with an in-memory database, the load generator (Benchmarks/fanout/fanout.c,
# compiled with cc -O2 into a temporary directory) against it. Prints the server's memory per
# subscriber (VmRSS before the subscribers connect and with all of them connected) and the
# change-to-subscriber latency percentiles, then stops the server with SIGTERM and checks that it
# exits 0 within 15 seconds. Also prints the server's CPU time (user + system) spent during the
# rounds, which Benchmarks/bench.py divides by rounds and subscribers.
#
# SERVER_ARGS: more flags for the server (say --jwt-keys FILE --api-token T); API_TOKEN: the
# bearer token this script's own requests (setup, /metrics) and the PATCHes send; FANOUT_ARGS: more
# options for the load generator (say -T FILE: a token per subscriber). Benchmarks/tokens.py uses
# them for 18,000 subscribers each with a token of its own.
set -euo pipefail

N=${1:-18000}
R=${2:-20}
[[ $N =~ ^[0-9]+$ && $N -gt 0 ]] || { echo "usage: $0 [subscribers] [rounds]" >&2; exit 64; }
[[ $R =~ ^[0-9]+$ ]] || { echo "usage: $0 [subscribers] [rounds]" >&2; exit 64; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVER=${SERVER:-$ROOT/.build/release/library-server}
if [[ ! -x $SERVER ]]; then
    echo "== $SERVER is missing; building it"
    (cd "$ROOT" && swift build -c release --product library-server)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fanout.XXXXXX")
SERVER_PID=
FANOUT_PID=
TAIL_PID=
cleanup() {
    local status=$?
    if [[ -n $TAIL_PID ]]; then kill "$TAIL_PID" 2>/dev/null || true; fi
    if [[ -n $FANOUT_PID ]] && kill -0 "$FANOUT_PID" 2>/dev/null; then kill -KILL "$FANOUT_PID" 2>/dev/null || true; fi
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Both processes need a descriptor per subscriber.
ulimit -n "$(ulimit -Hn)"
echo "== open-file limit $(ulimit -n)"

cc -O2 -std=c99 -o "$WORK/fanout" "$ROOT/Benchmarks/fanout/fanout.c" -lm

# ---- server ----------------------------------------------------------------------------------
MAX_CONNECTIONS=19500
# shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
"$SERVER" --port 0 --database :memory: --log-level warning --max-connections "$MAX_CONNECTIONS" ${SERVER_ARGS:-} \
    >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
PORT=
for _ in $(seq 150); do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$WORK/server.out")
    [[ -n $PORT ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
if [[ -z $PORT ]]; then
    echo "the server did not report its port" >&2
    cat "$WORK/server.out" "$WORK/server.err" >&2
    exit 1
fi
BASE=http://127.0.0.1:$PORT
echo "== server pid $SERVER_PID on $BASE"

AUTH=()
[[ -n ${API_TOKEN:-} ]] && AUTH=(-H "Authorization: Bearer $API_TOKEN")
api() { # method path [json]
    curl -sS --fail-with-body --noproxy '*' --max-time 10 -X "$1" -H 'Content-Type: application/json' \
        "${AUTH[@]}" ${3:+--data "$3"} "$BASE$2"
}
json_id() { # the top-level "id" of a JSON object on stdin (string or number)
    grep -o '"id":[[:space:]]*\("[^"]*"\|[0-9][0-9]*\)' | head -n 1 | sed 's/^"id":[[:space:]]*//'
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$SERVER_PID/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVER_PID/stat"; } # user + system, in clock ticks
metric() { curl -sS --noproxy '*' --max-time 10 "${AUTH[@]}" "$BASE/metrics" | awk -v name="$1" '$1 == name { print $2 }'; }

LIBRARY=$(api POST /libraries '{"name":"fanout benchmark"}' | json_id)
BOOK=$(api POST /books "{\"libraryId\":$LIBRARY,\"title\":\"initial\"}" | json_id)
BOOK=${BOOK//\"/}
[[ -n $BOOK ]] || { echo "could not create the book" >&2; exit 1; }
echo "== library $LIBRARY, book $BOOK"

sleep 1
RSS_BEFORE=$(rss_kib)
echo "== server VmRSS before subscribing: $RSS_BEFORE KiB"

# ---- load ------------------------------------------------------------------------------------
# -g: the tool holds every stream open after setup until SIGUSR1, so the memory can be read.
# shellcheck disable=SC2086 # FANOUT_ARGS is a list of options
"$WORK/fanout" -g 300 ${API_TOKEN:+-A "$API_TOKEN"} ${FANOUT_ARGS:-} "$PORT" "$BOOK" "$N" "$R" >"$WORK/fanout.out" 2>&1 &
FANOUT_PID=$!
tail -n +1 -f --pid="$FANOUT_PID" "$WORK/fanout.out" &
TAIL_PID=$!

RSS_AFTER=
SUBSCRIBERS_METRIC=
OPEN_METRIC=
while kill -0 "$FANOUT_PID" 2>/dev/null; do
    if grep -q '^READY ' "$WORK/fanout.out"; then
        sleep 2 # let the server settle
        RSS_AFTER=$(rss_kib)
        SUBSCRIBERS_METRIC=$(metric library_sse_subscribers || true)
        OPEN_METRIC=$(metric library_http_open_connections || true)
        echo "== server VmRSS with subscribers connected: $RSS_AFTER KiB" \
            "(library_sse_subscribers $SUBSCRIBERS_METRIC, library_http_open_connections $OPEN_METRIC)"
        CPU_BEFORE=$(cpu_ticks)
        # PERF_OUT=FILE: a CPU profile of the server during the rounds (perf record -g).
        if [[ -n ${PERF_OUT:-} ]]; then
            perf record -g -p "$SERVER_PID" -o "$PERF_OUT" -- sleep "${PERF_SECONDS:-8}" >/dev/null 2>&1 &
            sleep 0.5
        fi
        kill -USR1 "$FANOUT_PID"
        break
    fi
    sleep 0.2
done
FANOUT_STATUS=0
wait "$FANOUT_PID" || FANOUT_STATUS=$?
FANOUT_PID=
wait "$TAIL_PID" 2>/dev/null || true
TAIL_PID=

SERVER_ALIVE=yes
kill -0 "$SERVER_PID" 2>/dev/null || SERVER_ALIVE=no
RSS_END=$([[ $SERVER_ALIVE == yes ]] && rss_kib || echo "?")
CPU_MS=?
if [[ $SERVER_ALIVE == yes && -n ${CPU_BEFORE:-} ]]; then
    CPU_MS=$(awk -v a="$(cpu_ticks)" -v b="$CPU_BEFORE" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", (a - b) * 1000 / hz }')
fi

# ---- summary ---------------------------------------------------------------------------------
RESULT=$(grep '^RESULT ' "$WORK/fanout.out" | tail -n 1 || true)
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $RESULT"; }
CONNECTED=$(field connected)
PER_SUB=?
if [[ -n $RSS_AFTER && -n $CONNECTED && $CONNECTED -gt 0 ]]; then
    PER_SUB=$(awk -v a="$RSS_AFTER" -v b="$RSS_BEFORE" -v n="$CONNECTED" 'BEGIN { printf "%.2f", (a - b) / n }')
fi

echo
echo "================ fan-out summary ================"
printf '%-34s %s\n' "subscribers requested" "$N"
printf '%-34s %s\n' "subscribers connected" "${CONNECTED:-?}"
printf '%-34s %s\n' "library_sse_subscribers (metric)" "${SUBSCRIBERS_METRIC:-?}"
printf '%-34s %s\n' "rounds" "$R"
printf '%-34s %s KiB\n' "server RSS before" "$RSS_BEFORE"
printf '%-34s %s KiB\n' "server RSS after connect" "${RSS_AFTER:-?}"
printf '%-34s %s KiB\n' "server RSS after rounds" "$RSS_END"
printf '%-34s %s KiB\n' "server memory per subscriber" "$PER_SUB"
printf '%-34s %s of %s (missed %s)\n' "change events received" "$(field received)" "$(field samples)" "$(field missed)"
printf '%-34s %s ms\n' "latency p50" "$(field p50)"
printf '%-34s %s ms\n' "latency p90" "$(field p90)"
printf '%-34s %s ms\n' "latency p99" "$(field p99)"
printf '%-34s %s ms\n' "latency max" "$(field max)"
printf '%-34s %s ms\n' "server CPU during rounds" "$CPU_MS"
printf '%-34s %s\n' "streams lost during rounds" "$(field lost)"
printf '%-34s %s\n' "failed PATCH requests" "$(field patch_failures)"
printf '%-34s %s\n' "load generator exit status" "$FANOUT_STATUS"
echo "================================================="

STATUS=0
[[ $FANOUT_STATUS -eq 0 ]] || STATUS=1
if [[ -s $WORK/server.err ]]; then
    echo "== server stderr ($(wc -l <"$WORK/server.err") lines, last 20):"
    tail -n 20 "$WORK/server.err"
fi

# ---- shutdown --------------------------------------------------------------------------------
if [[ $SERVER_ALIVE == no ]]; then
    SERVER_STATUS=0
    wait "$SERVER_PID" || SERVER_STATUS=$?
    SERVER_PID=
    echo "== FAIL: the server died during the run (exit status $SERVER_STATUS)" >&2
    exit 1
fi
kill -TERM "$SERVER_PID"
STOP_START=$SECONDS
for _ in $(seq 150); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    # a zombie counts as exited
    [[ $(awk '{ print $3 }' "/proc/$SERVER_PID/stat" 2>/dev/null) == Z ]] && break
    sleep 0.1
done
if [[ $(awk '{ print $3 }' "/proc/$SERVER_PID/stat" 2>/dev/null || echo Z) != Z ]]; then
    echo "== FAIL: the server did not exit within 15 s of SIGTERM" >&2
    exit 1
fi
SERVER_STATUS=0
wait "$SERVER_PID" || SERVER_STATUS=$?
SERVER_PID=
if [[ $SERVER_STATUS -ne 0 ]]; then
    echo "== FAIL: the server exited with status $SERVER_STATUS after SIGTERM" >&2
    exit 1
fi
echo "== server stopped cleanly (exit 0, $((SECONDS - STOP_START)) s after SIGTERM)"
exit "$STATUS"
