#!/usr/bin/env bash
# Storage faults: library-server answers 503, stays up, says why, and recovers by itself.
#
# Expected: a write the database cannot take now is a 503 application/problem+json (never a 500,
# never a crash), and once the storage fault is fixed, writes work again without a restart. Three
# faults, each on a fresh server and database:
#
#   a. Read-only database, two ways:
#      - while the server runs: `chattr +i` makes the database file, its `-wal` and its directory
#        immutable, so writes through the server's already-open descriptors fail (EPERM) and no
#        file can be created. Permissions cannot do this (checked at open() only, and root ignores
#        them), nor can a read-only bind mount (remounting it read-only is refused as busy while
#        files are open for writing through it; files opened by another path are unaffected).
#        The `-shm` file stays writable: SQLite maps it in memory, and a store into an immutable
#        mapped file is a SIGBUS that kills any SQLite process, not a test of the server.
#        Checks: reads still work, writes are 503 problems, a log line names the SQLite error,
#        and after `chattr -i` writes work again without a restart.
#      - at start-up: the server is started on a read-only bind mount of the database directory,
#        once with the empty `-wal` and the `-shm` that any read-only reader (here the sqlite3 CLI)
#        leaves, where SQLite would quietly open the file read-only, and once with the database
#        file alone. Both times it must refuse to start: one stderr line, exit != 0.
#   b. Full disk. The database lives on a 2 MiB tmpfs next to a 256 KiB filler file; large books
#      are POSTed until the disk is full. Checks: only 201 or 503 (the failing writes are 503),
#      reads work, a log line says the disk is full; after deleting the filler, writes succeed
#      again, and every book that was answered 201 is stored.
#   c. Locked database. A sqlite3 CLI process holds `BEGIN EXCLUSIVE` (fed through a FIFO) for
#      longer than the server's 5 s busy timeout. Checks: a write waits about 5 s, then is a 503
#      problem with Retry-After; reads work (WAL readers do not need the write lock); a log line
#      says the database is locked; after COMMIT in the CLI, writes succeed.
# After each fault: the server is alive, GET /healthz says what it can know (200 while a reader
# answers and the write lock can be taken, so 503 while the database is locked; a file that fails
# only on the write itself, read-only or full, shows up in the writes' 503s), SIGTERM exits 0, and
# the database passes `PRAGMA integrity_check`.
#
# Usage: scripts/storage-faults.sh [SERVER_BINARY]   (default .build/debug/library-server)
# Needs root (chattr, mount), a TMPDIR whose file system supports `chattr +i` (ext4, xfs, btrfs),
# bash, curl, python3 and the sqlite3 CLI (installed with apt-get when missing). Talks to 127.0.0.1 only, stops itself after 150 s (normally ~15 s), undoes every
# attribute and mount it made. Prints "storage-faults: N passed, M failed"; exits non-zero on failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVER=${1:-$ROOT/.build/debug/library-server}
[[ $SERVER == /* ]] || SERVER=$PWD/$SERVER
TIME_LIMIT=150
NAME=storage-faults
# shellcheck source-path=SCRIPTDIR source=lib/harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"

[[ $(id -u) == 0 ]] || die "needs root (chattr +i, mount -t tmpfs)"
[[ -x $SERVER ]] || die "no server binary at $SERVER"
for tool in curl python3 chattr mount; do
    command -v "$tool" >/dev/null || die "$tool is missing"
done
if ! command -v sqlite3 >/dev/null; then
    note "installing sqlite3"
    timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq sqlite3 \
        >/dev/null || die "cannot install sqlite3"
fi

# --- processes, temporary files, time limit -----------------------------------------------------

harness_start   # WORK, the traps and the watchdog (scripts/lib/harness.sh)
SERVER_PID=""
LOCK_PID=""
MOUNTS=() # made by this script, unmounted last first
CLEANUP_PIDS+=(LOCK_PID SERVER_PID)

cleanup_first() { # (harness hook) before the processes are stopped
    exec 7>&- 2>/dev/null || true # the lock FIFO, when open
}

cleanup_last() { # (harness hook) after the processes are stopped, before WORK is removed
    local i
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" || true
    done
    chattr -R -i "$WORK" 2>/dev/null || true
}

# --- server control -----------------------------------------------------------------------------

URL=""
LOG=""
# start_server DATABASE NAME: starts the server, sets SERVER_PID, URL and LOG (its stderr).
start_server() {
    local database=$1 i line=""
    LOG=$WORK/$2.err
    "$SERVER" --port 0 --database "$database" --log-level warning >"$WORK/$2.out" 2>"$LOG" &
    SERVER_PID=$!
    for ((i = 0; i < 100; i++)); do
        line=$(head -n 1 "$WORK/$2.out" 2>/dev/null)
        [[ -z $line ]] || break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [[ $line =~ ^listening\ on\ (http://127\.0\.0\.1:[0-9]+)$ ]]; then
        URL=${BASH_REMATCH[1]}
        return 0
    fi
    echo "  server did not start: $(tail -n 5 "$LOG")"
    stop_pid "$SERVER_PID"
    SERVER_PID=""
    return 1
}

server_alive() { [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; }

# --- HTTP ---------------------------------------------------------------------------------------

STATUS=""
# http METHOD PATH [JSON]: sets STATUS; the body and head are in $WORK/body and $WORK/head.
http() {
    local args=(-sS --max-time 20 -X "$1" -o "$WORK/body" -D "$WORK/head" -w '%{http_code}')
    [[ $# -lt 3 ]] || args+=(-H 'Content-Type: application/json' --data-binary "$3")
    STATUS=$(curl "${args[@]}" "$URL$2" 2>/dev/null) || STATUS=000
}
header() { sed -n "s/^$1: *//Ip" "$WORK/head" | tr -d '\r' | head -n 1; }
body_field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$WORK/body" "$1"; }

# unavailable_problem: the last answer is a 503 problem+json document with status 503 and a detail.
unavailable_problem() {
    [[ $STATUS == 503 && $(header Content-Type) == application/problem+json* ]] &&
        python3 -c '
import json, sys
problem = json.load(open(sys.argv[1]))
sys.exit(not (problem.get("status") == 503 and problem.get("type") and problem.get("title") and problem.get("detail")))
' "$WORK/body"
}

LIBRARY=""
BOOK=""
TITLE=""
# make_book DESCRIPTION: a library and a book in it (sets BOOK, TITLE and LIBRARY).
make_book() {
    http POST /libraries '{"name":"storage-faults"}'
    [[ $STATUS == 201 ]] || { fail "$1: POST /libraries answered $STATUS"; return 1; }
    LIBRARY=$(body_field id)
    TITLE="before the fault"
    http POST /books "{\"libraryId\":\"$LIBRARY\",\"title\":\"$TITLE\"}"
    [[ $STATUS == 201 ]] || { fail "$1: POST /books answered $STATUS"; return 1; }
    BOOK=$(body_field id)
}

patch_title() { # patch_title TITLE: PATCHes the book's title; sets STATUS
    http PATCH "/books/$BOOK" "{\"title\":\"$1\"}"
}

BIG=$(printf 'x%.0s' {1..480})
post_big_book() { # post_big_book N: POSTs a book of about 800 bytes of text; sets STATUS
    http POST /books "{\"libraryId\":\"$LIBRARY\",\"title\":\"$1 $BIG\",\"author\":\"${BIG:0:300}\"}"
}

# reads_work: GET /books/$BOOK answers 200 with the last acknowledged title.
reads_work() {
    http GET "/books/$BOOK"
    [[ $STATUS == 200 && $(body_field title) == "$TITLE" ]]
}

# --- checks shared by the faults ----------------------------------------------------------------

now_ms() { echo $(($(date +%s%N) / 1000000)); }

WRITE_MS=0
# expect_unavailable_write FAULT: a POST during the fault is a 503 problem (sets WRITE_MS).
# (A large POST: on a full disk a smaller write may still fit in the WAL's already allocated space.)
expect_unavailable_write() {
    local started
    started=$(now_ms)
    post_big_book "during the fault"
    WRITE_MS=$(($(now_ms) - started))
    check "$1: a write answers 503 problem+json (got $STATUS after $WRITE_MS ms, Retry-After: $(header Retry-After))" \
        unavailable_problem
}

# log_reason PATTERN: the error of the first "storage failure" line of the log matching PATTERN,
# without the SQL text.
log_reason() {
    grep -m 1 "storage failure.*$1" "$LOG" | grep -o 'error="[^"]*"' | sed 's/ in `.*/"/'
}

# expect_fault_handled FAULT LOG_PATTERN HEALTH: the checks every fault shares, while it lasts;
# HEALTH is the status GET /healthz must answer.
expect_fault_handled() {
    local fault=$1 pattern=$2 expected_health=$3 reads=0 health
    expect_unavailable_write "$fault"
    if reads_work; then reads=1; fi
    check "$fault: reads keep working (GET /books/{id}: $STATUS, the last acknowledged title)" test "$reads" = 1
    http GET /healthz
    health="$STATUS $(tr -d '\n' <"$WORK/body")"
    note "$fault: GET /healthz says: $health"
    check "$fault: GET /healthz answers $expected_health (got ${health%% *})" test "$STATUS" = "$expected_health"
    check "$fault: the server is still running" server_alive
    check "$fault: the log says why: $(log_reason "$pattern" || echo "no storage failure line with '$pattern'")" \
        grep -q "storage failure.*$pattern" "$LOG"
}

# expect_recovered FAULT [WHEN]: a write (PATCH of the title) succeeds and is read back.
expect_recovered() {
    local title="after the fault $RANDOM" patched
    patch_title "$title"
    patched=$STATUS
    [[ $patched != 200 ]] || TITLE=$title
    check "$1: ${2:-once the fault is gone, a write succeeds without a restart} (got $patched)" \
        test "$patched" = 200
    [[ $patched != 200 ]] || check "$1: and the new title is read back" reads_work
}

integrity_ok() { # integrity_ok DATABASE: PRAGMA integrity_check answers exactly "ok"
    local answer
    answer=$(timeout 30 sqlite3 "file:$1?mode=ro" 'PRAGMA integrity_check;' 2>&1) || true
    [[ $answer == ok ]] || { echo "  integrity_check: $answer" | head -n 5; return 1; }
}

# expect_clean_stop FAULT DATABASE: SIGTERM exits 0 and the database passes integrity_check.
expect_clean_stop() {
    local status=0 started
    started=$(now_ms)
    stop_server || status=$?
    check "$1: SIGTERM stops the server with exit status 0 (got $status, in $(($(now_ms) - started)) ms)" \
        test "$status" = 0
    if [[ -e $2-wal ]]; then
        note "$1: after the stop, the -wal file has $(stat -c %s "$2-wal") bytes"
    else
        note "$1: after the stop, the -wal file is gone"
    fi
    check "$1: PRAGMA integrity_check is ok" integrity_ok "$2"
}

# =================================================================================================
# a. read-only database
# =================================================================================================

RO=$WORK/ro         # the database directory
VIEW=$WORK/ro-view  # a bind mount of it, read-only or not

immutable() { # immutable +i|-i: the database file, its -wal (when there is one) and its directory
    local files=("$RO/library.sqlite" "$RO")
    [[ ! -e $RO/library.sqlite-wal ]] || files+=("$RO/library.sqlite-wal")
    chattr "$1" "${files[@]}"
}

read_only_while_running() {
    local fault="read-only (chattr +i while running)"
    mkdir "$RO"
    start_server "$RO/library.sqlite" read-only || { fail "$fault: the server starts"; return 1; }
    make_book "$fault" || return
    if ! immutable +i; then
        fail "$fault: chattr +i (the file system of $WORK must support it: set TMPDIR elsewhere)"
        stop_server || true
        return 1
    fi
    expect_fault_handled "$fault" "SQLite error" 200
    patch_title "during the fault"
    check "$fault: a PATCH answers 503 problem+json too (got $STATUS)" unavailable_problem
    immutable -i
    expect_recovered "$fault"
    expect_clean_stop "$fault" "$RO/library.sqlite"
}

view_mode() { mount -o "remount,$1,bind" "$VIEW"; } # view_mode ro|rw

# read_only_at_start: the database has been read by a read-only sqlite3, which leaves an empty
# -wal and a -shm behind (as any read-only reader does); SQLite would open it read-only, and the
# server must refuse to start rather than answer 503 to every write until a restart.
read_only_at_start() {
    timeout 10 sqlite3 "file:$RO/library.sqlite?mode=ro" 'SELECT count(*) FROM books;' >/dev/null
    mkdir "$VIEW"
    if ! mount --bind "$RO" "$VIEW"; then
        fail "read-only at start-up: a bind mount of the database directory"
        return 1
    fi
    MOUNTS+=("$VIEW")
    view_mode ro
    note "read-only at start-up: files in it: $(ls "$VIEW" | tr '\n' ' ')"
    refuses_to_start "read-only (bind mount, at start-up, with -wal and -shm)" "$VIEW/library.sqlite"
}

# refuses_to_start FAULT DATABASE: the server exits within 5 s, non-zero, with one line on stderr.
refuses_to_start() {
    local fault=$1 status=running i
    LOG=$WORK/refused.err
    "$SERVER" --port 0 --database "$2" >/dev/null 2>"$LOG" &
    SERVER_PID=$!
    for ((i = 0; i < 50; i++)); do
        server_alive || break
        sleep 0.1
    done
    if server_alive; then
        stop_server || true
    else
        status=0
        wait "$SERVER_PID" || status=$?
        SERVER_PID=""
    fi
    check "$fault: the server refuses to start, exit status != 0 (got $status)" \
        test "$status" != running -a "$status" != 0
    check "$fault: with one line on stderr: $(head -n 1 "$LOG")" test "$(wc -l <"$LOG")" = 1
}

read_only() {
    read_only_while_running || return
    read_only_at_start || return
    view_mode rw
    rm -f "$RO/library.sqlite-wal" "$RO/library.sqlite-shm" # the -wal is empty: nothing is lost
    view_mode ro
    refuses_to_start "read-only (bind mount, at start-up, database file alone)" "$VIEW/library.sqlite"
    view_mode rw
    check "read-only: PRAGMA integrity_check is ok at the end" integrity_ok "$RO/library.sqlite"
}

# =================================================================================================
# b. full disk
# =================================================================================================

FILLED=0
# fill_disk: POSTs large books until 3 writes in a row fail (at most 400); counts 201s in FILLED.
fill_disk() {
    local fault=$1 i failures=0 statuses=""
    for ((i = 0; i < 400 && failures < 3; i++)); do
        post_big_book "$i"
        statuses+="$STATUS "
        if [[ $STATUS == 201 ]]; then FILLED=$((FILLED + 1)); failures=0; else failures=$((failures + 1)); fi
    done
    note "$fault: answers while filling: $(tr ' ' '\n' <<<"$statuses" | grep . | sort | uniq -c |
        awk '{printf "%s%s x %s", (NR > 1 ? ", " : ""), $1, $2}')"
    check "$fault: the disk filled up ($FILLED books written, then 3 failures in a row)" test "$failures" = 3
    check "$fault: every answer while filling was 201 or 503, never a 500 or another status" \
        test -z "$(tr ' ' '\n' <<<"$statuses" | grep -Ev '^(201|503|)$')"
}

full_disk() {
    local fault="full disk (2 MiB tmpfs)" fs=$WORK/full count
    mkdir "$fs"
    if ! mount -t tmpfs -o size=2m,mode=0700 "$NAME" "$fs"; then
        fail "$fault: mount a 2 MiB tmpfs"
        return
    fi
    MOUNTS+=("$fs")
    head -c 262144 /dev/zero >"$fs/filler"
    start_server "$fs/library.sqlite" full || { fail "$fault: the server starts"; return; }
    make_book "$fault" || return
    fill_disk "$fault"
    note "$fault: $(df -k --output=used,avail "$fs" | tail -n 1 | awk '{print $1 " KiB used, " $2 " KiB free"}')"
    expect_fault_handled "$fault" "disk is full" 200
    rm "$fs/filler"
    expect_recovered "$fault"
    http GET "/libraries/$LIBRARY"
    count=$(body_field bookCount) || count="none ($STATUS)"
    check "$fault: every book answered 201 is stored (bookCount $count, expected 1 + $FILLED)" \
        test "$count" = $((FILLED + 1))
    expect_clean_stop "$fault" "$fs/library.sqlite"
}

# =================================================================================================
# c. locked database
# =================================================================================================

# lock_database DATABASE: a sqlite3 CLI holds BEGIN EXCLUSIVE, fed through a FIFO on fd 7.
lock_database() {
    local i
    mkfifo "$WORK/lock.fifo"
    sqlite3 "$1" <"$WORK/lock.fifo" >"$WORK/lock.out" 2>&1 &
    LOCK_PID=$!
    exec 7>"$WORK/lock.fifo"
    printf '.timeout 5000\nBEGIN EXCLUSIVE;\nSELECT %s;\n' "'locked'" >&7
    for ((i = 0; i < 100; i++)); do
        grep -qx locked "$WORK/lock.out" && return 0
        sleep 0.1
    done
    echo "  sqlite3: $(cat "$WORK/lock.out")"
    return 1
}

unlock_database() { # COMMIT, end of input; the CLI exits
    printf 'COMMIT;\n' >&7
    exec 7>&-
    wait "$LOCK_PID"
    LOCK_PID=""
}

locked() {
    local fault="locked (sqlite3 BEGIN EXCLUSIVE)" database=$WORK/locked/library.sqlite
    mkdir "$WORK/locked"
    start_server "$database" locked || { fail "$fault: the server starts"; return; }
    make_book "$fault" || return
    if ! lock_database "$database"; then
        fail "$fault: the sqlite3 CLI takes the write lock"
        return
    fi
    pass "$fault: the sqlite3 CLI takes the write lock"
    expect_fault_handled "$fault" "database is locked" 503
    check "$fault: the write waited out the 5 s busy timeout before the 503 (${WRITE_MS} ms)" \
        test "$WRITE_MS" -ge 4500
    check "$fault: the sqlite3 CLI commits and releases the lock" unlock_database
    expect_recovered "$fault"
    expect_clean_stop "$fault" "$database"
}

# --- run ----------------------------------------------------------------------------------------

note "$NAME: $SERVER, work directory $WORK"
read_only
full_disk
locked
echo "$NAME: $passed passed, $failed failed"
((failed == 0))
