#!/usr/bin/env bash
# The guide's claim, end to end (issue: the Swift client): renders and bytes of a screen of views
# over a 1,000-book library under 60 s of writes, for this client, whole-resource subscriptions and
# ObservableObject-style invalidation, with PATCH-to-render latency. Builds both in release mode,
# starts the server on a fresh SQLite file on 127.0.0.1, writes Benchmarks/results/client-renders.json
# (with the commit and the machine) and prints the table.
#
#   Benchmarks/client-renders.sh [--books N] [--seconds S] [--rate W]
#
# With --book-reader: the book-reader app's day instead (Benchmarks/ClientRenders/BookReaderDay.swift:
# a lazy list of 20 rows, detail, edit and header views under a library's day of writes, for this
# client, whole-resource subscriptions, ObservableObject and a single store of structs), written
# to Benchmarks/results/book-reader-day.json.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
swift build -c release --product library-server >/dev/null
swift build -c release --product client-renders >/dev/null 2>&1 || swift build -c release --target client-renders >/dev/null
BIN=$(swift build -c release --show-bin-path)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/client-renders.XXXXXX")
SERVER_PID=
cleanup() {
    [[ -n $SERVER_PID ]] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
source "$ROOT/scripts/lib/server.sh"
start_library_server "$BIN/library-server" "$WORK/bench.sqlite" "$WORK"
OUT="$ROOT/Benchmarks/results/client-renders.json"
[[ " $* " == *" --book-reader "* ]] && OUT="$ROOT/Benchmarks/results/book-reader-day.json"
"$BIN/client-renders" "$URL" --out "$WORK/result.json" "$@"
python3 - "$WORK/result.json" "$OUT" <<'PY'
import datetime, json, platform, subprocess, sys
result = json.load(open(sys.argv[1]))
result["date"] = datetime.date.today().isoformat()
result["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
result["machine"] = f"{platform.machine()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores"
json.dump(result, open(sys.argv[2], "w"), indent=2, sort_keys=True)
print(f"client-renders: results in {sys.argv[2]}")
PY
