#!/usr/bin/env bash
# The PostgreSQL layer's tests against a real server: starts a throwaway cluster on 127.0.0.1
# (scripts/lib/postgres.sh), runs `swift test --filter PostgreSQLTests` with LIBRARY_TEST_POSTGRES
# pointing at it, and removes the cluster. Installs postgresql and libpq-dev when missing (root).
#
#     bash scripts/postgres-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || missing+=(postgresql)
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
LIBRARY_TEST_POSTGRES=$POSTGRES_URL timeout 600 swift test --filter PostgreSQLTests 2>&1 | tee /tmp/postgres-tests.$$.log
if ! grep -q "Test run with .* passed" /tmp/postgres-tests.$$.log || grep -q "skipped" /tmp/postgres-tests.$$.log; then
    rm -f /tmp/postgres-tests.$$.log
    echo "postgres-tests: FAILED" >&2
    exit 1
fi
rm -f /tmp/postgres-tests.$$.log
echo "postgres-tests: passed"
