#!/usr/bin/env bash
# library-server's fan-out beside the physical floor of this machine, in the same rounds.
#
#   Benchmarks/fanout-floor.sh [N=18000] [R=20] [ROUNDS=4]
#
# Each round runs Benchmarks/fanout.sh (N subscribers on one book, R title changes, the same load
# generator, Benchmarks/fanout/fanout.c) against library-server and against
# Benchmarks/fanout/floor.c, a C server that does nothing but encode each change once and send()
# it to every subscriber, the sends spread over one thread per core; and, when Debian's
# liburing-dev is installed (as root it is installed when missing), against the same floor
# submitting its sends through io_uring, 4,096 per system call (`floor --uring`): what batching
# the system calls would be worth. The order flips every round. The floor's latency is what the
# kernel's loopback and the subscribers' wake-ups cost on this machine at that moment; ours ÷
# floor is what library-server adds.
#
# Prints one line per run and a markdown table of medians, writes
# Benchmarks/results/fanout-floor.json (with the commit and the machine) and has
# Benchmarks/figures.py put it in the README. SERVER: the
# library-server binary (default .build/release/library-server).
set -euo pipefail

N=${1:-18000}
R=${2:-20}
ROUNDS=${3:-4}
for value in "$N" "$R" "$ROUNDS"; do
    [[ $value =~ ^[0-9]+$ && $value -gt 0 ]] || { echo "usage: $0 [subscribers] [changes] [rounds]" >&2; exit 64; }
done
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OURS=${SERVER:-$ROOT/.build/release/library-server}
[[ -x $OURS ]] || { echo "$OURS is missing: swift build -c release --product library-server" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fanout-floor.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cc -O2 -std=gnu11 -pthread -o "$WORK/floor" "$ROOT/Benchmarks/fanout/floor.c"
CONTENDERS=(ours floor)
if [[ ! -e /usr/include/liburing.h && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liburing-dev >/dev/null 2>&1 || true
fi
if [[ -e /usr/include/liburing.h ]] &&
    cc -O2 -std=gnu11 -pthread -DFLOOR_URING -o "$WORK/floor-uring.bin" "$ROOT/Benchmarks/fanout/floor.c" -luring; then
    printf '#!/bin/sh\nexec "%s" --uring "$@"\n' "$WORK/floor-uring.bin" >"$WORK/floor-uring"
    chmod +x "$WORK/floor-uring"
    CONTENDERS+=(uring)
else
    echo "== no liburing-dev: the io_uring floor is left out"
fi

RUNS=$WORK/runs.tsv
: >"$RUNS"
for ((round = 1; round <= ROUNDS; round++)); do
    order=("${CONTENDERS[@]}")
    ((round % 2 == 0)) && mapfile -t order < <(printf '%s\n' "${CONTENDERS[@]}" | tac)
    for name in "${order[@]}"; do
        binary=$OURS
        [[ $name == floor ]] && binary=$WORK/floor
        [[ $name == uring ]] && binary=$WORK/floor-uring
        log=$WORK/$name-$round.log
        if ! SERVER=$binary bash "$ROOT/Benchmarks/fanout.sh" "$N" "$R" >"$log" 2>&1; then
            echo "round $round, $name: fanout.sh failed:" >&2
            tail -n 30 "$log" >&2
            exit 1
        fi
        result=$(grep '^RESULT ' "$log" | tail -n 1)
        cpu=$(sed -n 's/^server CPU during rounds *\([0-9?]*\) ms$/\1/p' "$log")
        field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $result"; }
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$(field p50)" "$(field p99)" "$(field max)" \
            "$(field missed)" "$cpu" >>"$RUNS"
        echo "round $round  $name: p50 $(field p50) ms, p99 $(field p99) ms, max $(field max) ms," \
            "missed $(field missed), server CPU ${cpu} ms for $R changes to $(field connected) subscribers"
    done
done

python3 - "$RUNS" "$N" "$R" "$ROUNDS" "$ROOT" <<'PYTHON'
import datetime, json, os, platform, statistics, subprocess, sys
runs_path, n, r, rounds, root = sys.argv[1:]
runs = [line.split("\t") for line in open(runs_path).read().splitlines()]
def values(name, column):
    return [float(run[column]) for run in runs if run[1] == name and run[column] not in ("", "?")]
summary = {}
for name in ("ours", "floor", "uring"):
    if not values(name, 3):
        continue
    summary[name] = {key: statistics.median(values(name, column)) if values(name, column) else None
                     for key, column in (("p50Ms", 2), ("p99Ms", 3), ("maxMs", 4), ("cpuMs", 6))}
    summary[name]["missed"] = sum(int(run[5] or 0) for run in runs if run[1] == name)
ratio = summary["ours"]["p99Ms"] / summary["floor"]["p99Ms"] if summary["floor"]["p99Ms"] else None
commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
record = {
    "benchmark": "fanout-floor", "commit": commit, "date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    "subscribers": int(n), "changes": int(r), "rounds": int(rounds), "medians": summary, "p99Ratio": ratio,
    "runs": [{"round": int(run[0]), "server": run[1], "p50Ms": float(run[2]), "p99Ms": float(run[3]),
              "maxMs": float(run[4]), "missed": int(run[5] or 0),
              "cpuMs": None if run[6] in ("", "?") else float(run[6])} for run in runs],
}
path = os.path.join(root, "Benchmarks", "results", "fanout-floor.json")
with open(path, "w") as out:
    json.dump(record, out, indent=2, sort_keys=True)
    out.write("\n")
print()
print(f"{n} subscribers on one book, {r} changes per run, {rounds} rounds (medians), commit {commit}:")
print()
print("| server | p50 (ms) | p99 (ms) | max (ms) | server CPU for the run (ms) | missed |")
print("|---|---:|---:|---:|---:|---:|")
for name, label in (("ours", "library-server"), ("floor", "floor (C, one send per subscriber, a thread per core)"),
                    ("uring", "floor, its sends through io_uring")):
    if name not in summary:
        continue
    s = summary[name]
    print(f"| {label} | {s['p50Ms']:.1f} | {s['p99Ms']:.1f} | {s['maxMs']:.1f} | "
          f"{s['cpuMs']:.0f} | {s['missed']} |" if s["cpuMs"] is not None else
          f"| {label} | {s['p50Ms']:.1f} | {s['p99Ms']:.1f} | {s['maxMs']:.1f} | ? | {s['missed']} |")
print()
print(f"p99 ours ÷ floor: {ratio:.2f}" if ratio else "p99 ratio: unknown")
print(f"(written to {os.path.relpath(path, root)})")
PYTHON
python3 "$ROOT/Benchmarks/figures.py"
