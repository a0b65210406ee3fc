#!/usr/bin/env python3
"""What a signed token costs (issue "Per-user access"), side by side in one run.

    python3 Benchmarks/tokens.py [--server BINARY] [--rounds 3] [--duration 30] [--fanout 18000]

REST: GET /books/{id} and PATCH /books/{id} at 100,000 books (100 libraries), wrk -t2 -c64, with
  - the static API token (`--api-token`), the baseline;
  - an ES256 token whose rights are every library (`{"write":["*"]}`);
  - an ES256 token that lists the 100 libraries one by one (a librarian's token): a PATCH then
    reads the book before writing it, to check its library, where the other two take the
    one-statement path.
Every run starts a fresh server (with `--jwt-keys`) on a fresh copy of the same seeded database,
warmed up, in the order A B C every round; the table gives medians and ratios to the static token.

Fan-out (`--fanout N`, 0 to skip): Benchmarks/fanout.sh with N subscribers on one book, first all
with the static read token, then each with an ES256 token of its own (N distinct principals, each
verified once), ROUNDS title changes each: p50/p99 change-to-subscriber latency and memory per
subscriber, and the ratios.

Keys and tokens are made here (Python's `cryptography`). Everything runs on 127.0.0.1; every step
has a time limit. Results: Benchmarks/results/tokens.json.
"""

import argparse
import base64
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
from benchlib import commit, log, machine, stop_all  # noqa: E402

from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature  # noqa: E402

STATIC = "bench-static-api-token"
READ = "bench-static-read-token"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Signer:
    """An ES256 key, its JWK set and the tokens it signs."""

    def __init__(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        numbers = self.key.public_key().public_numbers()
        self.jwks = {"keys": [{"kty": "EC", "crv": "P-256", "kid": "bench", "x": b64(numbers.x.to_bytes(32, "big")),
                               "y": b64(numbers.y.to_bytes(32, "big"))}]}

    def token(self, sub, rights, lifetime=7200):
        header = b64(json.dumps({"alg": "ES256", "kid": "bench", "typ": "JWT"}).encode())
        claims = b64(json.dumps({"sub": sub, "exp": int(time.time()) + lifetime, "libraries": rights}).encode())
        r, s = decode_dss_signature(self.key.sign(("%s.%s" % (header, claims)).encode(), ec.ECDSA(hashes.SHA256())))
        return "%s.%s.%s" % (header, claims, b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))


def rest(args, work, signer, keys_path):
    libraries = ["00000000-0000-4000-8000-%012d" % (n + 1) for n in range(args.libraries)]
    variants = {
        "static token": STATIC,
        "ES256, every library": signer.token("bench-all", {"write": ["*"]}),
        "ES256, 100 libraries listed": signer.token("bench-listed", {"write": libraries}),
    }
    for name in variants:
        bench.SERVERS[name] = lambda db: [args.server, "--port", "0", "--database", db, "--jwt-keys", keys_path,
                                          "--api-token", STATIC]
    database = bench.seeded(args.books, work, args.libraries, server=args.server, name="tokens")
    runs = {(w, v): [] for w in args.workloads for v in variants}
    for round_number in range(1, args.rounds + 1):
        for workload in args.workloads:
            for name, token in variants.items():
                os.environ["AUTHORIZATION"] = "Bearer " + token
                result = bench.measure(name, workload, database, work, args, args.books, args.libraries)
                runs[(workload, name)].append(result)
                log("round %d  %-5s %-28s %9.0f req/s  p50 %6.2f ms  p99 %6.2f ms  CPU %5.1f µs/req"
                    % (round_number, workload, name, result["rps"], result["p50_us"] / 1000,
                       result["p99_us"] / 1000, result["cpu_us_per_req"]))
    os.environ.pop("AUTHORIZATION", None)
    table = []
    for workload in args.workloads:
        rows = {}
        for name in variants:
            measured = runs[(workload, name)]
            rows[name] = {key: statistics.median(run[key] for run in measured)
                          for key in ("rps", "p50_us", "p99_us", "cpu_us_per_req")}
            rows[name]["rounds"] = [round(run["rps"]) for run in measured]
        base = rows["static token"]
        for name in variants:
            rows[name]["rps_ratio"] = rows[name]["rps"] / base["rps"]
            rows[name]["p99_ratio"] = rows[name]["p99_us"] / base["p99_us"]
            log("%-5s %-28s %9.0f req/s (%.3fx)  p99 %6.2f ms (%.3fx)  CPU %5.1f µs/req"
                % (workload, name, rows[name]["rps"], rows[name]["rps_ratio"], rows[name]["p99_us"] / 1000,
                   rows[name]["p99_ratio"], rows[name]["cpu_us_per_req"]))
        table.append({"workload": workload, "label": bench.WORKLOADS[workload], "variants": rows})
    return table


def fanout_run(args, work, extra_env):
    environment = dict(os.environ, SERVER=args.server, **extra_env)
    output = subprocess.run(["bash", os.path.join(HERE, "fanout.sh"), str(args.fanout), str(args.fanout_rounds)],
                            env=environment, capture_output=True, text=True, timeout=1800)
    text = output.stdout + output.stderr
    if output.returncode != 0:
        raise RuntimeError("fanout.sh failed:\n" + text[-3000:])
    result = dict(pair.split("=") for pair in re.search(r"^RESULT (.*)$", text, re.M).group(1).split())
    if int(result["connected"]) != args.fanout or int(result["missed"]) != 0:
        raise RuntimeError("fan-out: %s of %d connected, %s events missed" % (result["connected"], args.fanout,
                                                                             result["missed"]))
    per_subscriber = float(re.search(r"server memory per subscriber\s+([\d.]+) KiB", text).group(1))
    p50, p99 = float(result["p50"]), float(result["p99"])
    return {"p50_ms": p50, "p99_ms": p99, "kib_per_subscriber": per_subscriber}


def fanout(args, work, signer, keys_path):
    tokens_path = os.path.join(work, "tokens.txt")
    log("minting %d ES256 tokens" % args.fanout)
    with open(tokens_path, "w") as tokens:
        for n in range(args.fanout):
            tokens.write(signer.token("subscriber-%d" % n, {"read": ["*"]}) + "\n")
    server_args = "--jwt-keys %s --api-token %s --read-token %s" % (keys_path, STATIC, READ)
    variants = {
        "static read token": {"SERVER_ARGS": server_args, "API_TOKEN": STATIC,
                              "FANOUT_ARGS": "-T " + os.path.join(work, "static.txt")},
        "a token each": {"SERVER_ARGS": server_args, "API_TOKEN": STATIC, "FANOUT_ARGS": "-T " + tokens_path},
    }
    with open(os.path.join(work, "static.txt"), "w") as static:
        static.write(READ + "\n")
    runs = {name: [] for name in variants}
    for round_number in range(1, args.fanout_repeats + 1):
        for name, extra in variants.items():
            result = fanout_run(args, work, extra)
            runs[name].append(result)
            log("fan-out %d  %-18s p50 %7.1f ms  p99 %7.1f ms  %.2f KiB/subscriber"
                % (round_number, name, result["p50_ms"], result["p99_ms"], result["kib_per_subscriber"]))
    rows = {name: {key: statistics.median(run[key] for run in measured)
                   for key in ("p50_ms", "p99_ms", "kib_per_subscriber")} for name, measured in runs.items()}
    base = rows["static read token"]
    mine = rows["a token each"]
    mine["p99_ratio"] = mine["p99_ms"] / base["p99_ms"]
    mine["kib_more"] = mine["kib_per_subscriber"] - base["kib_per_subscriber"]
    log("fan-out to %d: a token each p99 %.1f ms against %.1f ms (%.2fx), %.2f KiB/subscriber against %.2f (%+.2f)"
        % (args.fanout, mine["p99_ms"], base["p99_ms"], mine["p99_ratio"], mine["kib_per_subscriber"],
           base["kib_per_subscriber"], mine["kib_more"]))
    return {"subscribers": args.fanout, "rounds": args.fanout_rounds, "variants": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=os.path.join(os.path.dirname(HERE), ".build", "release",
                                                         "library-server"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=30, help="seconds of measured load per run")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--books", type=int, default=100000)
    parser.add_argument("--libraries", type=int, default=100)
    parser.add_argument("--workloads", type=lambda t: t.split(","), default=["get", "patch"])
    parser.add_argument("--fanout", type=int, default=18000, help="subscribers (0 skips the fan-out)")
    parser.add_argument("--fanout-rounds", type=int, default=10, help="title changes per fan-out run")
    parser.add_argument("--fanout-repeats", type=int, default=2, help="fan-out runs of each kind")
    args = parser.parse_args()
    args.syscall_seconds = 0
    if not os.access(args.server, os.X_OK):
        parser.error("no server binary at %s (swift build -c release --product library-server)" % args.server)
    work = tempfile.mkdtemp(prefix="library-tokens.")
    signer = Signer()
    keys_path = os.path.join(work, "keys.json")
    with open(keys_path, "w") as keys:
        json.dump(signer.jwks, keys)
    results = {"date": time.strftime("%Y-%m-%d"), "settings": {
        "books": args.books, "libraries": args.libraries, "rounds": args.rounds, "duration": args.duration,
        "threads": args.threads, "connections": args.connections}}
    try:
        if args.workloads and args.rounds > 0:
            results["rest"] = rest(args, work, signer, keys_path)
        if args.fanout > 0:
            results["fanout"] = fanout(args, work, signer, keys_path)
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)
    results["commit"], results["machine"] = commit(), machine()
    os.makedirs(bench.RESULTS, exist_ok=True)
    with open(os.path.join(bench.RESULTS, "tokens.json"), "w") as output:
        json.dump(results, output, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
