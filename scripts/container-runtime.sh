#!/usr/bin/env bash
# Proves the Dockerfile's runtime stage without a Docker engine (none runs on these machines):
#
#   1. builds the binary as the build stage does (`swift build -c release --static-swift-stdlib`);
#   2. makes a minimal Debian bookworm root (`debootstrap --variant=minbase`), then applies the
#      runtime stage to it: its RUN line under chroot (apt-get install libsqlite3-0 libpq5, the user,
#      /data), its two COPYs, and its USER, ENV and ENTRYPOINT when starting the server;
#   3. checks that the binary needs nothing the image lacks (ldd), that the server starts, that the
#      HEALTHCHECK command passes, that a CRUD round trip and an event stream work, that SIGTERM
#      (the STOPSIGNAL) stops it with exit 0, and that the data is in /data, owned by the user.
#
# Every value is read from the Dockerfile, so the script fails when the two drift apart.
# Usage: scripts/container-runtime.sh          (needs root: debootstrap, chroot, mount)
# Env: RUNTIME_ROOTFS_CACHE=DIR keeps the debootstrap'ed base there between runs (default: none).
# Installs debootstrap with apt-get when missing. Only talks to 127.0.0.1 and the Debian mirror.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DOCKERFILE=$ROOT/Dockerfile
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm

passed=0
failed=0
check() { # check DESCRIPTION COMMAND...
    local description=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
        echo "ok   - $description"
    else
        failed=$((failed + 1))
        echo "FAIL - $description"
    fi
}
die() {
    echo "container-runtime: $*" >&2
    echo "container-runtime: $passed passed, $((failed + 1)) failed"
    exit 1
}

[[ $(id -u) == 0 ]] || die "needs root (debootstrap, chroot, mount)"
command -v debootstrap >/dev/null || {
    echo "container-runtime: installing debootstrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

# --- the Dockerfile's runtime stage -----------------------------------------------------------

runtime_stage=$(awk '/^FROM /{n++} n==2' "$DOCKERFILE")
[[ -n $runtime_stage ]] || die "no second FROM (runtime stage) in the Dockerfile"
instruction() { # instruction NAME: the stage's lines for that instruction, without the keyword
    grep -E "^$1 " <<<"$runtime_stage" | sed -E "s/^$1 +//"
}
json_array() { # json_array TEXT: a JSON array as shell words, one per line
    python3 -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$1"
}
build_command=$(grep -E '^RUN swift build ' "$DOCKERFILE" | sed -E 's/^RUN //; s/ *\\$//')
run_line=$(instruction RUN)
binary_copy=$(instruction COPY | grep -- '--from=build' | awk '{print $3}')
migrations_copy=$(instruction COPY | grep -E '^Migrations ' | awk '{print $2}')
user=$(instruction USER)
env_pairs=$(instruction ENV)
entrypoint=$(json_array "$(instruction ENTRYPOINT)")
healthcheck=$(json_array "$(instruction HEALTHCHECK | sed -E 's/.*CMD +//')")
stop_signal=$(instruction STOPSIGNAL)
for name in build_command run_line binary_copy migrations_copy user env_pairs entrypoint healthcheck; do
    [[ -n ${!name} ]] || die "could not read $name from the Dockerfile"
done
[[ $(wc -l <<<"$run_line") == 1 ]] || die "the runtime stage should have one RUN line"
echo "runtime stage: user $user; $env_pairs; stop signal ${stop_signal:-SIGTERM}"

# --- 1. the binary, as the build stage makes it -------------------------------------------------

echo "== $build_command"
(cd "$ROOT" && eval "$build_command")
BINARY=$(cd "$ROOT" && swift build -c release --show-bin-path)/library-server
[[ -x $BINARY ]] || die "no binary at $BINARY"

# --- 2. the root file system --------------------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/container-runtime.XXXXXX")
FS=$WORK/rootfs
SERVER_PID=""
mounted=()
cleanup() {
    local status=$?
    if [[ -n $SERVER_PID ]]; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT

base=${RUNTIME_ROOTFS_CACHE:-}
if [[ -n $base && -x $base/bin/sh ]]; then
    echo "== debootstrap base from $base"
else
    base=${base:-$WORK/base}
    echo "== debootstrap --variant=minbase $SUITE (a minute or two)"
    rm -rf "$base"
    timeout 900 debootstrap --variant=minbase "$SUITE" "$base" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
        { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
fi
cp -a "$base" "$FS"

# The runtime a container engine would give: /proc, /dev, name resolution for apt-get.
mount -t proc proc "$FS/proc" && mounted+=("$FS/proc")
mount --bind /dev "$FS/dev" && mounted+=("$FS/dev")
cp /etc/resolv.conf "$FS/etc/resolv.conf"

echo "== RUN $run_line"
chroot "$FS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    /bin/sh -c "$run_line" >"$WORK/run.log" 2>&1 || { tail -20 "$WORK/run.log" >&2; die "the RUN line failed"; }
install -D -m 0755 "$BINARY" "$FS$binary_copy"
mkdir -p "$FS$migrations_copy" && cp "$ROOT"/Migrations/*.sql "$FS$migrations_copy/"

# --- 3. checks ----------------------------------------------------------------------------------

missing_libraries() { ! chroot "$FS" /usr/bin/ldd "$binary_copy" | grep -q 'not found'; }
check "ldd: every library the binary links is in the image" missing_libraries
check "the image has no curl (the health check is the binary's own)" test ! -e "$FS/usr/bin/curl"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The ENV line, with the port moved off 8080 so the check cannot collide with anything on the host.
read -r -a env_words <<<"$env_pairs"
container_env=(PATH=/usr/local/bin:/usr/bin:/bin "${env_words[@]}" "LIBRARY_PORT=$port")
in_container() { chroot --userspec="$user:$user" "$FS" /usr/bin/env -i "${container_env[@]}" "$@"; }

mkfifo "$WORK/stdout"
# chroot and env exec, so $! is the server itself and gets the stop signal, as PID 1 would.
chroot --userspec="$user:$user" "$FS" /usr/bin/env -i "${container_env[@]}" $entrypoint \
    >"$WORK/stdout" 2>"$WORK/stderr" &
SERVER_PID=$!
ready=""
read -r -t 20 ready <"$WORK/stdout" || true
check "the server starts as user $user and prints its ready line ($ready)" test "$ready" == "listening on http://0.0.0.0:$port"
URL=http://127.0.0.1:$port

check "HEALTHCHECK CMD passes" in_container $healthcheck
check "GET /healthz answers 200" curl -fsS -o /dev/null "$URL/healthz"

json() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
library=$(curl -fsS -X POST "$URL/libraries" -H 'Content-Type: application/json' -d '{"name":"Container"}' | json id) || true
check "POST /libraries" test -n "$library"
book=$(curl -fsS -X POST "$URL/books" -H 'Content-Type: application/json' \
    -d "{\"libraryId\":\"$library\",\"title\":\"Dune\",\"isbn\":\"0441172717\"}" | json id) || true
check "POST /books" test -n "$book"
curl -sN --max-time 3 "$URL/books/$book/events?fields=title" >"$WORK/events" 2>/dev/null &
events_pid=$!
sleep 0.5
patched=$(curl -fsS -X PATCH "$URL/books/$book" -H 'Content-Type: application/merge-patch+json' \
    -H 'If-Match: "1"' -d '{"title":"Dune Messiah"}' | json title) || true
check "PATCH /books/{id} with If-Match" test "$patched" == "Dune Messiah"
check "GET /books/{id} reads it back" sh -c "curl -fsS '$URL/books/$book' | grep -q 'Dune Messiah'"
wait "$events_pid" || true
check "the event stream got the snapshot and the change" \
    sh -c "grep -q '^event: snapshot' '$WORK/events' && grep -q 'Dune Messiah' '$WORK/events'"
check "DELETE /books/{id} then 404" \
    sh -c "curl -fsS -X DELETE -o /dev/null '$URL/books/$book' && [ \$(curl -s -o /dev/null -w '%{http_code}' '$URL/books/$book') = 404 ]"

kill -s "${stop_signal:-SIGTERM}" "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=""
check "${stop_signal:-SIGTERM} stops the server with exit 0" test "$status" == 0
database=$(sed -nE 's/.*LIBRARY_DATABASE=([^ ]+).*/\1/p' <<<"$env_pairs")
check "the database is on the volume ($database), owned by $user" test "$(stat -c %u "$FS$database")" == "$user"
check "the WAL was checkpointed at shutdown" sh -c "[ ! -s '$FS$database-wal' ]"
check "the library written through the API is in the database file" grep -q Container "$FS$database"

echo "container-runtime: $passed passed, $failed failed"
((failed == 0))
