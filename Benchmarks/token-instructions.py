#!/usr/bin/env python3
"""What a signed token costs a request, in instructions (issue "Per-user access"), one run.

    python3 Benchmarks/token-instructions.py [--server BINARY] [--requests 1000]

Timings on this shared 2-core machine move by 10% from run to run; callgrind counts the
instructions the server executes, which repeat to a fraction of a percent for the same binary
and inputs whatever else the machine is doing. For each credential (the static API token, an
ES256 token for every library, an ES256 token listing 100 libraries one by one, 5 KB), the server
runs under `valgrind --tool=callgrind` twice: once answering only warm-up requests, once answering
REQUESTS more on one keep-alive connection; the difference divided by REQUESTS is what one request
costs, start-up and warm-up excluded. GET /books/{id} and PATCH /books/{id} (one field).

valgrind cannot read the DWARF 5 debug information of Swift 6.3's release binaries, so a copy with
it stripped is run (symbols stay). Keys and tokens are made here (Python's `cryptography`). Results:
Benchmarks/results/token-instructions.json.
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tokens import STATIC, Signer  # noqa: E402 (the same key and tokens as the timed benchmark)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Client:
    def __init__(self, port):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method, path, token, body=None):
        headers = {"Authorization": "Bearer " + token}
        if body is not None:
            headers["Content-Type"] = "application/json"
        self.connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:200]!r}")
        return json.loads(data) if data else None


def wait_ready(port, process, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the server exited while starting")
        try:
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            probe.request("GET", "/healthz")
            probe.getresponse().read()
            probe.close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("the server did not answer in time")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=os.path.join(os.path.dirname(HERE), ".build", "release", "library-server"))
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("token-instructions: valgrind is needed (apt-get install -y valgrind)")
    work = tempfile.mkdtemp(prefix="token-instructions-")
    try:
        server = os.path.join(work, "library-server")
        shutil.copy(args.server, server)
        subprocess.run(["strip", "--strip-debug", server], check=True)
        signer = Signer()
        keys = os.path.join(work, "keys.json")
        with open(keys, "w") as file:
            json.dump(signer.jwks, file)
        database = os.path.join(work, "library.sqlite")
        command = lambda port: [server, "--port", str(port), "--database", database, "--api-token", STATIC,
                                "--jwt-keys", keys, "--log-level", "error"]
        port = free_port()
        seeding = subprocess.Popen(command(port), stdout=subprocess.DEVNULL)
        wait_ready(port, seeding)
        client = Client(port)
        libraries = [client.call("POST", "/libraries", STATIC, {"name": f"Library {n}"})["id"] for n in range(100)]
        book = client.call("POST", "/books", STATIC, {"libraryId": libraries[0], "title": "Dune"})["id"]
        seeding.terminate()
        seeding.wait()
        variants = {
            "static token": STATIC,
            "ES256, every library": signer.token("bench-all", {"write": ["*"]}),
            "ES256, 100 libraries listed": signer.token("bench-listed", {"write": libraries}),
        }
        requests = {
            "GET": lambda client, token, n: client.call("GET", f"/books/{book}", token),
            "PATCH": lambda client, token, n: client.call("PATCH", f"/books/{book}", token, {"title": f"Dune {n}"}),
        }
        results = {}
        for method, send in requests.items():
            for name, token in variants.items():
                totals = []
                for count in (0, args.requests):
                    port = free_port()
                    out = os.path.join(work, "callgrind.out")
                    process = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                                *command(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    wait_ready(port, process)
                    client = Client(port)
                    for n in range(50 + count):
                        send(client, token, n)
                    process.terminate()
                    process.wait(120)
                    with open(out) as file:
                        totals.append(next(int(line.split()[1]) for line in file if line.startswith(("summary:", "totals:"))))
                per_request = (totals[1] - totals[0]) / args.requests
                results.setdefault(method, {})[name] = per_request
                print(f"{method:5} {name:28} {per_request:10.0f} instructions a request", flush=True)
        table = {}
        for method, rows in results.items():
            base = rows["static token"]
            table[method] = {name: {"instructions": round(value), "ratio": round(value / base, 3)}
                             for name, value in rows.items()}
            for name, row in table[method].items():
                print(f"{method:5} {name:28} {row['instructions']:10d}  {row['ratio']:.3f}x the static token")
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "token-instructions.json"), "w") as file:
            json.dump({"requests": args.requests, "server": args.server, "results": table}, file, indent=2)
            file.write("\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
