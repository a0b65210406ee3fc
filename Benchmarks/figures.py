#!/usr/bin/env python3
"""Writes the README's benchmark tables from the result files in Benchmarks/results/.

    python3 Benchmarks/figures.py           # rewrite every block in docs/performance.md
    python3 Benchmarks/figures.py --check   # exit 1 when a block differs from its result file

Each benchmark writes what it measured to Benchmarks/results/ (JSON with the date, the commit and
the machine; bench.py and live.py also their tables as .md) and nothing else; this script is the
one place that turns them into the README's text, between `<!-- NAME:begin -->` and
`<!-- NAME:end -->`. So a figure in the README is always the one in the file beside it, with the
commit that measured it, and CI (Benchmarks/smoke.sh) checks that nobody edited one by hand.

Blocks: `benchmark` (bench.py: results.md and chart.svg), `live` (live.py: live.md),
`client-renders` (client-renders.sh), `fanout-floor` (fanout-floor.sh), `replica-writes`
(postgres.py --replica-writes), `postgres` (postgres.py), `observe-collections` (bench.py's
over-observation step: results.json), `watches` (watches.py), `profile-get` (profile_get.py),
`profile-join` (profile_join.py), `replicas-fanout` (replicas_fanout.sh), `replicas-latency` (scripts/replicas.sh --short -- --results). A block whose result file is missing is left as it is.
"""

import argparse
import json
import statistics
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
README = os.path.join(ROOT, "docs", "performance.md")


def read(name):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return json.load(file) if name.endswith(".json") else file.read().rstrip("\n")


def number(value, digits=0):
    return f"{value:,.{digits}f}"


def source(data, name):
    return (f"Commit {data['commit']}, {data.get('date', 'date not recorded')}, {data['machine']} "
            f"(`Benchmarks/results/{name}`).")


def from_result(name):
    """A block made from one result file: the function gets its data and returns the block's lines;
    no block (the README's text left as it is) when the file is missing."""
    def wrap(make):
        def block():
            lines = None if (data := read(name)) is None else make(data)
            return None if lines is None else "\n".join(lines)
        return block
    return wrap


def benchmark():
    table = read("results.md")
    return None if table is None else table + "\n\n![Benchmark chart](../Benchmarks/results/chart.svg)"


def live():
    return read("live.md")


@from_result("client-renders.json")
def client_renders(data):
    modes = {mode["mode"]: mode for mode in data["modes"]}
    labels = {
        "fields": "`fields`: this client (watches exactly the fields read)",
        "whole": "`whole`: same models, whole-resource subscriptions",
        "objectWillChange": "`objectWillChange`: whole resources, any change re-renders every view of the object",
    }
    lines = [
        "| client | renders | rows | available count | list | badge | details | bytes received "
        "| title PATCH-to-render p50 / p99 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, label in labels.items():
        mode = modes[name]
        views = mode["rendersPerView"]
        lines.append(
            f"| {label} | {number(mode['renders'])} | {number(views['row'])} | {number(views['available'])} "
            f"| {number(views['list'])} | {number(views['badge'])} | {number(views['detail'])} "
            f"| {number(mode['bytes'])} | {mode['latencyP50Ms']:.1f} ms / {mode['latencyP99Ms']:.1f} ms |")
    fields, whole, push = modes["fields"], modes["whole"], modes["objectWillChange"]
    lines += [
        "",
        f"{data['books']:,} books, {data['seconds']} s at {data['writesPerSecond']} writes/s. "
        + source(data, "client-renders.json")
        + f" The `objectWillChange` screen renders **{push['renders'] / fields['renders']:.2f}x** as often as "
        f"this client (rows {push['rendersPerView']['row'] / fields['rendersPerView']['row']:.2f}x, the available "
        f"count {push['rendersPerView']['available'] / fields['rendersPerView']['available']:.2f}x); whole-resource "
        f"subscriptions receive **{whole['bytes'] / fields['bytes']:.2f}x** the bytes for the same renders. Streams "
        f"opened per mode: {', '.join(str(modes[n]['streamsOpened']) for n in labels)}; "
        f"{fields['titlesRendered']} of the {fields['titlesWritten']} titles written were rendered.",
    ]
    return lines


@from_result("fanout-floor.json")
def fanout_floor(data):
    ours, floor = data["medians"]["ours"], data["medians"]["floor"]
    subscribers, changes = data["subscribers"], data["changes"]
    lines = [
        "| server | p50 | p99 | server CPU per change | per event delivered |",
        "|---|---:|---:|---:|---:|",
    ]
    contenders = [("library-server", ours), ("floor", floor)]
    if "uring" in data["medians"]:
        contenders.append(("floor, sends through io_uring", data["medians"]["uring"]))
    for label, row in contenders:
        per_change = row["cpuMs"] / changes
        lines.append(f"| {label} | {row['p50Ms']:.1f} ms | {row['p99Ms']:.1f} ms | {per_change:.0f} ms "
                     f"| {per_change * 1000 / subscribers:.1f} µs |")
    lines += [
        "",
        f"{subscribers:,} subscribers of one book, {changes} changes per run, medians of {data['rounds']} "
        f"rounds. " + source(data, "fanout-floor.json")
        + f" p99 ours ÷ floor: **{data['p99Ratio']:.2f}**; CPU per event ours ÷ floor: "
        f"**{ours['cpuMs'] / floor['cpuMs']:.2f}**."
        + (f" The floor through io_uring ÷ with send(): p99 **{data['medians']['uring']['p99Ms'] / floor['p99Ms']:.2f}**, "
           f"CPU **{data['medians']['uring']['cpuMs'] / floor['cpuMs']:.2f}**." if "uring" in data["medians"] else ""),
    ]
    return lines


def scheduling(value):
    """How the kernel scheduled a run with PostgreSQL, for its caption (recorded since b76fce4;
    none before): with autogroup on, PostgreSQL's backends waited for a core for up to seconds
    (Benchmarks/lib/benchlib.py, one_scheduling_group)."""
    if value is None:
        return ""
    if value in ("off", "turned off"):
        return "autogroup scheduling off"
    return "autogroup scheduling **on** (PostgreSQL's backends may have waited seconds for a core)"


def clause(text):
    """`text` as a clause of a caption's list: followed by a comma, or nothing when empty."""
    return text + ", " if text else ""


@from_result("replica-writes.json")
def replica_writes(data):
    rows = data["rows"]
    base = rows[0]["rps"]
    # Writes per transaction: recorded since commit 918accd; older results have none.
    batches = all("batch" in run for row in rows for run in row["runs"])
    lines = [
        "| replicas written through | combined req/s | p99 | ÷ one replica "
        "| CPU per write: all replicas + PostgreSQL (µs) | of which PostgreSQL (µs) |"
        + (" writes per transaction |" if batches else ""),
        "|---:|---:|---:|---:|---:|---:|" + ("---:|" if batches else ""),
    ]
    for row in rows:
        lines.append(f"| {row['replicas']} | {number(row['rps'])} | {row['p99Ms']:.1f} ms | {row['rps'] / base:.2f} "
                     f"| {row['cpuUs']:.0f} | {row['databaseCpuUs']:.0f} |"
                     + (f" {statistics.median(run['batch'] for run in row['runs']):.1f} |" if batches else ""))
    lines += [
        "",
        f"PostgreSQL with fsync {data['fsync']}, {clause(scheduling(data.get('autogroup')))}{data['books']:,} books, "
        f"`wrk` with {data['connections']} "
        f"connections split between the replicas written through, {data['seconds']} s per run, medians of "
        f"{data['rounds']} rounds. " + source(data, "replica-writes.json"),
    ]
    memory = data.get("largestReplicaAnonRssMiB")
    if memory:
        lines += ["", "The largest replica's anonymous RSS after each run, in order: "
                  + ", ".join(f"{value:.0f}" for value in memory) + " MiB."]
    return lines


@from_result("postgres.json")
def postgres(data):
    ours, theirs = "library-server", "hummingbird-postgres"
    labels = {"get": "GET /books/{id}", "patch": "PATCH /books/{id}"}
    lines = [
        "| deployment | workload | req/s ours | req/s comparator | ours ÷ comparator | p99 ours / comp. "
        "| servers' CPU per request ours / comp. | PostgreSQL CPU per request ours / comp. |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for topology in data["topologies"]:
        runs = topology["runs"]
        for workload, label in labels.items():
            if workload not in runs.get(ours, {}) or workload not in runs.get(theirs, {}):
                continue

            def median(name, key):
                values = sorted(run[key] for run in runs[name][workload])
                middle = len(values) // 2
                return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2

            lines.append(
                f"| {topology['topology']} | {label} | {number(median(ours, 'rps'))} | {number(median(theirs, 'rps'))} "
                f"| **{median(ours, 'rps') / median(theirs, 'rps'):.2f}** "
                f"| {median(ours, 'p99_us') / 1000:.1f} / {median(theirs, 'p99_us') / 1000:.1f} ms "
                f"| {median(ours, 'cpu_us'):.0f} / {median(theirs, 'cpu_us'):.0f} µs "
                f"| {median(ours, 'db_cpu_us'):.0f} / {median(theirs, 'db_cpu_us'):.0f} µs |")
    ratios = []
    for topology in data["topologies"]:
        for workload in labels:
            per_round = [a["rps"] / b["rps"] for a, b in zip(topology["runs"].get(ours, {}).get(workload, []),
                                                            topology["runs"].get(theirs, {}).get(workload, []))]
            if per_round:
                ratios.append(f"{topology['topology']} {workload.upper()} "
                              + " / ".join(f"{ratio:.2f}" for ratio in per_round))
    errors = []
    for topology in data["topologies"]:
        for name, workloads in topology["runs"].items():
            for workload, runs in workloads.items():
                count = sum(int(run.get("socket_errors", 0)) for run in runs)
                if count:
                    errors.append(f"{name}'s {workload.upper()} through {topology['topology']}: {count} in "
                                  f"{number(sum(run['requests'] for run in runs))} requests")
    lines += [
        "",
        f"PostgreSQL with fsync {data['fsync']}, {clause(scheduling(data.get('autogroup')))}{data['books']:,} books, "
        f"`wrk -t{data['threads']} "
        f"-c{data['connections']}` (through nginx when there are replicas), {data['seconds']} s per run after "
        f"{data['warmup']} s of warm-up, medians of {data['rounds']} rounds, the order of the servers flipped every "
        f"round. Ours ÷ comparator in each round: " + "; ".join(ratios) + ". "
        + ("Socket errors (`wrk`'s 5 s timeout): " + "; ".join(errors) + ". " if errors else "")
        + source(data, "postgres.json"),
    ]
    return lines


def live_collection():
    table = read("live-collection.md")
    data = read("live-collection.json")
    if table is None or data is None:
        return None
    rows = sorted(data["rows"], key=lambda row: row["books"])
    smallest, largest = rows[0], rows[-1]
    ratio = largest["cpu_us_per_write"] / smallest["cpu_us_per_write"]
    floor = ""
    if "floor_cpu_us_per_write" in smallest and "floor_cpu_us_per_write" in largest:
        floor_ratio = largest["floor_cpu_us_per_write"] / smallest["floor_cpu_us_per_write"]
        live_share = [row["cpu_us_per_write"] - row["floor_cpu_us_per_write"] for row in (smallest, largest)]
        noise = " (within this machine's noise)" if all(abs(share) < 10 for share in live_share) else ""
        floor = (f"With no subscriber the same writes cost {floor_ratio:.2f} times as much at the larger size; "
                 f"the subscriber adds {live_share[0]:+.0f} µs per write at {smallest['books']:,} books and "
                 f"{live_share[1]:+.0f} µs at {largest['books']:,}{noise}. ")
    return (table + "\n\n" + f"Server CPU per write at {largest['books']:,} books ÷ at {smallest['books']:,} books, "
            f"same run: **{ratio:.2f}** (the goal is at most 1.10). " + floor + source(data, "live-collection.json"))


@from_result("memory.json")
def memory(data):
    samples = data["samples"]
    picks = sorted({0, len(samples) // 4, len(samples) // 2, 3 * len(samples) // 4, len(samples) - 1})
    lines = [
        "| t (s) | RssAnon (heap) | of which SQLite's page caches | malloc's bytes in use | RssFile (mapped files) "
        "| open FDs |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for index in picks:
        sample = samples[index]
        in_use = sample.get("malloc_in_use_kib")
        lines.append(f"| {sample['t']:.0f} | {sample['rss_anon_kib'] / 1024:.1f} MiB | "
                     f"{sample['sqlite_kib'] / 1024:.1f} MiB | "
                     f"{'-' if in_use is None else f'{in_use / 1024:.1f} MiB'} | "
                     f"{sample['rss_file_kib'] / 1024:.1f} MiB | {sample['fds']} |")
    verdict = "flat" if data["flat"] else "**grows**"
    lines += [
        "",
        f"`Benchmarks/memory.py`: {data['books']:,} books in one library, {data['seconds']} s of 90 % GET / 10 % "
        f"PATCH and list pages ({number(data['requests'])} requests) while {number(data['subscriptions'])} live "
        f"subscriptions came and went (library streams with every member's title, collection and book "
        f"streams). Over the last half, medians of its first and second quarters: RssAnon "
        f"{data['rss_anon_third_quarter_median_mib']:.1f} → {data['rss_anon_last_quarter_median_mib']:.1f} MiB "
        f"({data['rss_anon_growth_mib']:+.1f} MiB, slope {data['rss_anon_slope_mib_per_min']:+.2f} MiB/min), "
        f"SQLite's page caches {data['sqlite_first_mib']:.1f} MiB after the first samples and "
        f"{data['sqlite_last_mib']:.1f} MiB at the end, and the server's own heap (RssAnon less SQLite's) "
        f"{data['own_heap_third_quarter_median_mib']:.1f} → {data['own_heap_last_quarter_median_mib']:.1f} MiB "
        f"({data['last_half_growth_mib']:+.1f} MiB, slope {data['last_half_slope_mib_per_min']:+.2f} MiB/min). "
        + f"The verdict is on the two levels that heap swings between (the 100,000 members' models are let go "
        f"whenever every library subscriber has left, and loaded again by the next): its lowest sample, no model "
        f"loaded, {data['own_heap_third_quarter_lowest_mib']:.1f} → {data['own_heap_last_quarter_lowest_mib']:.1f} "
        f"MiB, and its upper quartile, the models loaded, {data['own_heap_third_quarter_upper_quartile_mib']:.1f} → "
        f"{data['own_heap_last_quarter_upper_quartile_mib']:.1f} MiB (each at most "
        f"{data['allowed_growth_mib']:.1f} MiB more is flat): {verdict}. "
        f"What the server holds, malloc's bytes in use less SQLite's, at the same two levels: lowest "
        f"{data['held_third_quarter_lowest_mib']:.1f} → {data['held_last_quarter_lowest_mib']:.1f} MiB, upper "
        f"quartile {data['held_third_quarter_upper_quartile_mib']:.1f} → "
        f"{data['held_last_quarter_upper_quartile_mib']:.1f} MiB; its medians "
        f"{data['live_heap_third_quarter_median_mib']:.1f} → {data['live_heap_last_quarter_median_mib']:.1f} MiB; "
        f"malloc's free pool (freed chunks kept for reuse, mostly given back to the system by the heap "
        f"trimmer) at most {data['malloc_free_max_mib']:.0f} MiB. "
        + f"The heap's peak, "
        f"{data['rss_anon_max_mib']:.0f} MiB, came with several whole-library snapshots in flight. "
        + source(data, "memory.json"),
    ]
    return lines


@from_result("results.json")
def observe_collections(data):
    if "collections" not in (data.get("observation") or {}):
        return None
    c = data["observation"]["collections"]
    plain, mux = c["collection_subscribers"], c["multiplexed_subscribers"]
    lines = [
        "| subscribers | delivered | push-everything would send | bytes delivered / push-everything "
        "| unrequested fields / items, wrong events, states ≠ GET |",
        "|---|---:|---:|---:|---:|",
        f"| {plain} collection streams | {number(c['events_delivered'])} events "
        f"| {number(c['push_events_collections'])} ({c['push_events_collections'] / max(1, c['events_delivered']):.1f}×) "
        f"| {c['delivered_bytes'] / 1000:,.0f} KB / {c['push_bytes'] / 1e6:.2f} MB "
        f"({c['push_bytes'] / max(1, c['delivered_bytes']):.0f}×) "
        f"| {c['foreign_fields']} / {c['foreign_items']} / {c['mismatch']} / {c['state_mismatch']} |",
        f"| {mux} `/events` streams, {c['watches']} watches | {number(c['mux_frames_delivered'])} frames, "
        f"{number(c['mux_entries_delivered'])} entries "
        f"| {number(c['push_entries_mux'])} entries ({c['push_entries_mux'] / max(1, c['mux_entries_delivered']):.0f}×) "
        f"| {c['mux_delivered_bytes'] / 1000:,.0f} KB / {c['mux_push_bytes'] / 1e6:.2f} MB "
        f"({c['mux_push_bytes'] / max(1, c['mux_delivered_bytes']):.0f}×) "
        f"| {c['foreign_fields']} / {c['foreign_items']} / {c['mismatch']} / {c['state_mismatch']} |",
        "",
        f"{c['writes']} random writes on a database of {data['settings']['books']:,} books "
        f"(`Benchmarks/bench.py`'s over-observation step, measured {data['dates']['observation']}). "
        f"The last column counts both kinds of subscriber together. " + source(data, "results.json"),
    ]
    return lines


@from_result("watches.json")
def watches(data):
    rss = data["rss_mib_start_open_first_third_last_third"]
    anon = data["anon_mib_first_third_last_third"]
    lines = [
        "| streams × watches | open all | writes/s | entries/s | PATCH→entry p50 / p99 / max | server CPU per write "
        "| heap (RssAnon), max of the first / last third | RSS at start / all open / last third | live lag max "
        "| stale titles (50 streams checked) |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
        f"| {number(data['streams'])} × {data['watches_per_stream']} | {data['open_seconds']:.1f} s "
        f"| {number(data['writes_per_second'])} | {number(data['entries_per_second'])} "
        f"| {data['latency_p50_ms']:.1f} / {data['latency_p99_ms']:.1f} / {data['latency_max_ms']:.0f} ms "
        f"| {data['cpu_us_per_write']} µs | {anon[0]} / {anon[1]} MiB | {rss[0]} / {rss[1]} / {rss[3]} MiB "
        f"| {data['lag_max']} | {data['stale_titles_in_sample']} |",
        "",
        f"{data['books']:,} books in one library, {data['seconds']} s of writes. Frame ids strictly increased on "
        f"every stream: {'yes' if data['frame_ids_strictly_increase'] else '**no**'}. " + source(data, "watches.json"),
    ]
    return lines


@from_result("profile-get.json")
def profile_get(data):
    lines = ["| where the server's CPU goes | share | largest |", "|---|---:|---|"]
    for row in data["categories"]:
        top = ", ".join(f"`{symbol.replace('|', '/')}` {percent:.1f}" for percent, symbol in row["largest"])
        lines.append(f"| {row['name']} | {row['share']:.1f} % | {top} |")
    lines += [
        "",
        f"`GET /books/{{id}}` on {data['books']:,} books, the server pinned to one core and `wrk -t1 -c32` to the "
        f"other, {data['seconds']} s of `perf record` at {number(data['rps'])} req/s; self time per function. "
        + source(data, "profile-get.json"),
    ]
    return lines


@from_result("profile-join.json")
def profile_join(data):
    middle = data["median"]
    lines = ["| part of the first join | CPU | ran (from connecting) | of a core meanwhile | most self time in |",
             "|---|---:|---|---:|---|"]
    for part in middle["parts"]:
        top = ", ".join(f"`{symbol.replace('|', '/')}` {share:.1f} %" for share, symbol in part["top"][:3])
        lines.append(f"| {part['part']} | {part['cpu_s']:.2f} s | {part['first_s']:.2f} → {part['last_s']:.2f} s "
                     f"| {100 * part['busy']:.0f} % | {top} |")
    joins = ", ".join(f"{value:.2f}" for value in data["joins_s"])
    lines += [
        "",
        f"The first subscriber of {data['books']:,} books, `books.title`, on a fresh server each round: the round "
        f"whose join took the median time, {middle['join_s']:.2f} s (rounds: {joins} s), with {middle['cpu_s']:.2f} s "
        f"of the server's CPU, at least {middle['cpu_s'] / data['cores']:.2f} s on {data['cores']} cores however "
        f"it overlapped; `perf record` at {data['frequency']} Hz, each sample to the part its call chain is in "
        f"(`Benchmarks/profile_join.py`). " + source(data, "profile-join.json"),
    ]
    return lines


@from_result("replicas-fanout.json")
def replicas_fanout(data):
    lines = [
        "| subscribers | per replica | RSS per replica (with them) | per subscriber | rounds | missed "
        "| cross-replica p50 / p99 / max | CPU per replica during the rounds |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for run in data["runs"]:
        replicas = run["replicas"]
        p50 = [r["p50Ms"] for r in replicas]
        p99 = [r["p99Ms"] for r in replicas]
        cpu = " / ".join(f"{r['cpuMs'] / 1000:.1f}" for r in replicas)
        lines.append(
            f"| {number(sum(r['connected'] for r in replicas))} | {number(run['perReplica'])} "
            f"| {max(r['rssWithKiB'] for r in replicas) / 1024:.0f} MiB "
            f"| {max(r['kibPerSubscriber'] for r in replicas):.1f} KiB | {run['rounds']} × {len(replicas)} writers "
            f"| {sum(r['missed'] for r in replicas)} | {min(p50):,.0f}–{max(p50):,.0f} / {min(p99):,.0f}–{max(p99):,.0f} / "
            f"{max(r['maxMs'] for r in replicas):,.0f} ms "
            f"| {cpu} s |")
    states = {run.get("autogroup") for run in data["runs"]}
    kernel = scheduling(states.pop()) if len(states) == 1 else ""
    kernel = kernel[:1].upper() + kernel[1:] + ". " if kernel else ""
    lines += ["", "Each range is over the three generators (one per replica). " + kernel
              + source(data, "replicas-fanout.json")]
    return lines


@from_result("replicas-latency.json")
def replicas_latency(data):
    cross, same = data["crossReplica"], data["sameReplica"]
    return [f"Commit-to-event latency from a write through one replica to a subscriber of another, "
            f"{number(cross['samples'])} samples: **p50 {cross['p50Ms']:.1f} ms, p99 {cross['p99Ms']:.1f} ms**, max "
            f"{cross['maxMs']:.1f} ms (a subscriber of the replica written through: p50 {same['p50Ms']:.1f} ms, "
            f"p99 {same['p99Ms']:.1f} ms, {number(same['samples'])} samples); {number(data['acknowledgedWrites'])} "
            f"writes acknowledged in {data['seconds']:.0f} s with the outages; every check of the run "
            f"{'passed' if data['passed'] else '**failed**'}. " + source(data, "replicas-latency.json")]


@from_result("lists.json")
def lists(data):
    reads = data["reads"]
    plain = reads["insertion order"]
    lines = [
        "| page of 50, one library of %s books | first page p50 / p99 | later pages p50 / p99 "
        "| p99 vs insertion order (first / later) |" % number(data["books"]),
        "|---|---:|---:|---:|",
        f"| insertion order (no `sort`) | {plain['first']['median_ms']:.2f} / {plain['first']['p99_ms']:.2f} ms "
        f"| {plain['later']['median_ms']:.2f} / {plain['later']['p99_ms']:.2f} ms | 1 / 1 |",
    ]
    for name, entry in reads.items():
        if name.startswith("sort="):
            lines.append(
                f"| `{name}` | {entry['first']['median_ms']:.2f} / {entry['first']['p99_ms']:.2f} ms "
                f"| {entry['later']['median_ms']:.2f} / {entry['later']['p99_ms']:.2f} ms "
                f"| {entry['first_vs_insertion_order_p99']:.2f}x / {entry['later_vs_insertion_order_p99']:.2f}x |")
    for name, entry in reads.items():
        if name.startswith("q="):
            lines.append(f"| `{name}` ({entry['first_page_items']} on the page) "
                         f"| {entry['median_ms']:.2f} / {entry['p99_ms']:.2f} ms | | |")
    lines += [
        "",
        "| %d s of wrk, 32 connections | without the list indexes | with them | throughput / p99, with ÷ without |"
        % data["seconds"],
        "|---|---:|---:|---:|",
    ]
    names = {"patch.lua": "PATCH title", "patch_available.lua": "PATCH available", "post.lua": "POST /books"}
    for script, entry in data["writes"].items():
        lines.append(
            f"| {names.get(script, script)} | {number(entry['without']['rps'])}/s, p99 {entry['without']['p99_ms']:.1f} ms "
            f"| {number(entry['with']['rps'])}/s, p99 {entry['with']['p99_ms']:.1f} ms "
            f"| {entry['rps_ratio_with_vs_without']:.2f}x / {entry['p99_ratio_with_vs_without']:.2f}x |")
    lines += ["", source(data, "lists.json")]
    return lines


@from_result("windows.json")
def windows(data):
    lines = [
        "| opening, one library of %s books | window: request to end of snapshot, p50 / p99 "
        "| `GET` of the same page, p50 / p99 | p99 window ÷ `GET` |" % number(data["books"]),
        "|---|---:|---:|---:|",
    ]
    for name, entry in data["opening"].items():
        window, listed = entry["window"], entry["GET"]
        lines.append(f"| {name} | {window['median_ms']:.2f} / {window['p99_ms']:.2f} ms "
                     f"| {listed['median_ms']:.2f} / {listed['p99_ms']:.2f} ms | {entry['p99_ratio_window_vs_GET']:.2f}x |")
    fan = data["fan_out"]
    plain = fan["plain watches"]
    lines += [
        "",
        "| PATCH to the last of 100 streams having its event | p50 | p95 | p99 | p99 ÷ plain watches |",
        "|---|---:|---:|---:|---:|",
        f"| 100 plain watches of the book | {plain['median_ms']:.2f} ms | {plain['p95_ms']:.2f} ms "
        f"| {plain['p99_ms']:.2f} ms | 1 |",
    ]
    for direction in ("into", "out of"):
        entry = fan["windows"][direction]
        ratio = fan["p99_ratio_windows_%s_vs_plain" % direction.replace(" ", "_")]
        lines.append(f"| a book moved {direction} 100 windows | {entry['median_ms']:.2f} ms | {entry['p95_ms']:.2f} ms "
                     f"| {entry['p99_ms']:.2f} ms | {ratio:.2f}x |")
    outside = data["writes_outside"]
    lines += [
        "",
        "| %d s of wrk title PATCHes outside every window, 32 connections | throughput | p99 "
        "| server CPU per write | window reads | live lag after |" % data["seconds"],
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in ("none", "1,000 windows", "again, no window"):
        entry = outside[name]
        label = {"none": "no window open", "again, no window": "no window open, again"}.get(name, name + " open")
        lines.append(f"| {label} | {number(entry['rps'])}/s | {entry['p99_ms']:.1f} ms "
                     f"| {entry['server_cpu_us_per_write']:.0f} µs | {entry['window_reads']} | {entry['lag_after']} |")
    lines += [
        "",
        f"With 1,000 windows open ÷ without: throughput {outside['rps_ratio_windows_vs_none']:.2f}x, "
        f"server CPU per write {outside['cpu_per_write_ratio_windows_vs_none']:.2f}x.",
        "",
        source(data, "windows.json"),
    ]
    return lines


BLOCKS = {
    "windows": windows,
    "lists": lists,
    "benchmark": benchmark,
    "memory": memory,
    "live-collection": live_collection,
    "live": live,
    "client-renders": client_renders,
    "fanout-floor": fanout_floor,
    "replica-writes": replica_writes,
    "postgres": postgres,
    "observe-collections": observe_collections,
    "watches": watches,
    "profile-get": profile_get,
    "profile-join": profile_join,
    "replicas-fanout": replicas_fanout,
    "replicas-latency": replicas_latency,
}


def render(content):
    """README text with every block whose result file exists rewritten; the names of the blocks
    missing from the README."""
    missing = []
    for name, make in BLOCKS.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        if begin not in content or end not in content:
            missing.append(name)
            continue
        text = make()
        if text is None:
            continue
        head, rest = content.split(begin, 1)
        _, tail = rest.split(end, 1)
        content = head + begin + "\n" + text + "\n" + end + tail
    return content, missing


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when docs/performance.md is not current")
    args = parser.parse_args()
    with open(README) as file:
        content = file.read()
    rendered, missing = render(content)
    if missing:
        print(f"figures: docs/performance.md has no block for {', '.join(missing)}", file=sys.stderr)
        return 1
    if args.check:
        if rendered != content:
            print("figures: docs/performance.md's benchmark blocks differ from Benchmarks/results/; "
                  "run python3 Benchmarks/figures.py", file=sys.stderr)
            return 1
        print(f"figures: docs/performance.md's {len(BLOCKS)} benchmark blocks match Benchmarks/results/")
        return 0
    if rendered != content:
        with open(README, "w") as file:
            file.write(rendered)
        print("figures: docs/performance.md updated")
    else:
        print("figures: docs/performance.md already current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
