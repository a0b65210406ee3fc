#!/usr/bin/env bash
# A quick check of the benchmark's own tools, for CI: seeds a small database with seed.py, runs
# every wrk workload for one second against the given server binary and fails on any non-2xx
# answer or socket error (so the Lua scripts keep asking for ids that exist, with valid bodies),
# then runs overobserve.py, which fails if any subscriber gets a field it did not ask for (single-book
# streams), or, for collection streams and multiplexed ones, an unrequested field or item, a wrong,
# missing or extra event, or ends with a state unequal to the matching GET.
#
# First it checks that the README's benchmark tables are what Benchmarks/figures.py makes of the
# result files (nobody edited a figure by hand, no result file changed without the README).
#
#   Benchmarks/smoke.sh SERVER
set -euo pipefail
SERVER=${1:?usage: $0 SERVER}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-smoke.XXXXXX")
SERVER_PID=
cleanup() {
    if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$HERE/seed.py" "$SERVER" "$WORK/smoke.sqlite" 1200 12
"$SERVER" --port 0 --database "$WORK/smoke.sqlite" --log-level warning >"$WORK/out" 2>"$WORK/err" &
SERVER_PID=$!
PORT=
for _ in $(seq 100); do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$WORK/out")
    [[ -n $PORT ]] && break
    sleep 0.1
done
[[ -n $PORT ]] || { echo "the server did not start" >&2; cat "$WORK/err" >&2; exit 1; }

failed=0
# The README's benchmark tables are the result files' (Benchmarks/figures.py wrote them).
python3 "$HERE/figures.py" --check || { echo "FAIL: figures.py --check" >&2; failed=1; }
# Every benchmark script parses, those this smoke run does not start included (profile_*.py need
# perf, postgres.py PostgreSQL and the comparators).
python3 -c 'import ast, sys
for path in sys.argv[1:]:
    ast.parse(open(path).read(), path)' "$HERE"/*.py "$HERE"/lib/*.py || { echo "FAIL: a benchmark script does not parse" >&2; failed=1; }
# The tools' own tests (figures.py's blocks, profile_join.py's attribution of samples).
python3 -m unittest discover -s "$HERE/tests" || { echo "FAIL: Benchmarks/tests" >&2; failed=1; }
# The first join's floor (SQLite alone stepping through a library's members) builds and reads a
# library of the smoke database (100 members; it fails on none).
{ cc -O2 -Wall -Werror -std=gnu11 -o "$WORK/join-floor" "$HERE/join-floor.c" -lsqlite3 \
    && "$WORK/join-floor" "$WORK/smoke.sqlite" 00000000-0000-4000-8000-000000000001 2; } \
    || { echo "FAIL: join-floor.c" >&2; failed=1; }
for workload in get list post patch mix; do
    line=$(BENCH_LUA="$HERE/wrk" BOOKS=1200 LIBRARIES=12 \
        timeout 30 wrk -t1 -c4 -d1s -s "$HERE/wrk/$workload.lua" "http://127.0.0.1:$PORT" | grep '^RESULT ')
    echo "$workload: $line"
    if ! grep -q ' socket_errors=0 non2xx=0 ' <<<"$line" || grep -q ' requests=0 ' <<<"$line"; then
        echo "FAIL: $workload" >&2
        failed=1
    fi
done
timeout 180 python3 "$HERE/overobserve.py" "$PORT" 1200 60 100 --collection-writes 300 --copies 2 || { echo "FAIL: overobserve" >&2; failed=1; }
# The Swift client's render benchmark, short: 50 books, 2 s of writes per mode, its checks on.
timeout 180 "$(dirname "$SERVER")/client-renders" "http://127.0.0.1:$PORT" --books 50 --seconds 2 --rate 20 --check \
    || { echo "FAIL: client-renders" >&2; failed=1; }
# The book reader's day, short: 50 books, 3 s per design, its checks on.
timeout 180 "$(dirname "$SERVER")/client-renders" "http://127.0.0.1:$PORT" --book-reader --books 50 --seconds 3 --rate 20 --check \
    || { echo "FAIL: client-renders --book-reader" >&2; failed=1; }
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || { echo "FAIL: the server exited with $?" >&2; failed=1; }
SERVER_PID=
# The live benchmark, short: two library sizes, 3 s of writes each, every title checked.
timeout 300 python3 "$HERE/live.py" --server "$SERVER" --sizes 200,5000 --seconds 3 --no-readme \
    || { echo "FAIL: live.py" >&2; failed=1; }
# The collection stream, short: /books/events?libraryId=L&fields=title at two sizes, 3 s of writes.
timeout 300 python3 "$HERE/live.py" --collection --server "$SERVER" --sizes 200,5000 --seconds 3 --no-readme \
    || { echo "FAIL: live.py --collection" >&2; failed=1; }
# SSE fan-out, short: 300 subscribers of one book, 3 changes, every event delivered.
SERVER="$SERVER" timeout 300 bash "$HERE/fanout.sh" 300 3 >"$WORK/fanout.log" 2>&1 \
    || { tail -20 "$WORK/fanout.log" >&2; echo "FAIL: fanout.sh" >&2; failed=1; }
grep '^RESULT ' "$WORK/fanout.log" || true
exit "$failed"
