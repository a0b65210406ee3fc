#!/usr/bin/env bash
# Server-Sent Events fan-out across replicas: three library-server replicas on one PostgreSQL
# database, N subscribers on each (all on one book), R title changes per load generator, every
# change written through another replica than the one its subscribers are on.
#
#   Benchmarks/replicas_fanout.sh [N_PER_REPLICA=15000] [R=20]
#
# SERVER: the library-server binary (default .build/release/library-server under the repository
# root; it is not built here). Starts a throwaway PostgreSQL cluster (scripts/lib/postgres.sh),
# three replicas on free ports (`--database $POSTGRES_URL --max-connections 19500`), creates one
# library and one book through replica 1, and runs three load generators at once
# (Benchmarks/fanout/fanout.c, compiled with cc -O2 into a temporary directory): generator i opens
# N streams on replica i and PATCHes the title through replica i+1 (mod 3), titles "r<i>-round-K",
# so every change it times reaches its subscribers through the change feed (LISTEN/NOTIFY + change
# log), never through the replica that committed it. Each generator also sees the other two's
# changes (one book): every PATCH is an event for all 3 x N subscribers.
#
# Client side: one generator per replica, since both the server and the client have a hard limit of
# 20,000 open files per process. The 3 x N subscriber sockets are bound to explicit source ports
# below the kernel's local port range (fanout -P), from a source address of their own per generator
# (fanout -a 127.0.0.2, .3, .4), so the generators never collide with each other and leave the local
# range to everything else (the PATCH connections, curl, the replicas' PostgreSQL connections).
#
# Prints the subscribers connected per replica and in total (the generators' count and the
# replicas' library_sse_subscribers), each replica's VmRSS before the subscribers connect and with
# all of them connected (and KiB per subscriber), each generator's RESULT line (latency p50/p90/p99/
# max in ms, missed samples), and each replica's CPU time (user + system) during the rounds. Then
# stops the replicas with SIGTERM and checks that each exits 0 within 15 seconds. Exits non-zero
# when a generator did not get every subscriber or every sample, or a replica failed. A passing
# run is written to Benchmarks/results/replicas-fanout.json, beside the runs of other sizes on the
# same commit.
set -euo pipefail

N=${1:-15000}
R=${2:-20}
[[ $N =~ ^[0-9]+$ && $N -gt 0 ]] || { echo "usage: $0 [subscribers per replica] [rounds]" >&2; exit 64; }
[[ $R =~ ^[0-9]+$ ]] || { echo "usage: $0 [subscribers per replica] [rounds]" >&2; exit 64; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVER=${SERVER:-$ROOT/.build/release/library-server}
[[ -x $SERVER ]] || { echo "no server binary at $SERVER (swift build -c release --product library-server)" >&2; exit 1; }
REPLICAS=3
MAX_CONNECTIONS=19500

# shellcheck source-path=SCRIPTDIR source=../scripts/lib/postgres.sh
source "$ROOT/scripts/lib/postgres.sh"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/replicas-fanout.XXXXXX")
SERVER_PIDS=()
FANOUT_PIDS=()
TAIL_PIDS=()
cleanup() {
    local status=$? pid
    for pid in "${TAIL_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${FANOUT_PIDS[@]}" "${SERVER_PIDS[@]}"; do
        if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
    stop_postgres
    [[ -n ${AUTOGROUP_WAS:-} ]] && python3 "$ROOT/Benchmarks/lib/autogroup.py" restore "$AUTOGROUP_WAS"
    rm -rf "$WORK"
    exit "$status"
}

# Both the replicas and the generators need a descriptor per subscriber.
ulimit -n "$(ulimit -Hn)"
echo "== open-file limit $(ulimit -n)"
if (($(ulimit -n) < N + 100)); then
    echo "the open-file limit $(ulimit -n) is too low for $N subscribers per process" >&2
    exit 1
fi

# Source ports for the subscribers: 1024 up to the start of the local port range.
read -r LOCAL_LO LOCAL_HI </proc/sys/net/ipv4/ip_local_port_range
SOURCE_PORTS="1024-$((LOCAL_LO - 1))"
if ((LOCAL_LO - 1024 < N + 100)); then
    echo "only $((LOCAL_LO - 1024)) ports below the local port range ($LOCAL_LO-$LOCAL_HI): too few for $N" >&2
    exit 1
fi

cc -O2 -std=c99 -o "$WORK/fanout" "$ROOT/Benchmarks/fanout/fanout.c" -lm

start_postgres || { echo "could not start PostgreSQL" >&2; exit 1; }
trap cleanup EXIT # start_postgres set its own EXIT trap; cleanup calls stop_postgres
trap 'exit 130' INT
trap 'exit 143' TERM

# The kernel's autogroup scheduling off while the replicas run (as root), back as it was after:
# PostgreSQL puts every backend in a session of its own, and with autogroup on two busy cores a
# backend woken with a query waited for a core for up to 1.3 s (Benchmarks/lib/autogroup.py, which
# decides it for the Python benchmarks too). AUTOGROUP_STATE is what the run had, for the result
# file; AUTOGROUP_WAS the value cleanup puts back (empty when this script changed nothing).
{ read -r AUTOGROUP_STATE; read -r AUTOGROUP_WAS; } < <(python3 "$ROOT/Benchmarks/lib/autogroup.py" off)
[[ $AUTOGROUP_STATE == "turned off" ]] && echo "== autogroup scheduling turned off for the run"
echo "== PostgreSQL at $POSTGRES_URL"

# ---- replicas --------------------------------------------------------------------------------
PORTS=()
for ((i = 1; i <= REPLICAS; i++)); do
    "$SERVER" --port 0 --database "$POSTGRES_URL" --log-level warning --max-connections "$MAX_CONNECTIONS" \
        >"$WORK/server$i.out" 2>"$WORK/server$i.err" &
    SERVER_PIDS+=("$!")
    port=
    for _ in $(seq 300); do
        port=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$WORK/server$i.out")
        [[ -n $port ]] && break
        kill -0 "${SERVER_PIDS[i - 1]}" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $port ]]; then
        echo "replica $i did not report its port" >&2
        cat "$WORK/server$i.out" "$WORK/server$i.err" >&2
        exit 1
    fi
    PORTS+=("$port")
    echo "== replica $i: pid ${SERVER_PIDS[i - 1]} on http://127.0.0.1:$port"
done

api() { # port method path [json]
    curl -sS --fail-with-body --noproxy '*' --max-time 10 -X "$2" -H 'Content-Type: application/json' \
        ${4:+--data "$4"} "http://127.0.0.1:$1$3"
}
json_id() { # the top-level "id" of a JSON object on stdin (string or number)
    grep -o '"id":[[:space:]]*\("[^"]*"\|[0-9][0-9]*\)' | head -n 1 | sed 's/^"id":[[:space:]]*//'
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # user + system, in clock ticks
metric() { # port name
    curl -sS --noproxy '*' --max-time 10 "http://127.0.0.1:$1/metrics" | awk -v name="$2" '$1 == name { print $2 }'
}

LIBRARY=$(api "${PORTS[0]}" POST /libraries '{"name":"L"}' | json_id)
BOOK=$(api "${PORTS[0]}" POST /books "{\"libraryId\":$LIBRARY,\"title\":\"t\"}" | json_id)
BOOK=${BOOK//\"/}
[[ -n $BOOK ]] || { echo "could not create the book" >&2; exit 1; }
echo "== library $LIBRARY, book $BOOK (through replica 1)"
for ((i = 2; i <= REPLICAS; i++)); do
    api "${PORTS[i - 1]}" GET "/books/$BOOK" >/dev/null || { echo "replica $i does not see the book" >&2; exit 1; }
done

sleep 1
RSS_BEFORE=()
for ((i = 1; i <= REPLICAS; i++)); do RSS_BEFORE+=("$(rss_kib "${SERVER_PIDS[i - 1]}")"); done
echo "== replicas' VmRSS before subscribing: ${RSS_BEFORE[*]} KiB"

# ---- load ------------------------------------------------------------------------------------
# -g: each generator holds its streams open after setup until SIGUSR1, so that the memory is read
# with all 3 x N subscribers connected and the rounds of the three start together.
for ((i = 1; i <= REPLICAS; i++)); do
    write=$((i % REPLICAS + 1))
    "$WORK/fanout" -g 900 -s 300 -w "${PORTS[write - 1]}" -m "r$i-" -a "127.0.0.$((i + 1))" -P "$SOURCE_PORTS" \
        "${PORTS[i - 1]}" "$BOOK" "$N" "$R" >"$WORK/fanout$i.out" 2>&1 &
    FANOUT_PIDS+=("$!")
    echo "== generator $i: pid $!, $N streams on replica $i, PATCHes through replica $write, titles r$i-round-K"
done
for ((i = 1; i <= REPLICAS; i++)); do
    tail -n +1 -f --pid="${FANOUT_PIDS[i - 1]}" "$WORK/fanout$i.out" | sed -u "s/^/[gen$i] /" &
    TAIL_PIDS+=("$!")
done

all_ready() {
    local i
    for ((i = 1; i <= REPLICAS; i++)); do grep -q '^READY ' "$WORK/fanout$i.out" || return 1; done
}
any_gone() {
    local pid
    for pid in "${FANOUT_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || return 0; done
    return 1
}
RSS_AFTER=()
SUBSCRIBERS_METRIC=()
CPU_BEFORE=()
while ! any_gone; do
    if all_ready; then
        sleep 2 # let the replicas settle
        for ((i = 1; i <= REPLICAS; i++)); do
            RSS_AFTER+=("$(rss_kib "${SERVER_PIDS[i - 1]}")")
            SUBSCRIBERS_METRIC+=("$(metric "${PORTS[i - 1]}" library_sse_subscribers || true)")
        done
        echo "== replicas' VmRSS with subscribers connected: ${RSS_AFTER[*]} KiB" \
            "(library_sse_subscribers ${SUBSCRIBERS_METRIC[*]})"
        for ((i = 1; i <= REPLICAS; i++)); do CPU_BEFORE+=("$(cpu_ticks "${SERVER_PIDS[i - 1]}")"); done
        ROUNDS_START=$SECONDS
        kill -USR1 "${FANOUT_PIDS[@]}"
        break
    fi
    sleep 0.2
done
if ((${#CPU_BEFORE[@]} == 0)); then
    echo "== a generator ended before every generator was ready; the others start their rounds now"
    for pid in "${FANOUT_PIDS[@]}"; do kill -USR1 "$pid" 2>/dev/null || true; done
fi
FANOUT_STATUS=()
for ((i = 1; i <= REPLICAS; i++)); do
    status=0
    wait "${FANOUT_PIDS[i - 1]}" || status=$?
    FANOUT_STATUS+=("$status")
    FANOUT_PIDS[i - 1]=
done
ROUNDS_SECONDS=$((SECONDS - ${ROUNDS_START:-$SECONDS}))
for pid in "${TAIL_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
TAIL_PIDS=()

SERVER_ALIVE=()
CPU_MS=()
HZ=$(getconf CLK_TCK)
for ((i = 1; i <= REPLICAS; i++)); do
    pid=${SERVER_PIDS[i - 1]}
    if kill -0 "$pid" 2>/dev/null && [[ $(awk '{ print $3 }' "/proc/$pid/stat") != Z ]]; then
        SERVER_ALIVE+=(yes)
        if ((${#CPU_BEFORE[@]})); then
            CPU_MS+=("$(awk -v a="$(cpu_ticks "$pid")" -v b="${CPU_BEFORE[i - 1]}" -v hz="$HZ" \
                'BEGIN { printf "%.0f", (a - b) * 1000 / hz }')")
        else
            CPU_MS+=("?")
        fi
    else
        SERVER_ALIVE+=(no)
        CPU_MS+=("?")
    fi
done

# ---- summary ---------------------------------------------------------------------------------
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
echo
echo "================ cross-replica fan-out summary ================"
printf '%-36s %s\n' "replicas" "$REPLICAS (PostgreSQL, one book)"
printf '%-36s %s\n' "subscribers requested per replica" "$N"
printf '%-36s %s\n' "rounds per generator" "$R (3 generators at once)"
TOTAL=0
for ((i = 1; i <= REPLICAS; i++)); do
    RESULT=$(grep '^RESULT ' "$WORK/fanout$i.out" | tail -n 1 || true)
    connected=$(field "$RESULT" connected)
    TOTAL=$((TOTAL + ${connected:-0}))
    per_sub=?
    if [[ -n ${RSS_AFTER[i - 1]:-} && -n $connected && $connected -gt 0 ]]; then
        per_sub=$(awk -v a="${RSS_AFTER[i - 1]}" -v b="${RSS_BEFORE[i - 1]}" -v n="$connected" \
            'BEGIN { printf "%.2f", (a - b) / n }')
    fi
    echo "-- replica $i (streams of generator $i; its PATCHes went to replica $((i % REPLICAS + 1)))"
    printf '  %-34s %s (library_sse_subscribers %s)\n' "subscribers connected" "${connected:-?}" \
        "${SUBSCRIBERS_METRIC[i - 1]:-?}"
    printf '  %-34s %s KiB\n' "RSS before" "${RSS_BEFORE[i - 1]}"
    printf '  %-34s %s KiB\n' "RSS with subscribers" "${RSS_AFTER[i - 1]:-?}"
    printf '  %-34s %s KiB\n' "memory per subscriber" "$per_sub"
    printf '  %-34s %s ms\n' "CPU during the rounds" "${CPU_MS[i - 1]}"
    printf '  %-34s %s of %s (missed %s)\n' "change events received" "$(field "$RESULT" received)" \
        "$(field "$RESULT" samples)" "$(field "$RESULT" missed)"
    printf '  %-34s p50 %s  p90 %s  p99 %s  max %s ms\n' "latency" "$(field "$RESULT" p50)" \
        "$(field "$RESULT" p90)" "$(field "$RESULT" p99)" "$(field "$RESULT" max)"
    printf '  %-34s %s\n' "generator exit status" "${FANOUT_STATUS[i - 1]}"
    printf '  %s\n' "${RESULT:-RESULT missing}"
    echo "$i ${RSS_BEFORE[i - 1]} ${RSS_AFTER[i - 1]:-0} ${CPU_MS[i - 1]} $RESULT" >>"$WORK/summary"
done
printf '%-36s %s of %s\n' "subscribers connected in total" "$TOTAL" "$((N * REPLICAS))"
printf '%-36s %s s\n' "rounds wall time" "$ROUNDS_SECONDS"
echo "==============================================================="

STATUS=0
for ((i = 1; i <= REPLICAS; i++)); do
    [[ ${FANOUT_STATUS[i - 1]} -eq 0 ]] || STATUS=1
    if [[ -s $WORK/server$i.err ]]; then
        echo "== replica $i stderr ($(wc -l <"$WORK/server$i.err") lines, last 10):"
        tail -n 10 "$WORK/server$i.err"
    fi
done

# ---- shutdown --------------------------------------------------------------------------------
for ((i = 1; i <= REPLICAS; i++)); do
    if [[ ${SERVER_ALIVE[i - 1]} == no ]]; then
        status=0
        wait "${SERVER_PIDS[i - 1]}" || status=$?
        SERVER_PIDS[i - 1]=
        echo "== FAIL: replica $i died during the run (exit status $status)" >&2
        STATUS=1
    else
        kill -TERM "${SERVER_PIDS[i - 1]}"
    fi
done
STOP_START=$SECONDS
for ((i = 1; i <= REPLICAS; i++)); do
    pid=${SERVER_PIDS[i - 1]}
    [[ -n $pid ]] || continue
    while ((SECONDS - STOP_START < 15)); do
        # a zombie counts as exited
        [[ $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null || echo Z) == Z ]] && break
        sleep 0.1
    done
    if [[ $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null || echo Z) != Z ]]; then
        echo "== FAIL: replica $i did not exit within 15 s of SIGTERM" >&2
        STATUS=1
        continue
    fi
    status=0
    wait "$pid" || status=$?
    SERVER_PIDS[i - 1]=
    if [[ $status -ne 0 ]]; then
        echo "== FAIL: replica $i exited with status $status after SIGTERM" >&2
        STATUS=1
    else
        echo "== replica $i stopped cleanly (exit 0, $((SECONDS - STOP_START)) s after SIGTERM)"
    fi
done
# A passing run goes to Benchmarks/results/replicas-fanout.json beside the other sizes measured on
# the same commit (Benchmarks/figures.py makes the README's table of it).
if [[ $STATUS -eq 0 ]]; then
    AUTOGROUP_STATE=$AUTOGROUP_STATE ROOT=$ROOT python3 - "$WORK/summary" "$N" "$R" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["ROOT"], "Benchmarks", "lib"))
import result_files
summary, per_replica, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
replicas = []
for line in open(summary):
    index, before, after, cpu, _, *pairs = line.split()
    result = dict(pair.split("=", 1) for pair in pairs)
    connected = int(result["connected"])
    replicas.append({"replica": int(index), "connected": connected, "rssBeforeKiB": int(before),
                     "rssWithKiB": int(after), "kibPerSubscriber": (int(after) - int(before)) / connected,
                     "cpuMs": float(cpu), "missed": int(result["missed"]), "p50Ms": float(result["p50"]),
                     "p99Ms": float(result["p99"]), "maxMs": float(result["max"])})
path = os.path.join(result_files.RESULTS, "replicas-fanout.json")
runs = []
if os.path.exists(path):
    earlier = json.load(open(path))
    if earlier.get("commit") == result_files.commit():
        runs = [run for run in earlier["runs"] if run["perReplica"] != per_replica]
runs.append({"perReplica": per_replica, "rounds": rounds, "autogroup": os.environ["AUTOGROUP_STATE"],
             "replicas": replicas})
print("== results in " + result_files.write_result("replicas-fanout", {"runs": sorted(runs, key=lambda run: run["perReplica"])}))
PY
fi
exit "$STATUS"
