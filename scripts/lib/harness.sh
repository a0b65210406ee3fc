# shellcheck shell=bash
# The test harness shared by scripts/sse-clients.sh, crash-durability.sh and storage-faults.sh;
# they source it with `source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"`.
#
# Provides
#   passed, failed          the counters
#   pass TEXT / fail TEXT   count a check and print "ok - TEXT" / "FAIL - TEXT"
#   check TEXT COMMAND...   pass or fail, by COMMAND's exit status
#   note TEXT               an indented remark ("# TEXT")
#   die MESSAGE             MESSAGE on stderr, the summary with one more failure, exit 1
#   stop_pid PID            SIGTERM, up to 5 s, then SIGKILL; reaps it (nothing when PID is empty)
#   stop_server [SECONDS]   SIGTERM to SERVER_PID (then cleared), up to SECONDS (default 15); returns
#                           the server's exit status, 124 when it had to be killed, 1 when it was gone
#   harness_start           (call once the tools are in place) makes WORK, a temporary directory
#                           named after NAME; sets the traps: on exit the cleanup below, on SIGINT
#                           the summary and exit 130, on SIGTERM the summary and exit 124; starts
#                           the watchdog that sends this script SIGTERM after TIME_LIMIT seconds
#                           (WATCHDOG_PID).
# The summary, on stdout, is "NAME: N passed, M failed" (the script prints it itself at the end);
# messages go to stderr as "NAME: MESSAGE". The script exits non-zero on failure: ((failed == 0)).
#
# Expects
#   NAME          the script's name, set before sourcing (messages, summary, WORK's name)
#   TIME_LIMIT    seconds, set before harness_start (and read again by the SIGTERM message)
#   PASS_PREFIX   optional, set before sourcing: what pass prints before TEXT (default "ok - ")
#   NOTE_PREFIX   optional, set before sourcing: what note prints before TEXT (default "# ")
#
# Cleanup, on any exit once harness_start has run, in this order:
#   1. cleanup_first, when the script defines it (e.g. close a FIFO that a child process reads);
#   2. stop_pid on each variable named in CLEANUP_PIDS, read at that moment (the script appends
#      names: CLEANUP_PIDS+=(SERVER_PID)), in order, then on the watchdog;
#   3. cleanup_last, when the script defines it (e.g. unmount, undo file attributes);
#   4. rm -rf of each directory in CLEANUP_DIRS (WORK is added by harness_start).
# The hooks run with errexit off and their failures are ignored; the exit status stays the script's.

: "${NAME:?set NAME before sourcing scripts/lib/harness.sh}"
PASS_PREFIX=${PASS_PREFIX-"ok - "}
NOTE_PREFIX=${NOTE_PREFIX-"# "}
CLEANUP_PIDS=()
CLEANUP_DIRS=()
WORK=""
WATCHDOG_PID=""

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "$PASS_PREFIX$*"; }
fail() { failed=$((failed + 1)); echo "FAIL - $*"; }
check() { # check DESCRIPTION COMMAND...
    local description=$1
    shift
    if "$@"; then pass "$description"; else fail "$description"; fi
}
note() { echo "$NOTE_PREFIX$*"; }
die() {
    echo "$NAME: $*" >&2
    echo "$NAME: $passed passed, $((failed + 1)) failed"
    exit 1
}

stop_pid() { # stop_pid PID: SIGTERM, up to 5 s, then SIGKILL; reaps it
    local pid=$1 i
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

stop_server() { # stop_server [SECONDS]: the server's exit status after SIGTERM
    local pid=$SERVER_PID i status=0
    SERVER_PID=""
    kill -TERM "$pid" 2>/dev/null || return 1
    for ((i = 0; i < ${1:-15} * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        return 124
    fi
    wait "$pid" || status=$?
    return "$status"
}

harness_cleanup() {
    local status=$? name dir
    trap - EXIT INT TERM
    if declare -F cleanup_first >/dev/null; then cleanup_first || true; fi
    for name in "${CLEANUP_PIDS[@]}"; do
        stop_pid "${!name:-}"
    done
    stop_pid "$WATCHDOG_PID"
    if declare -F cleanup_last >/dev/null; then cleanup_last || true; fi
    for dir in "${CLEANUP_DIRS[@]}"; do
        rm -rf "$dir"
    done
    exit "$status"
}

stopped() { # stopped STATUS MESSAGE: the summary, counting the unfinished run as a failure
    echo "$NAME: $2" >&2
    echo "$NAME: $passed passed, $((failed + 1)) failed"
    exit "$1"
}

harness_start() {
    : "${TIME_LIMIT:?set TIME_LIMIT before harness_start}"
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$NAME.XXXXXX")
    CLEANUP_DIRS+=("$WORK")
    trap harness_cleanup EXIT
    trap 'stopped 130 interrupted' INT
    trap 'stopped 124 "stopped (time limit of ${TIME_LIMIT} s reached, or SIGTERM)"' TERM

    # Stops this script (through its TERM trap) past the time limit; every step of the scripts is
    # also bounded, so this is only the last line of defence.
    (
        trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
        sleep "$TIME_LIMIT" &
        sleeper=$!
        wait "$sleeper"
        kill -TERM $$
    ) >/dev/null 2>&1 &
    WATCHDOG_PID=$!
}
