"""The kernel's autogroup scheduling, turned off for a benchmark run with PostgreSQL and put back
after: the one place that decides it, for `benchlib.one_scheduling_group` (Python benchmarks) and,
as a command, for shell ones (`Benchmarks/replicas_fanout.sh`). No import-time effects.

    python3 Benchmarks/lib/autogroup.py off             # prints the run's state, then the value to put back ("" if none)
    python3 Benchmarks/lib/autogroup.py restore VALUE

With autogroup (Debian's default), each session is a scheduling group that shares the cores as a
whole with the others, and PostgreSQL puts every backend in a session of its own (setsid): on two
busy cores a backend woken with a client's query then waited for a core for up to 1.3 s (`perf
sched timehist`: runnable, not run), and the replica's request with it, though PostgreSQL logged no
statement over 0.1 s. Through three replicas, GETs of 1 to 6 s for either server (our p99 0.1 to
2.4 s, the comparator's 6 ms to 1 s, from run to run); with autogroup off, none over 0.3 s in four
runs (p99 1.5 to 5 ms). Where PostgreSQL runs in a cgroup of its own, as a container or a systemd
service with the cpu controller does, autogroup does not apply.
"""

import sys

FLAG = "/proc/sys/kernel/sched_autogroup_enabled"
WARNING = ("warning: autogroup scheduling is on and cannot be turned off here (not root?): PostgreSQL's backends "
           "may wait seconds for a core when the machine is busy; see " + FLAG)


def turn_off():
    """Turns autogroup off if it is on and this process may; returns (what the run has: "off" as it
    was, "turned off", or "on" when it could not be; the value to put back after, or None)."""
    try:
        with open(FLAG) as flag:
            before = flag.read().strip()
    except OSError:
        return "off", None  # a kernel without autogroup
    if before == "0":
        return "off", None
    try:
        with open(FLAG, "w") as flag:
            flag.write("0")
    except OSError:
        return "on", None
    return "turned off", before


def restore(previous):
    """Puts back what `turn_off` changed (nothing when `previous` is None or empty)."""
    if previous:
        with open(FLAG, "w") as flag:
            flag.write(previous)


if __name__ == "__main__":
    if sys.argv[1:2] == ["off"]:
        state, previous = turn_off()
        if state == "on":
            print(WARNING, file=sys.stderr)
        print(state)
        print(previous or "")
    elif len(sys.argv) == 3 and sys.argv[1] == "restore":
        restore(sys.argv[2])
    else:
        sys.exit("usage: autogroup.py off | restore VALUE")
