#!/usr/bin/env python3
"""library-server against two Hummingbird 2 comparators, side by side on this machine.

    Benchmarks/run.sh [options]        (builds the servers first; see --help)

The comparators: `hummingbird`, the same semantics as library-server (validation, a read before
each write, a transaction), and `hummingbird-plain` (`--plain`), the GET and PATCH a Hummingbird
user would write first (one statement per request, `UPDATE ... RETURNING`, no transaction).
Neither writes a change log. Every workload runs A B C A B C: in each round our server (access
log on, its default), then each comparator that serves the workload, each started fresh on its
own copy of the same seeded database (100,000 books by default), warmed up, then loaded with wrk
for a fixed time. CPU per request is the server's utime + stime (/proc/PID/stat) over the
measured run; system calls per request come from `perf stat -e raw_syscalls:sys_enter -p PID`
over a short extra run on the same warm server (so perf never touches the req/s figures). The
table gives medians over the rounds, and our/comparator ratios. Everything runs on 127.0.0.1 and
every step has a time limit, so the script stops by itself.

Then, for library-server alone: GET and list cost from 10,000 to 1,000,000 books, the SSE
fan-out cost from few to many subscribers, and the over-observation figure. The results go to
Benchmarks/results/ (results.md, results.json, chart.svg) and into docs/performance.md between the
`benchmark:begin` and `benchmark:end` markers.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
from benchlib import Server, commit, log, machine, stop_all  # noqa: E402
ROOT = os.path.dirname(HERE)
OURS = os.path.join(ROOT, ".build", "release", "library-server")
COMPARATOR = os.path.join(HERE, ".build", "release", "hummingbird-comparator")
RESULTS = os.path.join(HERE, "results")

WORKLOADS = {
    "get": "GET /books/{id}",
    "list": "GET /libraries/{id}/books?limit=50",
    "post": "POST /books",
    "patch": "PATCH /books/{id}",
    "mix": "90 % GET / 10 % PATCH",
}
# The targets: our req/s at least this many times the same-semantics comparator's, and
# p99 no worse; a missed target fails the run.
TARGETS = {"get": 1.5, "patch": 1.5, "list": 1.2, "post": 1.2}
# The goals against the plain comparator (req/s only), reported but not failing the run.
GOALS = {"get": 2.0, "patch": 1.5}

# library-server runs with its defaults, so its access log is on (one line per request to stderr).
SERVERS = {
    "library-server": lambda db: [OURS, "--port", "0", "--database", db],
    "hummingbird": lambda db: [COMPARATOR, "--port", "0", "--database", db],
    "hummingbird-plain": lambda db: [COMPARATOR, "--plain", "--port", "0", "--database", db],
}
LABELS = {"library-server": "library-server", "hummingbird": "Hummingbird, same semantics",
          "hummingbird-plain": "Hummingbird, plain"}
# The workloads a server serves, when not all of them.
SERVES = {"hummingbird-plain": {"get", "patch", "mix"}}


def serves(server_name, workload):
    return workload in SERVES.get(server_name, WORKLOADS)

def wrk(port, workload, seconds, args, books, libraries):
    environment = dict(os.environ, BENCH_LUA=os.path.join(HERE, "wrk"), BOOKS=str(books), LIBRARIES=str(libraries))
    command = [
        "wrk", "-t%d" % args.threads, "-c%d" % args.connections, "-d%ds" % seconds, "--timeout", "5s",
        "-s", os.path.join(HERE, "wrk", workload + ".lua"), "http://127.0.0.1:%d" % port,
    ]
    output = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=seconds + 60)
    match = re.search(r"^RESULT (.*)$", output.stdout, re.M)
    if output.returncode != 0 or not match:
        raise RuntimeError("wrk failed: %s%s" % (output.stdout, output.stderr))
    result = {key: float(value) for key, value in (pair.split("=") for pair in match.group(1).split())}
    result["rps"] = result["requests"] / result["seconds"]
    return result


def count_syscalls(server, workload, work, args, books, libraries):
    """System calls per request, from perf over a short extra run (None when perf cannot count).

    perf attaches to the threads the server has by then (all of them, after the warm-up and the
    measured run) and counts the kernel's raw_syscalls:sys_enter tracepoint for each.
    """
    if args.syscall_seconds <= 0 or not shutil.which("perf"):
        return None
    output = os.path.join(work, "perf.csv")
    perf = subprocess.Popen(
        ["perf", "stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "-p", str(server.process.pid), "-o", output],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)  # time to attach
        result = wrk(server.port, workload, args.syscall_seconds, args, books, libraries)
    finally:
        perf.send_signal(signal.SIGINT)
        try:
            perf.wait(timeout=20)
        except subprocess.TimeoutExpired:
            perf.kill()
            perf.wait()
    with open(output) as counts:
        match = re.search(r"^(\d+),[^,]*,raw_syscalls:sys_enter", counts.read(), re.M)
    if not match or not result["requests"]:
        return None
    return int(match.group(1)) / result["requests"]


def measure(server_name, workload, database, work, args, books, libraries):
    """One run: a fresh server on a fresh copy of `database`, warm-up, the measured load, then a
    short run under perf for the system calls."""
    copy = os.path.join(work, "run.sqlite")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(copy + suffix):
            os.remove(copy + suffix)
    shutil.copyfile(database, copy)
    os.sync()  # so the copy's writeback does not compete with the measured run
    server = Server(SERVERS[server_name](copy))
    try:
        # Larger databases get a longer warm-up (a second per 100,000 books more), so the
        # measured run sees the file's pages in memory as a server that has been up a while would.
        warmup = args.warmup + books // 100_000
        if warmup > 0:
            wrk(server.port, workload, warmup, args, books, libraries)
        cpu_before = server.cpu_seconds()
        result = wrk(server.port, workload, args.duration, args, books, libraries)
        result["cpu_us_per_req"] = (server.cpu_seconds() - cpu_before) * 1e6 / result["requests"]
        result["peak_rss_mib"] = server.status("VmHWM") / 1024
        result["startup_ms"] = server.startup_seconds * 1000
        if args.syscall_seconds > 0:
            result["syscalls_per_req"] = count_syscalls(server, workload, work, args, books, libraries)
    finally:
        server.stop()
    if result["non2xx"] or result["socket_errors"]:
        raise RuntimeError(
            "%s %s: %d non-2xx answers, %d socket errors"
            % (server_name, workload, result["non2xx"], result["socket_errors"])
        )
    return result


def seeded(books, work, libraries, server=OURS, name="seed"):
    """The database of `books` books in `libraries` libraries, in the schema `server` makes."""
    path = os.path.join(work, "%s-%d-%d.sqlite" % (name, books, libraries))
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), server, path, str(books), str(libraries)],
                       check=True, timeout=1800)
    return path


def median_of(runs, key):
    values = [run[key] for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else None


def compare(args, work):
    database = seeded(args.books, work, args.libraries)
    runs = {(w, s): [] for w in args.workloads for s in SERVERS if serves(s, w)}
    for round_number in range(1, args.rounds + 1):
        for workload in args.workloads:
            for server_name in SERVERS:  # A, B, C, every round
                if not serves(server_name, workload):
                    continue
                result = measure(server_name, workload, database, work, args, args.books, args.libraries)
                runs[(workload, server_name)].append(result)
                syscalls = result.get("syscalls_per_req")
                log("round %d  %-6s %-17s %9.0f req/s  p50 %6.2f ms  p99 %6.2f ms  RSS %5.1f MiB  CPU %5.1f µs/req"
                    "  %s syscalls/req"
                    % (round_number, workload, server_name, result["rps"], result["p50_us"] / 1000,
                       result["p99_us"] / 1000, result["peak_rss_mib"], result["cpu_us_per_req"],
                       "?" if syscalls is None else "%.2f" % syscalls))
    table = []
    for workload in args.workloads:
        row = {"workload": workload, "label": WORKLOADS[workload]}
        for server_name in SERVERS:
            measured = runs.get((workload, server_name))
            if not measured:
                continue
            row[server_name] = {
                key: median_of(measured, key)
                for key in ("rps", "p50_us", "p99_us", "peak_rss_mib", "cpu_us_per_req", "syscalls_per_req")
            }
            row[server_name]["rounds"] = [round(run["rps"]) for run in measured]
        ours, theirs = row["library-server"], row["hummingbird"]
        row["ratio"] = ours["rps"] / theirs["rps"]
        row["p99_ratio"] = ours["p99_us"] / theirs["p99_us"]
        target = TARGETS.get(workload)
        row["target"] = target
        row["met"] = None if target is None else (row["ratio"] >= target and ours["p99_us"] <= theirs["p99_us"])
        plain = row.get("hummingbird-plain")
        row["plain_ratio"] = ours["rps"] / plain["rps"] if plain else None
        goal = GOALS.get(workload) if plain else None
        row["plain_goal"] = goal
        row["plain_goal_met"] = None if goal is None else row["plain_ratio"] >= goal
        table.append(row)
    return table


def against_baseline(args, work):
    """Our build against another build of library-server (`--baseline BINARY`, say the previous
    commit's), A B A B on the same seeded rows: whether a change made the server slower. Each
    build gets a database of its own schema (seed.py lets the binary make it), since a build
    refuses a database that has a migration it does not know."""
    SERVERS["baseline"] = lambda db: [args.baseline, "--port", "0", "--database", db]
    databases = {"library-server": seeded(args.books, work, args.libraries),
                 "baseline": seeded(args.books, work, args.libraries, server=args.baseline, name="baseline")}
    runs = {(w, s): [] for w in args.workloads for s in ("library-server", "baseline")}
    for round_number in range(1, args.rounds + 1):
        for workload in args.workloads:
            for server_name in ("library-server", "baseline"):
                result = measure(server_name, workload, databases[server_name], work, args, args.books,
                                 args.libraries)
                runs[(workload, server_name)].append(result)
                log("round %d  %-6s %-15s %9.0f req/s  p99 %6.2f ms  CPU %5.1f µs/req"
                    % (round_number, workload, server_name, result["rps"], result["p99_us"] / 1000,
                       result["cpu_us_per_req"]))
    table = []
    for workload in args.workloads:
        row = {"workload": workload, "label": WORKLOADS[workload]}
        for server_name in ("library-server", "baseline"):
            row[server_name] = {key: median_of(runs[(workload, server_name)], key)
                                for key in ("rps", "p99_us", "cpu_us_per_req")}
            row[server_name]["rounds"] = [round(run["rps"]) for run in runs[(workload, server_name)]]
        row["ratio"] = row["library-server"]["rps"] / row["baseline"]["rps"]
        row["cpu_ratio"] = row["library-server"]["cpu_us_per_req"] / row["baseline"]["cpu_us_per_req"]
        table.append(row)
        log("%-6s this build %9.0f req/s (CPU %5.1f µs/req), baseline %9.0f req/s (CPU %5.1f µs/req): "
            "%.3fx the req/s, %.3fx the CPU per request"
            % (workload, row["library-server"]["rps"], row["library-server"]["cpu_us_per_req"],
               row["baseline"]["rps"], row["baseline"]["cpu_us_per_req"], row["ratio"], row["cpu_ratio"]))
    return table


def scale(args, work):
    rows = []
    for books in args.scale:
        libraries = max(100, books // 100)
        database = seeded(books, work, libraries)
        row = {"books": books, "libraries": libraries, "database_mib": os.path.getsize(database) / 2**20}
        for workload in ("get", "list"):
            measured = [measure("library-server", workload, database, work, args, books, libraries)
                        for _ in range(args.scale_rounds)]
            row[workload] = {key: median_of(measured, key) for key in ("rps", "p50_us", "p99_us", "startup_ms",
                                                                        "peak_rss_mib")}
            log("scale %8d books  %-4s %9.0f req/s  p99 %6.2f ms  startup %5.0f ms  RSS %5.1f MiB"
                % (books, workload, row[workload]["rps"], row[workload]["p99_us"] / 1000,
                   row[workload]["startup_ms"], row[workload]["peak_rss_mib"]))
        rows.append(row)
    return rows


def fanout(args):
    rows = []
    for subscribers in args.fanout:
        output = subprocess.run(
            ["bash", os.path.join(HERE, "fanout.sh"), str(subscribers), str(args.fanout_rounds)],
            capture_output=True, text=True, timeout=900, env=dict(os.environ, SERVER=OURS),
        )
        text = output.stdout
        result = re.findall(r"^RESULT (.*)$", text, re.M)
        cpu = re.search(r"server CPU during rounds\s+([\d.]+) ms", text)
        if output.returncode != 0 or not result or not cpu:
            raise RuntimeError("fanout.sh %d failed:\n%s%s" % (subscribers, text[-3000:], output.stderr[-2000:]))
        fields = dict(pair.split("=") for pair in result[-1].split())
        memory = re.search(r"server memory per subscriber\s+([\d.]+) KiB", text)
        row = {
            "subscribers": subscribers,
            "rounds": args.fanout_rounds,
            "received": int(fields["received"]),
            "missed": int(fields["missed"]),
            "p50_ms": float(fields["p50"]),
            "p99_ms": float(fields["p99"]),
            "cpu_ms_per_round": float(cpu.group(1)) / args.fanout_rounds,
            "kib_per_subscriber": float(memory.group(1)) if memory else None,
        }
        row["cpu_us_per_event"] = row["cpu_ms_per_round"] * 1000 / subscribers
        rows.append(row)
        log("fanout %6d subscribers  p50 %7.1f ms  p99 %7.1f ms  CPU %6.1f ms/round (%.2f µs per event)  %s KiB each"
            % (subscribers, row["p50_ms"], row["p99_ms"], row["cpu_ms_per_round"], row["cpu_us_per_event"],
               row["kib_per_subscriber"]))
    return rows


def over_observation(args, work):
    database = seeded(args.books, work, args.libraries)
    copy = os.path.join(work, "observe.sqlite")
    shutil.copyfile(database, copy)
    server = Server(SERVERS["library-server"](copy))
    try:
        output = subprocess.run(
            [sys.executable, os.path.join(HERE, "overobserve.py"), str(server.port), str(args.books)],
            capture_output=True, text=True, timeout=600,
        )
    finally:
        server.stop()
    if output.returncode != 0:
        raise RuntimeError("overobserve.py failed:\n%s%s" % (output.stdout, output.stderr))
    log(output.stdout.rstrip())
    return json.loads(re.search(r"^JSON (.*)$", output.stdout, re.M).group(1))


# ---- reporting ---------------------------------------------------------------------------------


def target_note(row):
    """The target column's note: the ratio's target, and whether it was met. A target is the ratio
    and a p99 no worse than the same-semantics comparator's, so a ratio that passes with a worse
    p99 says which part missed."""
    if row["target"] is None:
        return ""
    if row["met"]:
        return " (≥ %.1f× met)" % row["target"]
    if row["ratio"] >= row["target"]:
        return " (≥ %.1f× met; p99 no worse: MISSED)" % row["target"]
    return " (≥ %.1f× MISSED)" % row["target"]


def markdown(results):
    lines = []
    settings = results["settings"]
    if results.get("compare"):
        lines.append("Measured %s on this machine (%s), `wrk -t%d -c%d`, %d s per run after %s s of warm-up, "
                     "%d rounds (each: library-server, Hummingbird same semantics, Hummingbird plain), medians; "
                     "%s books in %d libraries; library-server's access log on (its default). CPU: the server's "
                     "utime + stime over the measured run. System calls: `perf stat -e raw_syscalls:sys_enter "
                     "-p PID` over a separate %s s run on the same warm server."
                     % (results["dates"]["compare"], settings["machine"], settings["threads"],
                        settings["connections"], settings["duration"], settings["warmup"], settings["rounds"],
                        format(settings["books"], ","), settings["libraries"], settings.get("syscall_seconds", "?")))
        lines.append("")
        lines.append("| workload | req/s ours / HB same / HB plain | ours ÷ HB same (target) | ours ÷ HB plain (goal) "
                     "| p50 ours / same / plain (ms) | p99 ours / same / plain (ms) "
                     "| CPU per request ours / same / plain (µs) | system calls per request ours / same / plain "
                     "| peak RSS ours / same / plain (MiB) |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        names = ("library-server", "hummingbird", "hummingbird-plain")

        def each(row, key, scale=1, digits=0):
            values = []
            for name in names:
                value = (row.get(name) or {}).get(key)
                values.append("—" if value is None else "%.*f" % (digits, value / scale))
            return " / ".join(values)

        for row in results["compare"]:
            target = target_note(row)
            if row.get("plain_ratio") is None:
                plain = "—"
            else:
                goal = row.get("plain_goal")
                plain = "%.2f×%s" % (row["plain_ratio"], "" if goal is None else " (≥ %.1f× %s)" % (
                    goal, "met" if row["plain_goal_met"] else "missed"))
            lines.append("| %s | %s | %.2f×%s | %s | %s | %s | %s | %s | %s |" % (
                row["label"].replace("|", "\\|"), each(row, "rps"), row["ratio"], target, plain,
                each(row, "p50_us", 1000, 2), each(row, "p99_us", 1000, 2), each(row, "cpu_us_per_req", 1, 1),
                each(row, "syscalls_per_req", 1, 2), each(row, "peak_rss_mib", 1, 1)))
        lines.append("")
    if results.get("scale"):
        lines.append("library-server alone, `GET /books/{id}` and the list page, measured %s:" % results["dates"]["scale"])
        lines.append("")
        lines.append("| books | database (MiB) | startup (ms) | GET req/s | GET p99 (ms) | list req/s | list p99 (ms) |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|")
        for row in results["scale"]:
            lines.append("| %s | %.0f | %.0f | %.0f | %.2f | %.0f | %.2f |" % (
                format(row["books"], ","), row["database_mib"], row["get"]["startup_ms"], row["get"]["rps"],
                row["get"]["p99_us"] / 1000, row["list"]["rps"], row["list"]["p99_us"] / 1000))
        lines.append("")
    if results.get("fanout"):
        lines.append("SSE fan-out (`Benchmarks/fanout.sh N %d`), measured %s:" % (
            results["fanout"][0]["rounds"], results["dates"]["fanout"]))
        lines.append("")
        lines.append("| SSE subscribers on one book | change → event p50 (ms) | p99 (ms) | server CPU per change (ms) "
                     "| CPU per event delivered (µs) | memory per subscriber (KiB) |")
        lines.append("|---:|---:|---:|---:|---:|---:|")
        for row in results["fanout"]:
            lines.append("| %s | %.1f | %.1f | %.1f | %.2f | %s |" % (
                format(row["subscribers"], ","), row["p50_ms"], row["p99_ms"], row["cpu_ms_per_round"],
                row["cpu_us_per_event"], "%.2f" % row["kib_per_subscriber"] if row["kib_per_subscriber"] else "?"))
        lines.append("")
    if results.get("observation"):
        o = results["observation"]
        lines.append("Over-observation, measured %s: %d subscribers on %d books, each asking for %s; %d random single-field "
                     "PATCHes. Events delivered: **%d**; a push-everything design (`ObservableObject`: every change "
                     "to every subscriber of the object) would send %d, **%.1f×** as many, and %.1f× the bytes "
                     "(%s vs %s). Fields outside a subscriber's request received: %d."
                     % (results["dates"]["observation"], o["subscribers"], o["books"], o["field_sets"], o["writes"], o["delivered"],
                        o["push_everything"], o["push_everything"] / max(1, o["delivered"]),
                        o["push_bytes"] / max(1, o["delivered_bytes"]), format(o["delivered_bytes"], ","),
                        format(o["push_bytes"], ","), o["foreign_fields"]))
        lines.append("")
    return "\n".join(lines)


def svg_chart(results):
    """Two panels: req/s per workload (ours beside the comparator), and GET/list req/s by book count."""
    compare = results.get("compare") or []
    scale_rows = results.get("scale") or []
    width, height = 900, 380
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="12">' % (width, height), '<rect width="100%" height="100%" fill="white"/>']
    colors = {"library-server": "#2b6cb0", "hummingbird": "#dd6b20", "hummingbird-plain": "#38a169"}

    def panel(x0, y0, w, h, title, groups, series, y_max):
        parts.append('<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>' % (x0, y0 - 12, title))
        parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (x0, y0 + h, x0 + w, y0 + h))
        for tick in range(0, 5):
            value = y_max * tick / 4
            y = y0 + h - h * tick / 4
            parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (x0, y, x0 + w, y))
            parts.append('<text x="%d" y="%.1f" text-anchor="end" fill="#555">%dk</text>' % (x0 - 4, y + 4,
                                                                                              value / 1000))
        slot = w / max(1, len(groups))
        bar = slot * 0.8 / max(1, len(series))
        for index, (label, values) in enumerate(groups):
            for position, (name, _) in enumerate(series):
                value = values.get(name)
                if value is None:
                    continue
                bar_height = h * value / y_max
                x = x0 + index * slot + slot * 0.1 + position * bar
                parts.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.0f req/s'
                             '</title></rect>' % (x, y0 + h - bar_height, bar - 2, bar_height, colors.get(name, name),
                                                  name, label, value))
                parts.append('<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%.1fk</text>'
                             % (x + bar / 2 - 1, y0 + h - bar_height - 3, value / 1000))
            parts.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (x0 + index * slot + slot / 2,
                                                                                    y0 + h + 16, label))
        for position, (name, legend) in enumerate(series):
            parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (x0, y0 + h + 24 + 14 * position,
                                                                                    colors.get(name, name)))
            parts.append('<text x="%d" y="%d">%s</text>' % (x0 + 14, y0 + h + 33 + 14 * position, legend))

    if compare:
        groups = [(row["workload"], {name: row[name]["rps"] for name in SERVERS if row.get(name)}) for row in compare]
        top = max(max(values.values()) for _, values in groups) * 1.15
        panel(60, 40, 480, 250, "req/s, wrk -t2 -c64 (medians)", groups,
              [(name, LABELS[name]) for name in SERVERS], top)
    if scale_rows:
        colors["get"], colors["list"] = "#2b6cb0", "#63b3ed"
        groups = [("%s" % format(row["books"], ","), {"get": row["get"]["rps"], "list": row["list"]["rps"]})
                  for row in scale_rows]
        top = max(max(values.values()) for _, values in groups) * 1.15
        panel(620, 40, 250, 250, "library-server by book count", groups, [("get", "GET book"), ("list", "list page")],
              top)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    numbers = lambda text: [int(part) for part in text.split(",") if part]
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10, help="seconds of measured load per run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of load before each measured run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--books", type=int, default=100000, help="books in the comparison's database")
    parser.add_argument("--libraries", type=int, default=100)
    parser.add_argument("--workloads", type=lambda t: t.split(","), default=list(WORKLOADS))
    parser.add_argument("--scale", type=numbers, default=[10000, 100000, 1000000],
                        help="book counts for the scaling table (empty to skip)")
    parser.add_argument("--scale-rounds", type=int, default=2)
    parser.add_argument("--fanout", type=numbers, default=[2000, 6000, 18000],
                        help="subscriber counts for the fan-out table (empty to skip)")
    parser.add_argument("--fanout-rounds", type=int, default=20)
    parser.add_argument("--syscall-seconds", type=int, default=3,
                        help="seconds of the extra run under perf that counts system calls (0 to skip)")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--skip-observation", action="store_true")
    parser.add_argument("--no-readme", action="store_true", help="leave docs/performance.md alone")
    parser.add_argument("--baseline", metavar="BINARY",
                        help="only compare this build with another library-server binary (results/baseline.json)")
    args = parser.parse_args()
    for workload in args.workloads:
        if workload not in WORKLOADS:
            parser.error("unknown workload %s" % workload)

    with open("/proc/cpuinfo") as cpuinfo:
        model = re.search(r"model name\s*:\s*(.*)", cpuinfo.read())
    results = {
        "date": datetime.date.today().isoformat(),
        "settings": {
            "machine": "%d cores, %s" % (os.cpu_count(), model.group(1).strip() if model else "unknown CPU"),
            "threads": args.threads, "connections": args.connections, "duration": args.duration,
            "warmup": args.warmup + args.books // 100_000, "rounds": args.rounds, "books": args.books, "libraries": args.libraries,
            "syscall_seconds": args.syscall_seconds,
        },
    }
    work = tempfile.mkdtemp(prefix="library-bench.")
    if args.baseline:
        try:
            results["baseline"] = against_baseline(args, work)
        finally:
            stop_all()
            shutil.rmtree(work, ignore_errors=True)
        results["commit"], results["machine"] = commit(), machine()
        with open(os.path.join(RESULTS, "baseline.json"), "w") as output:
            json.dump(results, output, indent=2)
        return 0
    failed = False
    try:
        if not args.skip_compare:
            results["compare"] = compare(args, work)
        if args.scale:
            results["scale"] = scale(args, work)
        if args.fanout:
            results["fanout"] = fanout(args)
        if not args.skip_observation:
            results["observation"] = over_observation(args, work)
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)

    # A partial run (--skip-compare, --scale "", ...) keeps the other sections of the last run,
    # each with the date it was measured on.
    previous_path = os.path.join(RESULTS, "results.json")
    if os.path.exists(previous_path):
        with open(previous_path) as previous_file:
            previous = json.load(previous_file)
        for section in ("compare", "scale", "fanout", "observation"):
            if section not in results and section in previous:
                results[section] = previous[section]
                results.setdefault("dates", {})[section] = previous.get("dates", {}).get(section, previous["date"])
                if section == "compare":
                    results["settings"] = previous["settings"]
    for section in ("compare", "scale", "fanout", "observation"):
        results.setdefault("dates", {}).setdefault(section, results["date"])

    results["commit"], results["machine"] = commit(), machine()
    text = markdown(results)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "results.md"), "w") as out:
        out.write(text + "\n")
    with open(os.path.join(RESULTS, "results.json"), "w") as out:
        json.dump(results, out, indent=1)
    if results.get("compare") or results.get("scale"):
        with open(os.path.join(RESULTS, "chart.svg"), "w") as out:
            out.write(svg_chart(results))
    if not args.no_readme:
        subprocess.run([sys.executable, os.path.join(HERE, "figures.py")], check=True)
    log("")
    log(text)
    for row in results.get("compare", []):
        if row["met"] is False:
            failed = True
            log("target missed: %s %.2f× (target %.1f×), p99 %.2f vs %.2f ms" % (
                row["label"], row["ratio"], row["target"], row["library-server"]["p99_us"] / 1000,
                row["hummingbird"]["p99_us"] / 1000))
        if row.get("plain_goal_met") is False:
            log("goal missed (not failing the run): %s %.2f× the plain comparator (goal %.1f×)" % (
                row["label"], row["plain_ratio"], row["plain_goal"]))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
