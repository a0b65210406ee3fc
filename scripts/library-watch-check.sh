#!/usr/bin/env bash
# library-watch in a real terminal (tmux), as a person would run it: a server on a fresh SQLite
# file, a library of three books, the program drawing it; then an author and an availability
# change (not on screen: no redraw), a title change and a new book (redrawn, the count too), the
# library deleted (shown). Reads the screen with capture-pane. Installs tmux when missing.
#
#   scripts/library-watch-check.sh [BUILD_DIR]   (default .build/debug)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/.build/debug}
command -v tmux >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/library-watch.XXXXXX")
SESSION=library-watch-$$
SERVER_PID=
cleanup() {
    tmux kill-session -t "$SESSION" 2>/dev/null || true
    [[ -n $SERVER_PID ]] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
source "$ROOT/scripts/lib/server.sh"
start_library_server "$BIN/library-server" "$WORK/watch.sqlite" "$WORK"
B=$URL
J='Content-Type: application/json'
id() { python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'; }
LIB=$(curl -sf -X POST "$B/libraries" -H "$J" -d '{"name":"Central"}' | id)
BOOK=$(curl -sf -X POST "$B/libraries/$LIB/books" -H "$J" -d '{"title":"Dune","author":"Frank Herbert"}' | id)
curl -sf -X POST "$B/libraries/$LIB/books" -H "$J" -d '{"title":"Emma"}' >/dev/null
curl -sf -X POST "$B/libraries/$LIB/books" -H "$J" -d '{"title":"Ulysses"}' >/dev/null

tmux new-session -d -s "$SESSION" -x 80 -y 20 "$BIN/library-watch $B $LIB"
screen() { tmux capture-pane -p -t "$SESSION"; }
redraws() { screen | sed -n 's/.*redraws \([0-9]*\).*/\1/p'; }
wait_for() { # wait_for TEXT: up to 10 s
    for _ in $(seq 100); do screen | grep -qF "$1" && return 0; sleep 0.1; done
    echo "library-watch-check: no \"$1\" on screen:" >&2; screen >&2; exit 1
}
wait_for "Central  3 books"
wait_for "Ulysses"
wait_for "live ·"
sleep 0.5
before=$(redraws)
curl -sf -X PATCH "$B/books/$BOOK" -H "$J" -d '{"author":"Someone Else","available":false}' >/dev/null
sleep 1
after=$(redraws)
[[ $before == "$after" ]] || { echo "library-watch-check: an author change redrew ($before -> $after)" >&2; exit 1; }
curl -sf -X PATCH "$B/books/$BOOK" -H "$J" -d '{"title":"Dune Messiah"}' >/dev/null
wait_for "Dune Messiah"
curl -sf -X POST "$B/libraries/$LIB/books" -H "$J" -d '{"title":"New arrival"}' >/dev/null
wait_for "Central  4 books"
wait_for "New arrival"
curl -sf -X DELETE "$B/libraries/$LIB" >/dev/null
wait_for "(library deleted)"
screen
echo "library-watch-check: passed (no redraw for fields not on screen: $before -> $after)"
