#!/usr/bin/env bash
# Fuzzes the HTTP request parser, the JSON body decoders and the token verifier (JWT, JWK sets,
# base64url) with libFuzzer (and AddressSanitizer) for a bounded time each, starting from the
# committed corpus in Tests/FuzzCorpus/{http,json,jwt}.
#
# The checks (Sources/FuzzChecks/HTTPParserCheck.swift and
# Sources/FuzzChecks/BodyCheck.swift) trap on: a status other than 4xx/501/505 for
# bad input, a request parsed differently when its bytes arrive in other pieces, a JSON value that
# does not survive printing and parsing again, and anything ASan sees (overflows, use after free).
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60; .ci/run uses 20)
# On a crash it stops, copies the input to Tests/FuzzCorpus/<target>/regression-<hash> (commit it:
# the tests replay every file there), and exits non-zero. New interesting inputs found on the way
# stay in a temporary directory; pass KEEP_CORPUS=1 to merge them into the committed corpus.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECONDS_PER_TARGET=${1:-60}
cd "$ROOT"

echo "== building the fuzz target (libFuzzer + AddressSanitizer)"
LIBRARY_FUZZ=1 swift build --product library-fuzz --scratch-path .build/fuzz 2>&1 | grep -E 'error|warning: |Compiling|Build' || true
FUZZER=.build/fuzz/debug/library-fuzz
[[ -x $FUZZER ]] || { echo "fuzz: the build produced no $FUZZER" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
status=0
for target in http json jwt; do
    corpus=$WORK/$target
    mkdir -p "$corpus" "$WORK/artifacts-$target"
    cp Tests/FuzzCorpus/$target/* "$corpus/"
    echo "== fuzzing $target for ${SECONDS_PER_TARGET}s from $(ls "$corpus" | wc -l) seeds"
    if ! "$FUZZER" "$target" -max_total_time="$SECONDS_PER_TARGET" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$WORK/artifacts-$target/" "$corpus" >"$WORK/$target.log" 2>&1; then
        status=1
        grep -E 'ERROR|Fatal error|SUMMARY|panic|precondition' "$WORK/$target.log" | head -20
        for crash in "$WORK/artifacts-$target"/*; do
            [[ -f $crash ]] || continue
            keep=Tests/FuzzCorpus/$target/regression-$(sha1sum "$crash" | cut -c1-12)
            cp "$crash" "$keep"
            echo "fuzz: $target crashed; the input is now $keep (replay: swift run library-fuzz $target $keep)"
        done
    fi
    grep -E '^stat::number_of_executed_units|^stat::new_units_added|^Done' "$WORK/$target.log" || true
    if [[ ${KEEP_CORPUS:-0} == 1 ]]; then
        "$FUZZER" "$target" -merge=1 "Tests/FuzzCorpus/$target" "$corpus" >/dev/null 2>&1
    fi
done
((status == 0)) && echo "fuzz: no crash in any target" || echo "fuzz: FAILED"
exit "$status"
