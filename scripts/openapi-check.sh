#!/usr/bin/env bash
# Proves openapi.yaml against the real server:
#   1. openapi-spec-validator accepts the document;
#   2. the server's GET /openapi.yaml is byte for byte the same file;
#   3. schemathesis runs every check (enabled in scripts/schemathesis.toml; all phases: examples, coverage, fuzzing, stateful) against a
#      live server started from SERVER_BINARY, with an API token and a read token so the auth rules
#      are tested too, and must find zero failures. The event streams are included: schemathesis
#      validates each event it reads against the stream's event schema (it stops reading a stream
#      after a few events or seconds, scripts/schemathesis.toml). scripts/schemathesis.toml says
#      which documented statuses count as accepting valid data, and why.
#   4. scripts/event-schema-check.py makes every kind of event (snapshot, change, delete) happen
#      on both streams and validates each against openapi.yaml, `data` included;
#   5. the server is still alive afterwards and logged no internal error;
#   6. scripts/redbot-check.py runs REDbot against every GET route of a second server (without a
#      read token: REDbot cannot send one) and fails on any WARN or BAD note.
#
# Usage: scripts/openapi-check.sh [SERVER_BINARY]   (default .build/debug/library-server)
# Env: SCHEMATHESIS_MAX_TIME (seconds, default 150), SCHEMATHESIS_SEED (default 20261121).
# Installs openapi-spec-validator, schemathesis and REDbot with pip when missing. Talks to 127.0.0.1 only.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVER=${1:-$ROOT/.build/debug/library-server}
[[ $SERVER == /* ]] || SERVER=$PWD/$SERVER
MAX_TIME=${SCHEMATHESIS_MAX_TIME:-150}
SEED=${SCHEMATHESIS_SEED:-20261121}
SCHEMATHESIS_VERSION=4.32.5

[[ -x $SERVER ]] || { echo "openapi-check: no server binary at $SERVER" >&2; exit 1; }
python3 -m openapi_spec_validator --help >/dev/null 2>&1 || pip install -q openapi-spec-validator
if [[ $(schemathesis --version 2>/dev/null) != *"$SCHEMATHESIS_VERSION"* ]]; then
    echo "openapi-check: installing schemathesis $SCHEMATHESIS_VERSION"
    pip install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi
command -v redbot >/dev/null 2>&1 || pip install -q redbot

WORK=$(mktemp -d "${TMPDIR:-/tmp}/openapi-check.XXXXXX")
SERVER_PID=""
REDBOT_PID=""
cleanup() {
    for pid in $SERVER_PID $REDBOT_PID; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "== openapi-spec-validator"
python3 -m openapi_spec_validator "$ROOT/openapi.yaml"

export LIBRARY_API_TOKEN="openapi-check-$RANDOM$RANDOM"
# schemathesis sends the API token (which grants reads too) on every operation that takes one; its
# ignored_auth check then proves that reads without a token are refused.
export LIBRARY_READ_TOKEN="openapi-check-read-$RANDOM$RANDOM"
mkfifo "$WORK/ready"
"$SERVER" --port 0 --database "$WORK/library.sqlite" --log-level warning >"$WORK/ready" 2>"$WORK/server.log" &
SERVER_PID=$!
read -r -t 20 line <"$WORK/ready" || { echo "openapi-check: server did not start" >&2; cat "$WORK/server.log" >&2; exit 1; }
URL=${line#listening on }
echo "== server at $URL"

echo "== GET /openapi.yaml is openapi.yaml"
curl -fsS "$URL/openapi.yaml" -o "$WORK/served.yaml"
cmp "$ROOT/openapi.yaml" "$WORK/served.yaml"

echo "== schemathesis $SCHEMATHESIS_VERSION, all checks, up to ${MAX_TIME}s, seed $SEED"
cd "$WORK" # schemathesis keeps its crash cache in the working directory
status=0
timeout $((MAX_TIME + 120)) schemathesis --config-file "$ROOT/scripts/schemathesis.toml" run "$ROOT/openapi.yaml" \
    --url "$URL" \
    --max-time "$MAX_TIME" --max-examples 60 --seed "$SEED" \
    --workers 1 --no-color --warnings off || status=$?

echo "== every event of both streams against openapi.yaml"
timeout 120 python3 "$ROOT/scripts/event-schema-check.py" "$ROOT/openapi.yaml" "$URL" || status=1

echo "== server still serving"
kill -0 "$SERVER_PID" || { echo "openapi-check: the server died" >&2; status=1; }
curl -fsS "$URL/healthz" >/dev/null || { echo "openapi-check: /healthz failed afterwards" >&2; status=1; }
if grep -q 'level=error\|level=critical' "$WORK/server.log"; then
    echo "openapi-check: the server logged errors:" >&2
    grep 'level=error\|level=critical' "$WORK/server.log" | head -20 >&2
    status=1
fi

echo "== REDbot on every GET route"
mkfifo "$WORK/redbot-ready"
env -u LIBRARY_READ_TOKEN "$SERVER" --port 0 --database "$WORK/redbot.sqlite" --log-level warning \
    >"$WORK/redbot-ready" 2>"$WORK/redbot-server.log" &
REDBOT_PID=$!
if read -r -t 20 line <"$WORK/redbot-ready"; then
    timeout 600 python3 "$ROOT/scripts/redbot-check.py" "${line#listening on }" || status=1
else
    echo "openapi-check: the REDbot server did not start" >&2
    status=1
fi
((status == 0)) && echo "openapi-check: passed" || echo "openapi-check: FAILED"
exit "$status"
