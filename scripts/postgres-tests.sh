#!/usr/bin/env bash
# The tests on PostgreSQL, against a real server: starts a throwaway cluster on 127.0.0.1
# (scripts/lib/postgres.sh) and runs, with LIBRARY_TEST_POSTGRES pointing at it:
# - the libpq layer's tests (PostgreSQLTests);
# - the whole API suite (LibraryAPITests) with LIBRARY_TEST_ENGINE=postgres: every test server
#   not given a SQLite file runs on PostgreSQL, in a schema of its own;
# - the Swift client's suite (LibraryClientTests) against library-server processes on PostgreSQL;
# - the randomized live test once more with LIBRARY_TEST_FEED=log, where the live engine hears
#   every commit from the change log, as a replica hears the others' writes; and again with
#   LIBRARY_TEST_FEED=notify, where it hears every commit from its notification's rows (only the
#   randomized test: in both modes a write is answered before the live engine hears it, as on
#   another replica, so tests that subscribe right after a write and expect it may race);
# - the hostile-request and soak scripts on a server on PostgreSQL (a schema each);
# - the API suite again with LIBRARY_TEST_POOLED=1: the store as behind a pooler in transaction
#   mode (unnamed statements, no session state);
# - scripts/replicas.sh --short: three replicas behind nginx on a cluster of their own, one killed
#   with SIGKILL and PostgreSQL restarted mid-run; then twice with --failover (a synchronous standby
#   and pgbouncer in transaction mode; the primary killed, the standby promoted), the second time
#   with a replica killed during the failover.
# Then removes the cluster. Installs postgresql, libpq-dev and nginx when missing (root).
# SOAK_SECONDS (default 60) sets the soak's length.
#
#     bash scripts/postgres-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || missing+=(postgresql)
command -v pgbouncer >/dev/null || [[ -x /usr/sbin/pgbouncer ]] || missing+=(pgbouncer)
dpkg -s libpq-dev >/dev/null 2>&1 || missing+=(libpq-dev)
if ((${#missing[@]})); then
    echo "== installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi

source scripts/lib/postgres.sh
start_postgres
echo "== PostgreSQL at $POSTGRES_URL"
export LIBRARY_TEST_POSTGRES=$POSTGRES_URL
swift build --build-tests
log=/tmp/postgres-tests.$$.log
run() { # FILTER=… run NAME [VAR=VALUE…]: one test run, which must pass and skip nothing
    local name=$1
    shift
    echo "== $name"
    env "$@" timeout 900 swift test --skip-build --filter "$FILTER" 2>&1 | tee "$log"
    if ! grep -q "Test run with .* passed" "$log" || grep -q "skipped" "$log"; then
        rm -f "$log"
        echo "postgres-tests: $name FAILED" >&2
        exit 1
    fi
}
FILTER=PostgreSQLTests run "libpq layer"
FILTER=LibraryAPITests run "API suite on PostgreSQL" LIBRARY_TEST_ENGINE=postgres
FILTER=LibraryAPITests run "API suite on PostgreSQL as behind a transaction pooler (unnamed statements)" \
    LIBRARY_TEST_ENGINE=postgres LIBRARY_TEST_POOLED=1
FILTER=LibraryClientTests run "Swift client against a server on PostgreSQL" LIBRARY_TEST_ENGINE=postgres
FILTER="LiveRandomizedTests|LiveWindowTests" run "live engine fed from the change log" LIBRARY_TEST_ENGINE=postgres LIBRARY_TEST_FEED=log
FILTER="LiveRandomizedTests|LiveWindowTests" run "live engine fed by notifications' rows" \
    LIBRARY_TEST_ENGINE=postgres LIBRARY_TEST_FEED=notify
rm -f "$log"
server=.build/debug/library-server
echo "== hostile requests on PostgreSQL"
LIBRARY_TEST_ENGINE=postgres python3 scripts/hostile-requests.py "$server"
echo "== soak on PostgreSQL"
LIBRARY_TEST_ENGINE=postgres python3 scripts/soak.py "$server" --seconds "${SOAK_SECONDS:-60}"
echo "== three replicas behind nginx, a replica killed, PostgreSQL restarted"
LIBRARY_SERVER=$server bash scripts/replicas.sh --short
echo "== a synchronous standby and pgbouncer: the primary killed, the standby promoted"
LIBRARY_SERVER=$server bash scripts/replicas.sh --short --failover
echo "== the same, with a replica killed during the failover"
LIBRARY_SERVER=$server bash scripts/replicas.sh --short --failover --kill-during-failover
echo "postgres-tests: passed"
