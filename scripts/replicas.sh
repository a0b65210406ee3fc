#!/usr/bin/env bash
# Replicas behind nginx on one PostgreSQL database, with real processes on 127.0.0.1: the topology
# of deploy/compose.yaml without Docker.
#
# Starts a throwaway PostgreSQL cluster (scripts/lib/postgres.sh), three library-server replicas on
# free ports with `--database $POSTGRES_URL`, and nginx in the foreground with deploy/nginx.conf
# (only its upstream servers and listen address rewritten to 127.0.0.1 ports, wrapped in a minimal
# nginx.conf in a temporary directory). Then scripts/replicas.py creates data through nginx, follows
# book, library and collection streams on every replica and through nginx, spreads writes over the
# replicas and nginx, kills one replica with SIGKILL, has PostgreSQL restarted (it sends this script
# SIGUSR1; this script runs restart_postgres and writes the ack file), and checks that every
# subscriber's state equals GET, that every acknowledged write is there, that requests during the
# outage got 503 with Retry-After (never a hang) and that the replicas recovered by themselves, and
# the cross-replica commit-to-event latency (p99 <= 100 ms). See replicas.py for the details.
#
# --failover runs the topology users run past one machine instead: the cluster gets a synchronous
# streaming standby (pg_basebackup), pgbouncer in transaction mode stands in front of the primary,
# and the replicas reach the database through pgbouncer (`--database`) and LISTEN directly on a
# multi-host URI (`--listen-database host1,host2?target_session_attrs=read-write`). The driver's
# SIGUSR1 then means a failover: the primary killed with SIGKILL (postmaster and backends), the
# standby promoted --down seconds later (default 1), pgbouncer pointed at it and reloaded, as a
# failover manager would. The driver checks every acknowledged write against the new primary
# directly and reports the longest wait for a write (503s or held) and the time until live events flow again.
#
# Usage: scripts/replicas.sh [--seconds N | --short] [--sqlite | --failover [--kill-during-failover]]
#                            [--down S] [-- DRIVER OPTIONS]
#   --seconds N   length of the write load (default 60); --short: about 20 s, for CI
#   --failover    a synchronous standby and pgbouncer, and a failover instead of a restart
#   --kill-during-failover  the replica is killed at the failover, not before it
#   --down S      seconds PostgreSQL is down (restart), or before the promotion (failover)
#   --sqlite      one replica on a SQLite file instead (to debug the driver without the PostgreSQL
#                 engine): no kill, and the PostgreSQL restart only exercises the plumbing
#   LIBRARY_SERVER  the binary (default .build/release/library-server, else .build/debug)
# Installs nginx and postgresql with apt-get when missing (root). Exits non-zero on any failure;
# stops everything it started (and removes the cluster) on exit, and stops itself past a time limit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECONDS_ARG=60
SHORT=""
MODE=postgres
REPLICA_COUNT=3
POSTGRES_DOWN=3
DRIVER_ARGS=()
DRIVER_KILL=()
DOWN_ARG=""
while (($#)); do
    case $1 in
        --seconds) SECONDS_ARG=$2; shift 2 ;;
        --short) SHORT=--short; SECONDS_ARG=20; POSTGRES_DOWN=2; shift ;;
        --sqlite) MODE=sqlite; REPLICA_COUNT=1; shift ;;
        --failover) MODE=failover; shift ;;
        --kill-during-failover) DRIVER_KILL=(--kill-during-failover); shift ;;
        --down) DOWN_ARG=$2; shift 2 ;;
        --) shift; DRIVER_ARGS=("$@"); break ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "replicas: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ $SECONDS_ARG =~ ^[0-9]+$ ]] || { echo "replicas: --seconds needs a whole number" >&2; exit 2; }
[[ $MODE == failover ]] && POSTGRES_DOWN=1
[[ -n $DOWN_ARG ]] && POSTGRES_DOWN=$DOWN_ARG
[[ $POSTGRES_DOWN =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "replicas: --down needs a number of seconds" >&2; exit 2; }
((${#DRIVER_KILL[@]} == 0)) || [[ $MODE == failover ]] \
    || { echo "replicas: --kill-during-failover needs --failover" >&2; exit 2; }

SERVER=${LIBRARY_SERVER:-}
if [[ -z $SERVER ]]; then
    SERVER=$ROOT/.build/release/library-server
    [[ -x $SERVER ]] || SERVER=$ROOT/.build/debug/library-server
fi
[[ $SERVER == /* ]] || SERVER=$PWD/$SERVER

NAME=replicas
TIME_LIMIT=$((SECONDS_ARG + 240))
# shellcheck source-path=SCRIPTDIR source=lib/harness.sh
source "$ROOT/scripts/lib/harness.sh"
# shellcheck source-path=SCRIPTDIR source=lib/postgres.sh
source "$ROOT/scripts/lib/postgres.sh"

[[ -x $SERVER ]] || die "no server binary at $SERVER (swift build -c release, or set LIBRARY_SERVER)"
command -v python3 >/dev/null || die "python3 is missing"
missing=()
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || missing+=(postgresql)
[[ $MODE != failover ]] || command -v pgbouncer >/dev/null || [[ -x /usr/sbin/pgbouncer ]] || missing+=(pgbouncer)
if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || die "missing ${missing[*]}, and only root can install it"
    note "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq "${missing[@]}" >/dev/null \
        || die "cannot install ${missing[*]}"
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- processes, temporary files, time limit -----------------------------------------------------

harness_start   # WORK, the traps, the watchdog (scripts/lib/harness.sh)
start_postgres || die "could not start PostgreSQL"
trap harness_cleanup EXIT   # start_postgres set its own EXIT trap; harness_cleanup calls it last
cleanup_last() { stop_failover_cluster; stop_postgres; }
note "PostgreSQL at $POSTGRES_URL ($POSTGRES_DIR)"
if [[ $MODE == failover ]]; then
    start_standby || die "could not start the standby"
    note "synchronous standby at port $STANDBY_PORT ($STANDBY_DIR)"
    start_pgbouncer || die "could not start pgbouncer"
    note "pgbouncer (transaction pooling) at $BOUNCER_URL, in front of port $POSTGRES_PORT"
    LISTEN_URL="postgres://$POSTGRES_USER@127.0.0.1:$POSTGRES_PORT,127.0.0.1:$STANDBY_PORT/postgres?target_session_attrs=read-write"
fi

REPLICA_PIDS=()
REPLICA_PORTS=()
NGINX_PID=""
DRIVER_PID=""
REPLICA1_PID="" REPLICA2_PID="" REPLICA3_PID=""
CLEANUP_PIDS+=(DRIVER_PID NGINX_PID REPLICA1_PID REPLICA2_PID REPLICA3_PID)

# --- the replicas -------------------------------------------------------------------------------

start_replica() { # start_replica N: the Nth replica on a free port; sets REPLICAn_PID, REPLICA_PORTS
    local n=$1 database=() out=$WORK/replica$1.out err=$WORK/replica$1.err i port=""
    case $MODE in
        postgres) database=(--database "$POSTGRES_URL") ;;
        failover) database=(--database "$BOUNCER_URL" --listen-database "$LISTEN_URL") ;;
        sqlite) database=(--database "$WORK/library.sqlite") ;;
    esac
    "$SERVER" --port 0 "${database[@]}" --log-level warning --heartbeat-interval 5 >"$out" 2>"$err" &
    printf -v "REPLICA${n}_PID" %s "$!"
    REPLICA_PIDS+=("$!")
    for ((i = 0; i < 300; i++)); do
        if [[ $(head -1 "$out" 2>/dev/null) =~ ^listening\ on\ http://127\.0\.0\.1:([0-9]+)$ ]]; then
            port=${BASH_REMATCH[1]}
            break
        fi
        kill -0 "$!" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n $port ]] || die "replica $n did not start: $(tail -3 "$err" | tr '\n' ' ')"
    REPLICA_PORTS+=("$port")
    note "replica$n: pid $!, port $port, $MODE"
}

for ((n = 1; n <= REPLICA_COUNT; n++)); do
    start_replica "$n"
done

# --- nginx --------------------------------------------------------------------------------------
# deploy/nginx.conf itself, with the replicas' and nginx's own addresses changed, inside a minimal
# main configuration: foreground, pid and logs and temporary files in WORK (scripts/lib/nginx.py).

NGINX_DIR=$WORK/nginx
mkdir -p "$NGINX_DIR"
NGINX_PORT=$(free_port)
python3 "$ROOT/scripts/lib/nginx.py" configure "$NGINX_DIR" "$NGINX_PORT" "${REPLICA_PORTS[@]}" \
    || die "could not render deploy/nginx.conf"
"$NGINX" -t -p "$NGINX_DIR" -e "$NGINX_DIR/error.log" -c "$NGINX_DIR/nginx.conf" >"$NGINX_DIR/test.log" 2>&1 \
    || die "nginx -t refused the configuration: $(cat "$NGINX_DIR/test.log")"
"$NGINX" -p "$NGINX_DIR" -e "$NGINX_DIR/error.log" -c "$NGINX_DIR/nginx.conf" >"$NGINX_DIR/stdout.log" 2>&1 &
NGINX_PID=$!
ready=""
for ((i = 0; i < 100; i++)); do
    if python3 -c "import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', $NGINX_PORT, timeout=2); c.request('GET', '/healthz'); sys.exit(c.getresponse().status != 200)" 2>/dev/null; then
        ready=1
        break
    fi
    kill -0 "$NGINX_PID" 2>/dev/null || break
    sleep 0.1
done
[[ -n $ready ]] || die "nginx did not answer /healthz: $(tail -3 "$NGINX_DIR/error.log" 2>/dev/null | tr '\n' ' ')"
note "nginx: pid $NGINX_PID, port $NGINX_PORT, upstream 127.0.0.1:{$(IFS=,; echo "${REPLICA_PORTS[*]}")}"

# --- the driver, and PostgreSQL restarts on its request -------------------------------------------

ACK_FILE=$WORK/postgres-restarted
RESTART_REQUESTED=0
trap 'RESTART_REQUESTED=1' USR1
driver=(python3 "$ROOT/scripts/replicas.py" --nginx-port "$NGINX_PORT" --control-pid $$ --ack-file "$ACK_FILE"
    --seconds "$SECONDS_ARG" --postgres-down "$POSTGRES_DOWN")
for ((n = 0; n < REPLICA_COUNT; n++)); do
    driver+=(--replica "${REPLICA_PORTS[n]}:${REPLICA_PIDS[n]}")
done
[[ $MODE != sqlite ]] && driver+=(--postgres)
if [[ $MODE == failover ]]; then
    driver+=(--failover --direct-database "postgres://$POSTGRES_USER@127.0.0.1:$STANDBY_PORT/postgres"
        --psql "$POSTGRES_BIN/psql" "${DRIVER_KILL[@]}")
fi
[[ -n $SHORT ]] && driver+=("$SHORT")
"${driver[@]}" "${DRIVER_ARGS[@]}" &
DRIVER_PID=$!
status=0
while :; do
    status=0
    wait "$DRIVER_PID" || status=$?
    if ((RESTART_REQUESTED)); then
        RESTART_REQUESTED=0
        if [[ $MODE == failover ]]; then
            note "failing over: the primary killed, the standby promoted $POSTGRES_DOWN s later"
            if fail_over "$POSTGRES_DOWN" && point_pgbouncer "$STANDBY_PORT"; then
                echo "ok $FAILOVER_KILLED_AT" >"$ACK_FILE"
            else
                echo failed >"$ACK_FILE"
            fi
            note "the standby is the primary; pgbouncer points at it"
        else
            note "restarting PostgreSQL (down for $POSTGRES_DOWN s)"
            if restart_postgres "$POSTGRES_DOWN"; then echo ok >"$ACK_FILE"; else echo failed >"$ACK_FILE"; fi
            note "PostgreSQL is back"
        fi
        continue
    fi
    kill -0 "$DRIVER_PID" 2>/dev/null || break
done
DRIVER_PID=""

# --- the replicas stop cleanly ------------------------------------------------------------------

for ((n = 1; n <= REPLICA_COUNT; n++)); do
    var=REPLICA${n}_PID
    pid=${!var}
    errors=$(grep -ciE 'error|critical' "$WORK/replica$n.err" || true)
    if ! kill -0 "$pid" 2>/dev/null; then
        note "replica$n is gone (killed by the driver); $errors error lines"
        wait "$pid" 2>/dev/null || true
        printf -v "$var" %s ""
        continue
    fi
    kill -TERM "$pid"
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    code=0
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"; wait "$pid" 2>/dev/null || true; code=timeout
    else
        wait "$pid" || code=$?
    fi
    printf -v "$var" %s ""
    if [[ $code == 0 ]]; then
        echo "ok - replica$n stopped on SIGTERM with exit status 0 ($errors error lines in its log)"
    else
        echo "FAIL - replica$n did not stop cleanly on SIGTERM ($code); log: $(tail -3 "$WORK/replica$n.err" | tr '\n' ' ')"
        status=1
    fi
    if ((errors)); then
        grep -iE 'error|critical' "$WORK/replica$n.err" | tail -3 | sed "s/^/# replica$n: /" | cut -c1-300
    fi
done
if ((status)); then
    note "nginx error log (last lines):"
    tail -5 "$NGINX_DIR/error.log" 2>/dev/null | sed 's/^/#   /' | cut -c1-300 || true
fi
exit "$status"
