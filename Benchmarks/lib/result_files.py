"""Benchmarks/results/: where the benchmarks write what they measured, with the commit and the
machine (Benchmarks/figures.py makes the README's tables of them). No import-time effects, so
scripts outside Benchmarks/ (scripts/replicas.py --results, replicas_fanout.sh) can write there
too. Standard library only.
"""

import datetime
import json
import os
import platform
import subprocess

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # Benchmarks/
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")


def commit():
    """The short hash of the checked-out commit, with `+` when what is measured differs from it:
    a tracked file changed other than Markdown and Benchmarks/results/ (which the runs themselves
    rewrite, the README's tables included)."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    status = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True)
    changed = [line[3:] for line in status.stdout.splitlines()]
    dirty = [path for path in changed if not path.endswith(".md") and not path.startswith("Benchmarks/results/")]
    return head.stdout.strip() + ("+" if dirty else "")


def machine():
    return "%s, %d cores" % (platform.machine(), os.cpu_count() or 0)


def write_result(name, data):
    """Writes Benchmarks/results/NAME.json: `data` with the date, the commit and the machine."""
    record = dict(data, date=datetime.date.today().isoformat(), commit=commit(), machine=machine())
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name + ".json")
    with open(path, "w") as out:
        json.dump(record, out, indent=1, sort_keys=True)
        out.write("\n")
    return path
