#!/usr/bin/env bash
# One command for the whole benchmark: installs wrk if missing, builds library-server and the
# Hummingbird comparator in release mode (one after the other: this is a 2-core machine; the same
# executable is both comparators, `--plain` the second), then runs Benchmarks/bench.py with the
# given options (`Benchmarks/run.sh --help` lists them), then Benchmarks/live.py (options in
# LIVE_ARGS; SKIP_LIVE=1 skips it), then `Benchmarks/live.py --collection` (options in
# LIVE_COLLECTION_ARGS; SKIP_LIVE_COLLECTION=1 skips it).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")

if ! command -v wrk >/dev/null; then
    echo "== installing wrk (Debian package)"
    if [[ $(id -u) -eq 0 ]]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq wrk >/dev/null
fi
for arg in "$@"; do
    if [[ $arg == -h || $arg == --help ]]; then exec python3 "$HERE/bench.py" --help; fi
done
if ! pkg-config --exists sqlite3 2>/dev/null; then
    echo "== installing libsqlite3-dev (Debian package)"
    if [[ $(id -u) -eq 0 ]]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq libsqlite3-dev pkg-config >/dev/null
fi
echo "== building library-server (release)"
swift build -c release --package-path "$ROOT" --product library-server
echo "== building the Hummingbird comparators (release)"
swift build -c release --package-path "$HERE" --product hummingbird-comparator
ulimit -n "$(ulimit -Hn)"
python3 "$HERE/bench.py" "$@"
# The live engine at 100 to 1,000,000 books (LIVE_ARGS, e.g. "--sizes 100000 --seconds 60").
if [[ ${SKIP_LIVE:-} != 1 ]]; then
    # shellcheck disable=SC2086
    python3 "$HERE/live.py" ${LIVE_ARGS:-}
fi
# The collection stream /books/events?libraryId=L&fields=title at 100, 100,000 and 1,000,000 books
# (LIVE_COLLECTION_ARGS, e.g. "--sizes 100,100000 --seconds 10").
if [[ ${SKIP_LIVE_COLLECTION:-} != 1 ]]; then
    # shellcheck disable=SC2086
    python3 "$HERE/live.py" --collection ${LIVE_COLLECTION_ARGS:-}
fi
