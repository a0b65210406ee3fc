# A throwaway PostgreSQL cluster on 127.0.0.1, for tests: source this file, call start_postgres,
# then use $POSTGRES_URL; stop_postgres (also run on exit) stops it and removes its directory.
# restart_postgres SECONDS stops the running cluster (`-m fast`: clients are disconnected), waits
# SECONDS (default 0), and starts it again on the same port and directory, same $POSTGRES_URL.
#
# PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user (or
# `nobody`). Debian's binaries live in /usr/lib/postgresql/<version>/bin, not on PATH.

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
        -o "-c listen_addresses=127.0.0.1 -p $POSTGRES_PORT -k $POSTGRES_DIR -c fsync=off -c max_connections=200" start >/dev/null \
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
