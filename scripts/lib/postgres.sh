# A throwaway PostgreSQL cluster on 127.0.0.1, for tests: source this file, call start_postgres,
# then use $POSTGRES_URL; stop_postgres (also run on exit) stops it and removes its directory.
# restart_postgres SECONDS stops the running cluster (`-m fast`: clients are disconnected), waits
# SECONDS (default 0), and starts it again on the same port and directory, same $POSTGRES_URL.
#
# PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user (or
# `nobody`). Debian's binaries live in /usr/lib/postgresql/<version>/bin, not on PATH.
# fsync is off (tests need no durability across a machine's crash) unless POSTGRES_FSYNC=on.
#
# The one starter of throwaway clusters: programs in other languages run it as a command
# (Benchmarks/postgres.py): `bash scripts/lib/postgres.sh start` starts a cluster that outlives
# the command and prints its POSTGRES_DIR, POSTGRES_BIN, POSTGRES_USER, POSTGRES_PORT and
# POSTGRES_URL, a NAME=VALUE a line; `bash scripts/lib/postgres.sh stop DIR` stops it (immediate
# mode) and removes its directory.

POSTGRES_DIR=""
POSTGRES_URL=""
POSTGRES_PORT=""

postgres_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [[ -n $dir && -x $dir/initdb ]] || { echo "PostgreSQL is not installed: apt-get install postgresql" >&2; return 1; }
    echo "$dir"
}

start_postgres() {
    local bin user port
    bin=$(postgres_bin) || return 1
    POSTGRES_DIR=$(mktemp -d /tmp/library-postgres.XXXXXX)
    chmod 755 "$POSTGRES_DIR"
    user=$(id -un)
    local run=()
    if [[ $(id -u) == 0 ]]; then
        user=$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)
        chown "$user" "$POSTGRES_DIR"
        run=(runuser -u "$user" --)
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${run[@]}" "$bin/initdb" -D "$POSTGRES_DIR/data" -U "$user" --auth=trust -E UTF8 --no-sync >"$POSTGRES_DIR/initdb.log" 2>&1 \
        || { cat "$POSTGRES_DIR/initdb.log" >&2; return 1; }
    POSTGRES_USER=$user
    POSTGRES_BIN=$bin
    POSTGRES_PORT=$port
    postgres_pg_ctl_start || return 1
    POSTGRES_URL="postgres://$user@127.0.0.1:$port/postgres"
    trap stop_postgres EXIT
}

postgres_run() { # postgres_run COMMAND...: as the cluster's owner
    if [[ $(id -u) == 0 ]]; then runuser -u "$POSTGRES_USER" -- "$@"; else "$@"; fi
}

postgres_pg_ctl_start() {
    postgres_run "$POSTGRES_BIN/pg_ctl" -D "$POSTGRES_DIR/data" -l "$POSTGRES_DIR/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $POSTGRES_PORT -k $POSTGRES_DIR -c fsync=${POSTGRES_FSYNC:-off} -c max_connections=200" start >/dev/null \
        || { cat "$POSTGRES_DIR/server.log" >&2; return 1; }
}

restart_postgres() { # restart_postgres [SECONDS]: stop (-m fast), SECONDS down, start on the same port
    local down=${1:-0}
    [[ -n $POSTGRES_DIR && -d $POSTGRES_DIR/data ]] || { echo "restart_postgres: no cluster (start_postgres first)" >&2; return 1; }
    postgres_run "$POSTGRES_BIN/pg_ctl" -D "$POSTGRES_DIR/data" -m fast -w -t 30 stop >/dev/null \
        || { echo "restart_postgres: pg_ctl stop failed" >&2; tail -5 "$POSTGRES_DIR/server.log" >&2; return 1; }
    sleep "$down"
    postgres_pg_ctl_start
}

stop_postgres() {
    [[ -n $POSTGRES_DIR && -d $POSTGRES_DIR ]] || return 0
    if [[ -f $POSTGRES_DIR/data/postmaster.pid ]]; then
        local run=()
        [[ $(id -u) == 0 ]] && run=(runuser -u "$POSTGRES_USER" --)
        "${run[@]}" "$POSTGRES_BIN/pg_ctl" -D "$POSTGRES_DIR/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$POSTGRES_DIR"
    POSTGRES_DIR=""
}

# --- a synchronous standby, its promotion, and pgbouncer in front ---------------------------------
# start_standby: a streaming standby of the running cluster (pg_basebackup), on a port of its own
# (STANDBY_DIR, STANDBY_PORT), made the primary's synchronous standby: from then on a commit is
# acknowledged only once the standby has flushed it. fail_over SECONDS: the primary's postmaster
# and every backend killed with SIGKILL (a machine gone, no shutdown), SECONDS later the standby
# promoted; the primary's directory stays until stop_postgres. start_pgbouncer: pgbouncer in
# transaction mode on BOUNCER_PORT in front of the primary (BOUNCER_URL); point_pgbouncer PORT
# sends its new connections to PORT (reload, as a failover manager does after a promotion).
# fail_over sets FAILOVER_KILLED_AT (seconds since the epoch) to the moment of the kill.

STANDBY_DIR=""
STANDBY_PORT=""
FAILOVER_KILLED_AT=""
BOUNCER_DIR=""
BOUNCER_PORT=""
BOUNCER_URL=""
BOUNCER_PID=""

postgres_sql() { # postgres_sql PORT SQL: one statement as the cluster's owner, its rows unaligned
    "$POSTGRES_BIN/psql" -X -q -At -h 127.0.0.1 -p "$1" -U "$POSTGRES_USER" -d postgres -c "$2"
}

start_standby() {
    [[ -n $POSTGRES_DIR ]] || { echo "start_standby: no primary (start_postgres first)" >&2; return 1; }
    STANDBY_DIR=$(mktemp -d /tmp/library-standby.XXXXXX)
    chmod 755 "$STANDBY_DIR"
    [[ $(id -u) == 0 ]] && chown "$POSTGRES_USER" "$STANDBY_DIR"
    STANDBY_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    postgres_run "$POSTGRES_BIN/pg_basebackup" -h 127.0.0.1 -p "$POSTGRES_PORT" -U "$POSTGRES_USER" \
        -D "$STANDBY_DIR/data" -R -X stream --no-sync >"$STANDBY_DIR/basebackup.log" 2>&1 \
        || { cat "$STANDBY_DIR/basebackup.log" >&2; return 1; }
    # The name the primary's synchronous_standby_names refers to.
    echo "primary_conninfo = 'host=127.0.0.1 port=$POSTGRES_PORT user=$POSTGRES_USER application_name=standby'" \
        | postgres_run tee -a "$STANDBY_DIR/data/postgresql.auto.conf" >/dev/null
    postgres_run "$POSTGRES_BIN/pg_ctl" -D "$STANDBY_DIR/data" -l "$STANDBY_DIR/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $STANDBY_PORT -k $STANDBY_DIR -c fsync=off -c max_connections=200" start >/dev/null \
        || { cat "$STANDBY_DIR/server.log" >&2; return 1; }
    postgres_sql "$POSTGRES_PORT" "ALTER SYSTEM SET synchronous_standby_names = 'standby'" >/dev/null || return 1
    postgres_sql "$POSTGRES_PORT" "SELECT pg_reload_conf()" >/dev/null || return 1
    local i
    for ((i = 0; i < 100; i++)); do
        [[ $(postgres_sql "$POSTGRES_PORT" "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'") == sync ]] \
            && return 0
        sleep 0.1
    done
    echo "start_standby: the standby did not become synchronous" >&2
    return 1
}

fail_over() { # fail_over [SECONDS]: kill -9 the primary, SECONDS later promote the standby
    local down=${1:-0} postmaster
    postmaster=$(head -1 "$POSTGRES_DIR/data/postmaster.pid" 2>/dev/null) || { echo "fail_over: no primary running" >&2; return 1; }
    # The postmaster and its children at once, as a machine that vanished: nothing gets to finish.
    kill -KILL $(pgrep -P "$postmaster") "$postmaster" 2>/dev/null || true
    FAILOVER_KILLED_AT=$EPOCHREALTIME
    sleep "$down"
    postgres_run "$POSTGRES_BIN/pg_ctl" -D "$STANDBY_DIR/data" -w -t 30 promote >/dev/null \
        || { echo "fail_over: pg_ctl promote failed" >&2; tail -5 "$STANDBY_DIR/server.log" >&2; return 1; }
}

start_pgbouncer() {
    local bouncer
    bouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
    [[ -x $bouncer ]] || { echo "pgbouncer is not installed: apt-get install pgbouncer" >&2; return 1; }
    BOUNCER_DIR=$(mktemp -d /tmp/library-pgbouncer.XXXXXX)
    chmod 755 "$BOUNCER_DIR"
    BOUNCER_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    echo "\"$POSTGRES_USER\" \"\"" >"$BOUNCER_DIR/users.txt"
    pgbouncer_config "$POSTGRES_PORT"
    [[ $(id -u) == 0 ]] && chown -R "$POSTGRES_USER" "$BOUNCER_DIR"
    # pgbouncer refuses to run as root: as the cluster's owner.
    postgres_run "$bouncer" "$BOUNCER_DIR/pgbouncer.ini" >"$BOUNCER_DIR/stdout.log" 2>&1 &
    BOUNCER_PID=$!
    local i
    for ((i = 0; i < 100; i++)); do
        postgres_sql "$BOUNCER_PORT" "SELECT 1" >/dev/null 2>&1 && break
        kill -0 "$BOUNCER_PID" 2>/dev/null || { cat "$BOUNCER_DIR/pgbouncer.log" >&2; return 1; }
        sleep 0.1
    done
    BOUNCER_URL="postgres://$POSTGRES_USER@127.0.0.1:$BOUNCER_PORT/postgres"
}

pgbouncer_config() { # pgbouncer_config PORT: pgbouncer.ini with the database on PORT
    cat >"$BOUNCER_DIR/pgbouncer.ini.new" <<INI
[databases]
postgres = host=127.0.0.1 port=$1 dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $BOUNCER_DIR/users.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 1000
server_connect_timeout = 3
server_login_retry = 1
logfile = $BOUNCER_DIR/pgbouncer.log
pidfile = $BOUNCER_DIR/pgbouncer.pid
INI
    mv "$BOUNCER_DIR/pgbouncer.ini.new" "$BOUNCER_DIR/pgbouncer.ini"
}

point_pgbouncer() { # point_pgbouncer PORT: new server connections go to PORT
    pgbouncer_config "$1"
    kill -HUP "$(cat "$BOUNCER_DIR/pgbouncer.pid")"
}

stop_failover_cluster() { # pgbouncer and the standby (stop_postgres removes the primary)
    if [[ -n $BOUNCER_PID ]]; then
        kill "$(cat "$BOUNCER_DIR/pgbouncer.pid" 2>/dev/null)" "$BOUNCER_PID" 2>/dev/null
        wait "$BOUNCER_PID" 2>/dev/null || true
    fi
    [[ -n $BOUNCER_DIR ]] && rm -rf "$BOUNCER_DIR"
    BOUNCER_PID="" BOUNCER_DIR=""
    if [[ -n $STANDBY_DIR && -d $STANDBY_DIR ]]; then
        [[ -f $STANDBY_DIR/data/postmaster.pid ]] \
            && postgres_run "$POSTGRES_BIN/pg_ctl" -D "$STANDBY_DIR/data" -m immediate -w -t 30 stop >/dev/null 2>&1
        rm -rf "$STANDBY_DIR"
    fi
    STANDBY_DIR=""
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    case ${1:-} in
    start)
        start_postgres || exit 1
        trap - EXIT
        for name in POSTGRES_DIR POSTGRES_BIN POSTGRES_USER POSTGRES_PORT POSTGRES_URL; do echo "$name=${!name}"; done
        ;;
    stop)
        [[ -n ${2:-} && -d $2/data ]] || { echo "postgres.sh stop: no cluster in '${2:-}'" >&2; exit 2; }
        POSTGRES_DIR=$2
        POSTGRES_BIN=$(postgres_bin) || exit 1
        POSTGRES_USER=$(stat -c %U "$POSTGRES_DIR")
        stop_postgres
        ;;
    *)
        echo "usage: bash scripts/lib/postgres.sh start | stop DIR" >&2
        exit 2
        ;;
    esac
fi
