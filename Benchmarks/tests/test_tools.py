"""Tests of the benchmarks' own tools that need no server: figures.py's blocks, profile_join.py's
attribution of samples, benchlib's reading of `/metrics` text, and autogroup.py's turning off and
putting back (on a file standing in for the kernel's flag). Run by Benchmarks/smoke.sh
(`python3 -m unittest discover -s Benchmarks/tests`)."""

import json
import os
import socket
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # Benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))
import autogroup  # noqa: E402
import bench  # noqa: E402
import benchlib  # noqa: E402
import figures  # noqa: E402
import profile_join  # noqa: E402

PROFILE_JOIN = {
    "books": 1000, "rounds": 3, "cores": 2, "frequency": 999, "joins_s": [1.2, 1.3, 2.5], "cpus_s": [2.0, 2.1, 3.6],
    "commit": "abc1234", "date": "2026-11-28", "machine": "x86_64, 2 cores",
    "median": {"join_s": 1.3, "cpu_s": 2.1, "parts": [
        {"part": "read", "cpu_s": 0.97, "first_s": 0.0, "last_s": 0.98, "busy": 0.99,
         "top": [[6.1, "sqlite3VdbeExec"], [5.0, "a|b"]]},
        {"part": "rest", "cpu_s": 0.07, "first_s": 1.1, "last_s": 1.3, "busy": 0.35, "top": []},
    ]},
}


class Blocks(unittest.TestCase):
    def setUp(self):
        self.results = tempfile.TemporaryDirectory()
        self.saved = figures.RESULTS
        figures.RESULTS = self.results.name

    def tearDown(self):
        figures.RESULTS = self.saved
        self.results.cleanup()

    def write(self, name, data):
        with open(os.path.join(self.results.name, name), "w") as file:
            json.dump(data, file)

    def test_a_block_is_made_from_its_result_file(self):
        self.write("profile-join.json", PROFILE_JOIN)
        content = "before\n<!-- profile-join:begin -->\nold text\n<!-- profile-join:end -->\nafter\n"
        rendered, _ = figures.render(content)
        self.assertNotIn("old text", rendered)
        self.assertTrue(rendered.startswith("before\n<!-- profile-join:begin -->\n| part of the first join |"))
        self.assertTrue(rendered.endswith("<!-- profile-join:end -->\nafter\n"))
        self.assertIn("| read | 0.97 s | 0.00 → 0.98 s | 99 % | `sqlite3VdbeExec` 6.1 %, `a/b` 5.0 % |", rendered)
        self.assertIn("(rounds: 1.20, 1.30, 2.50 s)", rendered)
        self.assertIn("at least 1.05 s on 2 cores", rendered)
        self.assertIn("Commit abc1234, 2026-11-28", rendered)
        # Made again, the text is the same: what --check compares.
        self.assertEqual(figures.render(rendered)[0], rendered)

    def test_a_block_without_its_result_file_is_left_as_it_is(self):
        content = "<!-- profile-join:begin -->\nkept\n<!-- profile-join:end -->\n"
        rendered, missing = figures.render(content)
        self.assertEqual(rendered, content)
        self.assertIn("memory", missing)
        self.assertNotIn("profile-join", missing)

    def test_every_block_is_named_in_the_readme(self):
        with open(figures.README) as file:
            _, missing = figures.render(file.read())
        self.assertEqual(missing, [])

    def test_scheduling_captions(self):
        self.assertEqual(figures.scheduling(None), "")
        self.assertEqual(figures.scheduling("off"), "autogroup scheduling off")
        self.assertIn("**on**", figures.scheduling("on"))
        self.assertEqual(figures.clause(figures.scheduling("off")), "autogroup scheduling off, ")
        self.assertEqual(figures.clause(figures.scheduling(None)), "")


SCRIPT = """\
  101 100.010000:
\t    1111 sqlite3VdbeExec (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)

  102 100.020000:
\t    2222 $s10LiveEngine13LoadedMembersC3addyyF (/app/library-server)
\t    3333 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)

  102 100.030000:
\t    4444 exc_page_fault ([kernel.kallsyms])

  102 100.060000:
\t    4545 $s4JSON10JSONWriterV10LibraryAPIE10appendRowsyyF (/app/library-server)
\t    2222 $s10LiveEngine13LoadedMembersC3addyyF (/app/library-server)

  103 100.040000:
\t    5555 tcp_sendmsg ([kernel.kallsyms])

  101 100.500000:
\t    6666 malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)

  104 99.000000:
\t    7777 sqlite3VdbeExec (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)
"""


class Attribution(unittest.TestCase):
    def test_samples_go_to_the_part_their_call_chain_or_their_thread_is_in(self):
        found = profile_join.parse(SCRIPT, 100.0, 101.0)
        self.assertEqual([(tid, part) for tid, _, part, _ in found],
                         [(101, "read"), (102, "models"), (102, None), (102, "encoding"), (103, None),
                          (101, None)])
        self.assertAlmostEqual(found[0][1], 0.01)
        self.assertEqual(found[1][3], "library-server $s10LiveEngine13LoadedMembersC3addyyF")
        grouped = profile_join.parts(found)
        # The page fault is its thread's in the same 50 ms (the models'); the send and the malloc
        # 0.5 s after its thread's last telling sample tell nothing: the rest.
        self.assertEqual(len(grouped["read"]), 1)
        self.assertEqual(len(grouped["models"]), 2)
        # Rows encoded on the models' thread, as the load reads them, are the encoding's.
        self.assertEqual(len(grouped["encoding"]), 1)
        self.assertEqual(len(grouped["rest"]), 2)


# As library-server's /metrics writes a histogram (Sources/LibraryAPI/Observability/Metrics.swift).
METRICS = """\
# TYPE library_http_request_duration_seconds histogram
library_http_request_duration_seconds_bucket{route="/books/{id}",le="0.00025"} 7
library_http_request_duration_seconds_bucket{route="/books/{id}",le="1.0"} 9
library_http_request_duration_seconds_bucket{route="/books/{id}",le="+Inf"} 12
library_http_request_duration_seconds_sum{route="/books/{id}"} 9.5
library_http_request_duration_seconds_count{route="/books/{id}"} 12
library_http_request_duration_seconds_bucket{route="/libraries",le="0.00025"} 3
library_http_request_duration_seconds_bucket{route="/libraries",le="1.0"} 4
library_http_request_duration_seconds_bucket{route="/libraries",le="+Inf"} 5
library_heap_in_use_bytes 1714064
"""


class Metrics(unittest.TestCase):
    def test_series_are_read_with_their_labels(self):
        found = benchlib.series(METRICS, "library_http_request_duration_seconds_bucket")
        self.assertEqual(len(found), 6)
        self.assertEqual(found[(("route", "/libraries"), ("le", "+Inf"))], 5)
        self.assertEqual(benchlib.series(METRICS, "library_heap_in_use_bytes"), {(): 1714064})
        self.assertEqual(benchlib.values(METRICS, "library_heap_in_use_bytes", "library_http_request_duration_seconds_count",
                                         "library_none"), [1714064, 12, 0])

    def test_observations_past_a_bound_are_summed_over_every_series(self):
        histogram = "library_http_request_duration_seconds"
        self.assertEqual(benchlib.slower_than(METRICS, histogram, 1.0), 3 + 1)
        self.assertEqual(benchlib.slower_than(METRICS, histogram, 0.00025), 5 + 2)
        self.assertEqual(benchlib.slower_than(METRICS, histogram, 2.0), 0)  # no such bound: none counted
        self.assertEqual(benchlib.slower_than(METRICS, "library_none", 1.0), 0)


class Snapshot(unittest.TestCase):
    def read(self, pieces):
        """What `read_snapshot` does with a stream sent in `pieces`: None when it returned, else
        its error."""
        ours, theirs = socket.socketpair()
        def send():
            for piece in pieces:
                theirs.sendall(piece)
            theirs.shutdown(socket.SHUT_WR)
        sender = threading.Thread(target=send)
        sender.start()
        try:
            benchlib.read_snapshot(ours)
            outcome = None
        except RuntimeError as error:
            outcome = str(error)
        sender.join()
        ours.close()
        theirs.close()
        return outcome

    def test_reads_to_the_snapshots_end_across_reads(self):
        head = b"HTTP/1.1 200 OK\r\n\r\nretry: 2000\n\n: ok\n\n"
        # The event's name and its blank line each split between two sends.
        outcome = self.read([head + b"id: 1\nevent: snap", b"shot\ndata: {\"books\":[]}\n", b"\n"])
        self.assertIsNone(outcome)

    def test_a_blank_line_before_the_snapshot_does_not_end_it(self):
        outcome = self.read([b"retry: 2000\n\n", b": keep-alive\n\n"])
        self.assertEqual(outcome, "the stream closed before its snapshot ended")


class Autogroup(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.saved = autogroup.FLAG
        autogroup.FLAG = os.path.join(self.directory.name, "sched_autogroup_enabled")

    def tearDown(self):
        autogroup.FLAG = self.saved
        self.directory.cleanup()

    def flag(self, value=None):
        if value is not None:
            with open(autogroup.FLAG, "w") as file:
                file.write(value + "\n")
        with open(autogroup.FLAG) as file:
            return file.read().strip()

    def test_on_is_turned_off_and_put_back(self):
        self.flag("1")
        state, previous = autogroup.turn_off()
        self.assertEqual((state, previous, self.flag()), ("turned off", "1", "0"))
        autogroup.restore(previous)
        self.assertEqual(self.flag(), "1")

    def test_off_or_absent_is_left_alone(self):
        self.assertEqual(autogroup.turn_off(), ("off", None))  # no flag: a kernel without autogroup
        self.flag("0")
        self.assertEqual(autogroup.turn_off(), ("off", None))
        autogroup.restore(None)
        self.assertEqual(self.flag(), "0")


class TargetNote(unittest.TestCase):
    """bench.py's target column says which part of a target (the ratio, the p99) was missed."""

    def test_each_outcome(self):
        row = {"target": 1.5, "ratio": 1.81, "met": True}
        self.assertEqual(bench.target_note(row), " (≥ 1.5× met)")
        self.assertEqual(bench.target_note(dict(row, met=False)), " (≥ 1.5× met; p99 no worse: MISSED)")
        self.assertEqual(bench.target_note(dict(row, ratio=1.2, met=False)), " (≥ 1.5× MISSED)")
        self.assertEqual(bench.target_note({"target": None, "ratio": 3.0, "met": None}), "")


if __name__ == "__main__":
    unittest.main()
