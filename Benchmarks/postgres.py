#!/usr/bin/env python3
"""library-server on PostgreSQL against Hummingbird 2 + PostgresNIO, GET and PATCH /books/{id}.

    python3 Benchmarks/postgres.py [--books 100000] [--seconds 30] [--rounds 4] [--replicas 1,3]

One run, everything on 127.0.0.1, stopping by itself:

1. a throwaway PostgreSQL cluster started by scripts/lib/postgres.sh (initdb and pg_ctl, as the
   `postgres` user when run as root; trust authentication, fsync as --fsync says), removed at the end
   whatever happens;
2. library-server started once on it (`--database postgres://...`), which creates the schema
   (Migrations/postgres), then stopped; `--schema migrations` applies Migrations/postgres/*.sql
   with psql instead, to test the comparator without library-server;
3. BOOKS books seeded with SQL (the ids Benchmarks/wrk/common.lua computes; one library holds 90 %
   of them, the rest are spread over LIBRARIES - 1 others), then VACUUM ANALYZE;
4. library-server and the comparator (Benchmarks/.build/release/hummingbird-postgres, a
   PostgresClient pool beside a Hummingbird Application) both started on that database;
5. per round, GET then PATCH, each on both servers in turn (the order flips every round), each run
   a short warm-up and then `--seconds` of `wrk -t2 -c16` with Benchmarks/wrk/get.lua or patch.lua
   (ids cycling over every book; every PATCH a new title, so the version goes up), after a VACUUM
   of `books` so neither server inherits the other's dead rows.

All of that once per `--replicas` count (default `1,3`): one process of each server reached
directly, then three of each behind nginx configured with deploy/nginx.conf (scripts/lib/nginx.py),
which is how replicas are deployed; wrk talks to nginx, which spreads the connections (least_conn).
nginx's files, its access log among them, are kept in memory (/dev/shm): on this machine's disk a
write of that log now and then waited seconds for the kernel to flush dirty pages, and with it
nginx's one worker and every request it held (wrk's p99 through nginx 2.9 s with the log on disk,
8 ms with it in /dev/shm, the same GET load, in one pair of runs; later full runs still saw rarer
stalls through nginx, for both servers: see `measure`). The servers' own access logs are discarded.

It prints a markdown table per topology (medians over the rounds): req/s, p50 and p99 latency, the
servers' CPU per request (every replica's; nginx's apart), and ours / comparator; then each
server's RSS before and after the runs. Every run goes to Benchmarks/results/postgres.json, from
which Benchmarks/figures.py writes the README's table.

`--replica-writes 1,2,3` measures instead what replicas write together: that many library-server
replicas on the one database, and per round, for each count K (in turn, the order rotating every
round), `wrk` PATCHes through K of them at once, the same total connections split between them.
It prints the combined req/s and p99 for each K, K ÷ 1, and the CPU per write of every replica
(idle ones too: each applies every change) and PostgreSQL together: on a machine whose cores are
all busy, that bounds the rate.

`--fsync on` (the default) keeps PostgreSQL's fsync and synchronous_commit as a real deployment
has them; `--fsync off` measures without the disk.

Build first (one build at a time on this machine):
    swift build -c release --product library-server
    (cd Benchmarks && swift build -c release --product hummingbird-postgres)
"""

import argparse
import atexit
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import Server, metric, metrics_page, one_scheduling_group, running, slower_than, write_result  # noqa: E402
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from nginx import Nginx  # noqa: E402
OURS = os.path.join(ROOT, ".build", "release", "library-server")
COMPARATOR = os.path.join(HERE, ".build", "release", "hummingbird-postgres")
POSTGRES_SH = os.path.join(ROOT, "scripts", "lib", "postgres.sh")
MIGRATIONS = os.path.join(ROOT, "Migrations", "postgres")
CREATED = "2026-01-01T00:00:00.000Z"
WORKLOADS = {"get": "GET /books/{id}", "patch": "PATCH /books/{id}"}


def log(message):
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Processes: every one started here is stopped at exit, and the cluster removed.

cluster = None


def cleanup():
    for process in running:
        if process.poll() is None:
            process.kill()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    running.clear()
    for deployment in deployments:
        if deployment.nginx:
            deployment.nginx.stop()
    if cluster is not None:
        cluster.remove()
    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)


def on_signal(number, _frame):
    cleanup()
    sys.exit(128 + number)


atexit.register(cleanup)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """A throwaway PostgreSQL cluster, started and stopped by scripts/lib/postgres.sh (the one
    starter of the project's scripts), fsync on or off."""

    def __init__(self, fsync=True):
        self.started = False
        result = subprocess.run(["bash", POSTGRES_SH, "start"], capture_output=True, text=True, timeout=180,
                                env=dict(os.environ, POSTGRES_FSYNC="on" if fsync else "off"))
        if result.returncode != 0:
            raise SystemExit("postgres.sh start failed: %s" % result.stderr.strip())
        values = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        self.dir, self.bin, self.user = values["POSTGRES_DIR"], values["POSTGRES_BIN"], values["POSTGRES_USER"]
        self.port, self.url = int(values["POSTGRES_PORT"]), values["POSTGRES_URL"]
        self.data = os.path.join(self.dir, "data")
        self.started = True

    def server_log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def psql(self, sql, timeout=600):
        result = subprocess.run(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
             "-d", "postgres", "-At"],
            input=sql, capture_output=True, text=True, timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError("psql failed: %s" % result.stderr)
        return result.stdout

    def backends_cpu_seconds(self):
        """utime + stime of every process of the cluster (postmaster and backends), and of the
        backends that exited (the postmaster's cutime + cstime: it waits for each), so the sum
        never goes down when a connection closes."""
        total = 0
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                postmaster = int(f.readline())
        except (OSError, ValueError):
            return 0.0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(pid) == postmaster:
                total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
            elif int(fields[1]) == postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def remove(self):
        if self.started:
            subprocess.run(["bash", POSTGRES_SH, "stop", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=60)
        self.started = False


# ---------------------------------------------------------------------------------------------
# Schema and data

def library_id(n):
    return "00000000-0000-4000-8000-%012d" % n


def create_schema(args, db):
    if args.schema == "migrations":
        for name in sorted(os.listdir(MIGRATIONS)):
            if name.endswith(".sql"):
                with open(os.path.join(MIGRATIONS, name)) as f:
                    db.psql(f.read())
        log("schema: applied %s with psql" % MIGRATIONS)
        return
    # library-server runs its migrations when it starts on the database.
    server = Server([args.server, "--port", "0", "--database", db.url, "--log-level", "warning"],
                    name="library-server", keep_errors=True)
    server.stop()
    if server.process.returncode not in (0, -signal.SIGTERM):
        raise RuntimeError("library-server exited with %d after creating the schema" % server.process.returncode)
    log("schema: created by library-server")


def seed(db, books, libraries):
    """LIBRARIES libraries; book n (ids as Benchmarks/wrk/common.lua) belongs to library 1 unless n
    is a multiple of 10, then to one of the others in turn: library 1 holds 90 % of the books."""
    others = max(libraries - 1, 1)

    def owner(n):  # the same rule in SQL below
        return 1 if n % 10 or libraries == 1 else (n // 10) % others + 2

    counts = {}
    if libraries == 1:
        counts[1] = books
    else:
        counts[1] = books - books // 10
        for n in range(10, books + 1, 10):
            counts[owner(n)] = counts.get(owner(n), 0) + 1
    values = ",\n".join(
        "('%s', 'Library %d', NULL, %d, 1, '%s', '%s')" % (library_id(n), n, counts.get(n, 0), CREATED, CREATED)
        for n in range(1, libraries + 1)
    )
    owner_sql = "1" if libraries == 1 else "CASE WHEN n %% 10 <> 0 THEN 1 ELSE (n / 10) %% %d + 2 END" % others
    db.psql(
        """
        BEGIN;
        INSERT INTO libraries (id, name, address, book_count, version, created_at, updated_at) VALUES
        %s;
        INSERT INTO books (id, library_id, title, author, isbn, published_year, available, version,
                           created_at, updated_at)
        SELECT format('00000000-0000-4000-9000-%%s', lpad(n::text, 12, '0')),
               format('00000000-0000-4000-8000-%%s', lpad((%s)::text, 12, '0')),
               'Book number ' || n, 'Author ' || (n %% 997), NULL, 1900 + n %% 125, true, 1,
               '%s', '%s'
        FROM generate_series(1, %d) AS n ORDER BY n;
        COMMIT;
        VACUUM ANALYZE libraries;
        VACUUM ANALYZE books;
        """ % (values, owner_sql, CREATED, CREATED, books)
    )


# ---------------------------------------------------------------------------------------------
# Measurement

def wrk(port, workload, seconds, args, threads=None, connections=None):
    environment = dict(os.environ, BENCH_LUA=os.path.join(HERE, "wrk"), BOOKS=str(args.books),
                       LIBRARIES=str(args.libraries))
    command = [
        "wrk", "-t%d" % (threads or args.threads), "-c%d" % (connections or args.connections), "-d%ds" % seconds,
        "--timeout", "5s",
        "-H", "Host: 127.0.0.1",
        "-s", os.path.join(HERE, "wrk", workload + ".lua"), "http://127.0.0.1:%d" % port,
    ]
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running.append(process)  # stopped too if this script is interrupted
    try:
        stdout, stderr = process.communicate(timeout=seconds + 60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        running.remove(process)
    match = re.search(r"^RESULT (.*)$", stdout, re.M)
    if process.returncode != 0 or not match:
        raise RuntimeError("wrk failed: %s%s" % (stdout, stderr))
    result = {key: float(value) for key, value in (pair.split("=") for pair in match.group(1).split())}
    result["rps"] = result["requests"] / result["seconds"] if result["seconds"] else 0
    return result


deployments = []  # every Deployment started, so that cleanup stops their nginx too
workdir = None


class Deployment:
    """One server under test as a user deploys it: one process on the database, reached directly,
    or `count` of them (at most 3) behind nginx configured with deploy/nginx.conf
    (scripts/lib/nginx.py). CPU and memory are the servers' together; nginx's CPU apart."""

    def __init__(self, name, command, count, workdir, keep_errors=False):
        self.name = name
        self.servers = [Server(command, name=name if count == 1 else "%s-%d" % (name, n + 1), keep_errors=keep_errors)
                        for n in range(count)]
        self.nginx = None
        if count > 1:
            directory = os.path.join(workdir, name)
            os.makedirs(directory)
            self.nginx = Nginx(directory, [server.port for server in self.servers])
        self.port = self.nginx.port if self.nginx else self.servers[0].port
        deployments.append(self)

    def cpu_seconds(self):
        return sum(server.cpu_seconds() for server in self.servers)

    def proxy_cpu_seconds(self):
        return self.nginx.cpu_seconds() if self.nginx else 0.0

    def status(self, key):
        return sum(server.status(key) for server in self.servers)

    def stop(self):
        if self.nginx:
            self.nginx.stop()
        for server in self.servers:
            server.stop()


def replicas_slow_requests(server, seconds=1.0):
    """How many requests the processes of `server` timed themselves at over `seconds` so far, from
    a parsed request to its response (library-server's `library_http_request_duration_seconds`,
    every route; `seconds` one of its bucket bounds), summed; None for a server without it (the
    comparator). Beside nginx's times, it tells a wait inside a replica from one before it."""
    total = 0
    for process in server.servers:
        status, text = metrics_page(process.port)
        if status != 200:
            return None
        total += slower_than(text, "library_http_request_duration_seconds", seconds)
    return total


def measure(server, workload, db, args):
    db.psql("VACUUM books")  # neither server inherits the other's dead rows
    if args.warmup > 0:
        wrk(server.port, workload, args.warmup, args)
    slow_before = replicas_slow_requests(server)
    cpu, db_cpu, proxy_cpu = server.cpu_seconds(), db.backends_cpu_seconds(), server.proxy_cpu_seconds()
    result = wrk(server.port, workload, args.seconds, args)
    requests = max(result["requests"], 1)
    result["cpu_us"] = (server.cpu_seconds() - cpu) * 1e6 / requests
    result["db_cpu_us"] = (db.backends_cpu_seconds() - db_cpu) * 1e6 / requests
    result["proxy_cpu_us"] = (server.proxy_cpu_seconds() - proxy_cpu) * 1e6 / requests
    # Any answer but 2xx fails the run. A socket error (wrk's timeout, 5 s, nearly always) is
    # counted and reported, and fails the run past one in 100,000 requests. (The stalls of seconds
    # seen through three replicas were PostgreSQL's backends waiting for a core under autogroup
    # scheduling, which the run turns off: benchlib.one_scheduling_group.) nginx's slow requests
    # (those its access log gained with this run and its warm-up) are logged with it.
    where = ""
    slow_after = replicas_slow_requests(server)
    if slow_before is not None and slow_after is not None:
        result["replica_slow_requests"] = slow_after - slow_before
        if result["replica_slow_requests"] or result["socket_errors"]:
            where = "; the server's processes timed %d request(s) of this run at over 1 s themselves" % (
                result["replica_slow_requests"])
    if server.nginx:
        slow, longest, lines = server.nginx.slow_requests(1.0)
        result["nginx_slow_requests"] = slow
        if slow or result["socket_errors"]:
            where += ("; nginx's access log of this run and its warm-up: %d request(s) over 1 s, the longest "
                      "%.3f s, the first: %s; its error log: %s"
                      % (slow, longest, " | ".join(lines), server.nginx.error_tail()))
    if where:
        log("%s %s%s" % (server.name, workload, where))
    if result["non2xx"] or result["socket_errors"] * 100_000 > result["requests"]:
        raise RuntimeError("%s %s: %d non-2xx answers, %d socket errors%s"
                           % (server.name, workload, result["non2xx"], result["socket_errors"], where))
    if result["socket_errors"]:
        log("%s %s: %d socket error(s) in %d requests, reported" % (
            server.name, workload, result["socket_errors"], result["requests"]))
    return result


def check_same_answers(servers, args):
    """Both servers answer GET of a seeded book with the same body and ETag (a sanity check)."""
    import http.client
    answers = []
    for server in servers:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", "/books/00000000-0000-4000-9000-%012d" % args.books, headers={"Host": "127.0.0.1"})
        response = connection.getresponse()
        answers.append((response.status, response.getheader("ETag"), response.read()))
        connection.close()
    if answers[0] != answers[1]:
        log("warning: the servers answer differently:\n  %s: %r\n  %s: %r"
            % (servers[0].name, answers[0], servers[1].name, answers[1]))


def markdown(results, rss, args, names, count):
    ours, theirs = names
    lines = [
        "PostgreSQL (fsync %s), %d books, %s, `wrk -t%d -c%d`, %d s per run after %d s of warm-up, %d round(s)%s."
        % (args.fsync, args.books, "one process each" if count == 1 else "%d processes each behind nginx" % count,
           args.threads, args.connections, args.seconds, args.warmup, args.rounds,
           ", medians" if args.rounds > 1 else ""),
        "",
        "| workload | req/s ours | req/s comparator | ours ÷ comparator | p50 ours / comp. (ms) "
        "| p99 ours / comp. (ms) | server CPU per request ours / comp. (µs) | PostgreSQL CPU per request ours / comp. (µs) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for workload, label in WORKLOADS.items():
        if workload not in results[ours] or workload not in results[theirs]:
            continue

        def med(name, key):
            return statistics.median(run[key] for run in results[name][workload])

        ratio = med(ours, "rps") / med(theirs, "rps") if med(theirs, "rps") else float("nan")
        lines.append(
            "| %s | %.0f | %.0f | %.2f | %.2f / %.2f | %.2f / %.2f | %.1f / %.1f | %.1f / %.1f |"
            % (label, med(ours, "rps"), med(theirs, "rps"), ratio,
               med(ours, "p50_us") / 1000, med(theirs, "p50_us") / 1000,
               med(ours, "p99_us") / 1000, med(theirs, "p99_us") / 1000,
               med(ours, "cpu_us"), med(theirs, "cpu_us"), med(ours, "db_cpu_us"), med(theirs, "db_cpu_us"))
        )
    lines += ["", "| server | RSS before (MiB) | RSS after (MiB) | peak RSS (MiB) |", "|---|---:|---:|---:|"]
    for name in names:
        before, after, peak = rss[name]
        lines.append("| %s | %.1f | %.1f | %.1f |" % (name, before / 1024, after / 1024, peak / 1024))
    return "\n".join(lines)


def compare(args, workloads, count):
    """GET and PATCH on both servers, each deployed as `count` replicas (behind nginx when more than
    one), the order flipped every round. Returns the runs and the RSS of each."""
    servers = []
    if not args.comparator_only:
        servers.append(Deployment("library-server", [args.server, "--port", "0", "--database", cluster.url], count,
                                  workdir))
    command = [args.comparator, "--port", "0", "--database", cluster.url]
    if args.pool:
        command += ["--pool", str(args.pool)]
    servers.append(Deployment("hummingbird-postgres", command, count, workdir, keep_errors=True))
    if len(servers) == 2:
        check_same_answers(servers, args)
    rss = {server.name: [server.status("VmRSS"), 0, 0] for server in servers}
    for server in servers:
        log("%s: %d process(es) on port %d%s, RSS %.1f MiB" % (
            server.name, count, server.port, " (nginx)" if server.nginx else "", rss[server.name][0] / 1024))
    results = {server.name: {} for server in servers}
    for round_index in range(args.rounds):
        for workload in workloads:
            order = servers if round_index % 2 == 0 else list(reversed(servers))
            for server in order:
                result = measure(server, workload, cluster, args)
                results[server.name].setdefault(workload, []).append(result)
                log("%d replica(s), round %d  %-5s %-20s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  CPU %6.1f µs/req  "
                    "PostgreSQL CPU %6.1f µs/req  nginx CPU %6.1f µs/req  RSS %5.1f MiB"
                    % (count, round_index + 1, workload, server.name, result["rps"], result["p50_us"] / 1000,
                       result["p99_us"] / 1000, result["cpu_us"], result["db_cpu_us"], result["proxy_cpu_us"],
                       server.status("VmRSS") / 1024))
    for server in servers:
        rss[server.name][1] = server.status("VmRSS")
        rss[server.name][2] = server.status("VmHWM")
    for server in servers:
        server.stop()
    names = [server.name for server in servers]
    if len(names) == 2:
        print(markdown(results, rss, args, names, count))
    return {"replicas": count, "runs": results,
            "rssKiB": {name: {"before": rss[name][0], "after": rss[name][1], "peak": rss[name][2]} for name in names}}


def replica_writes(args, counts):
    """PATCH through K replicas at once for each K in `counts`: the combined write rate."""
    replicas = [Server([args.server, "--port", "0", "--database", cluster.url], name="replica%d" % (n + 1))
                for n in range(max(counts))]
    results = {count: [] for count in counts}
    for round_index in range(args.rounds):
        order = counts[round_index % len(counts):] + counts[:round_index % len(counts)]
        for count in order:
            cluster.psql("VACUUM books")
            split = [args.connections // count + (1 if n < args.connections % count else 0) for n in range(count)]
            runs = [None] * count

            def run(n, seconds):
                runs[n] = wrk(replicas[n].port, args.replica_workload, seconds, args, threads=1,
                              connections=split[n])

            def batches():
                """Writes and transactions committed so far by the replicas written through."""
                return (sum(metric(replica.port, "library_sqlite_writes_committed_total") for replica in replicas[:count]),
                        sum(metric(replica.port, "library_sqlite_write_duration_seconds_count")
                            for replica in replicas[:count]))

            for seconds in ([args.warmup] if args.warmup > 0 else []) + [args.seconds]:
                threads = [threading.Thread(target=run, args=(n, seconds)) for n in range(count)]
                committed = batches()
                own, database = sum(replica.cpu_seconds() for replica in replicas), cluster.backends_cpu_seconds()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                own = sum(replica.cpu_seconds() for replica in replicas) - own
                database = cluster.backends_cpu_seconds() - database
                cpu = own + database
                committed = [after - before for after, before in zip(batches(), committed)]
            if any(r is None or r["non2xx"] or r["socket_errors"] for r in runs):
                raise RuntimeError("replica writes through %d: %r" % (count, runs))
            requests = max(sum(r["requests"] for r in runs), 1)
            # Every replica's CPU counts, the idle ones' too: each applies every change it hears.
            combined = {"rps": sum(r["rps"] for r in runs), "p99_us": max(r["p99_us"] for r in runs),
                        "cpu_us": cpu * 1e6 / requests, "db_cpu_us": database * 1e6 / requests,
                        # Writes per transaction (each replica's writer batches what waits for it).
                        "batch": committed[0] / max(committed[1], 1),
                        # Memory over the run: every replica's anonymous RSS after each run.
                        "rss_anon_mib": [replica.status("RssAnon") / 1024 for replica in replicas]}
            results[count].append(combined)
            log("round %d  %s through %d replica(s) (%s connections): %8.0f req/s combined, p99 %6.2f ms, "
                "CPU %5.0f µs per write (replicas + PostgreSQL; PostgreSQL %5.0f), %4.1f writes per transaction"
                % (round_index + 1, args.replica_workload.upper(), count, "+".join(map(str, split)), combined["rps"],
                   combined["p99_us"] / 1000,
                   combined["cpu_us"], combined["db_cpu_us"], combined["batch"]))
    for replica in replicas:
        replica.stop()
    memory = [max(run["rss_anon_mib"]) for round_index in range(args.rounds)
              for run in [results[count][round_index] for count in counts]]
    rows = [{"replicas": count, "rps": statistics.median(r["rps"] for r in results[count]),
             "p99Ms": statistics.median(r["p99_us"] for r in results[count]) / 1000,
             "cpuUs": statistics.median(r["cpu_us"] for r in results[count]),
             "databaseCpuUs": statistics.median(r["db_cpu_us"] for r in results[count]),
             "runs": results[count]} for count in counts]
    if args.replica_workload != "patch":
        # Reads through K replicas: the same machine's cost of spreading requests over processes,
        # beside the writes' figures (logged only).
        return ""
    path = write_result("replica-writes", {
        "benchmark": "postgres.py --replica-writes", "autogroup": args.autogroup, "fsync": args.fsync,
        "books": args.books,
        "connections": args.connections, "seconds": args.seconds, "rounds": args.rounds, "rows": rows,
        "largestReplicaAnonRssMiB": memory})
    log("written to %s" % os.path.relpath(path, ROOT))
    subprocess.run([sys.executable, os.path.join(HERE, "figures.py")], check=True)
    base = statistics.median(r["rps"] for r in results[counts[0]])
    lines = [
        "PostgreSQL (fsync %s), %d books, PATCH /books/{id} through K replicas at once, `wrk -c%d` split "
        "between them, %d s per run, %d round(s)%s."
        % ("on" if args.fsync == "on" else "off", args.books, args.connections, args.seconds, args.rounds,
           ", medians" if args.rounds > 1 else ""),
        "",
        "| replicas | combined req/s | p99 (ms) | ÷ %d replica | CPU per write, all replicas + PostgreSQL (µs) |"
        % counts[0],
        "|---:|---:|---:|---:|---:|",
    ]
    for count in counts:
        rps = statistics.median(r["rps"] for r in results[count])
        p99 = statistics.median(r["p99_us"] for r in results[count]) / 1000
        cpu = statistics.median(r["cpu_us"] for r in results[count])
        lines.append("| %d | %.0f | %.2f | %.2f | %.0f |" % (count, rps, p99, rps / base if base else float("nan"), cpu))
    return "\n".join(lines)


def main(autogroup):
    global cluster
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=OURS, help="library-server binary (default: %(default)s)")
    parser.add_argument("--comparator", default=COMPARATOR, help="hummingbird-postgres binary (default: %(default)s)")
    parser.add_argument("--books", type=int, default=100_000)
    parser.add_argument("--libraries", type=int, default=10, help="library 1 holds 90 %% of the books")
    parser.add_argument("--seconds", type=int, default=30, help="measured seconds per run")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up seconds before each run")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workloads", default="get,patch")
    parser.add_argument("--pool", type=int, default=None,
                        help="the comparator's PostgresClient maximumConnections (default: PostgresNIO's, 20)")
    parser.add_argument("--schema", choices=("server", "migrations"), default="server",
                        help="who creates the schema: library-server (default) or psql from Migrations/postgres")
    parser.add_argument("--fsync", choices=("on", "off"), default="on",
                        help="PostgreSQL's fsync (default on, as deployed)")
    parser.add_argument("--replicas", metavar="K,K,...", default="1,3",
                        help="compare each server deployed as K processes, behind nginx when K > 1 (default: "
                             "%(default)s; at most 3, as deploy/nginx.conf names)")
    parser.add_argument("--replica-writes", metavar="K,K,...",
                        help="measure PATCH through K replicas at once instead (e.g. 1,2,3)")
    parser.add_argument("--replica-workload", choices=("patch", "get"), default="patch",
                        help="what --replica-writes sends: PATCH (the default, written to results) or GET, "
                             "to compare with the cost of spreading any request over K processes (logged only)")
    parser.add_argument("--comparator-only", action="store_true",
                        help="measure the comparator alone (to test it before library-server speaks PostgreSQL)")
    args = parser.parse_args()
    args.autogroup = autogroup
    workloads = [w for w in args.workloads.split(",") if w]
    for workload in workloads:
        if workload not in WORKLOADS:
            parser.error("unknown workload %s" % workload)
    counts = [int(k) for k in args.replica_writes.split(",")] if args.replica_writes else []
    replica_counts = [int(k) for k in args.replicas.split(",") if k]
    if not replica_counts or any(k < 1 or k > 3 for k in replica_counts):
        parser.error("--replicas takes counts from 1 to 3")
    if any(k < 1 for k in counts):
        parser.error("--replica-writes takes counts of 1 or more")
    binaries = [args.comparator] if args.comparator_only else [args.server, args.comparator]
    if counts:
        binaries = [args.server]
    for binary in binaries:
        if not os.access(binary, os.X_OK):
            raise SystemExit("%s is missing: build it first (see --help)" % binary)
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: apt-get install wrk")

    started = time.monotonic()
    cluster = Cluster(fsync=args.fsync == "on")
    log("cluster: %s (%s)" % (cluster.url, cluster.dir))
    if args.comparator_only and args.schema == "server":
        args.schema = "migrations"
    create_schema(args, cluster)
    seed(cluster, args.books, args.libraries)
    log("seeded %d books in %d libraries (%.1f s)" % (args.books, args.libraries, time.monotonic() - started))
    if counts:
        print(replica_writes(args, counts))
        cleanup()
        return

    global workdir
    workdir = tempfile.mkdtemp(prefix="library-postgres-bench.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    topologies = {}
    for count in replica_counts:
        topology = "%d replica%s%s" % (count, "" if count == 1 else "s", " behind nginx" if count > 1 else "")
        topologies[topology] = compare(args, workloads, count)
    path = write_result("postgres", {
        "benchmark": "postgres.py", "fsync": args.fsync, "books": args.books, "threads": args.threads,
        "connections": args.connections, "seconds": args.seconds, "warmup": args.warmup, "rounds": args.rounds,
        "autogroup": autogroup, "topologies": [dict(topology=name, **data) for name, data in topologies.items()]})
    log("written to %s" % os.path.relpath(path, ROOT))
    if not args.comparator_only:
        subprocess.run([sys.executable, os.path.join(HERE, "figures.py")], check=True)
    cleanup()


if __name__ == "__main__":
    with one_scheduling_group() as autogroup:
        log("autogroup scheduling: %s" % autogroup)
        main(autogroup)
