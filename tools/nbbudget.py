"""pytest plugin: time every notebook run under nbval and enforce a CPU budget.

Loaded with ``-p tools.nbbudget``. Prints one line per notebook (its kernel's CPU time,
the load factor measured beside it and the wall time) and fails the session if any
kernel used more than ``ATTNLAB_NB_BUDGET`` CPU seconds (default 90) in the reference
machine's seconds: a reader on a 2-core laptop or a free Colab should never wait longer
for one chapter. CPU time divided by a load factor, not wall time or raw CPU time, so
that neither a second notebook pass beside it nor a busy neighbour fails the run
(``tools/kernel_cpu.py``).
"""

from __future__ import annotations

import time

from tools.kernel_cpu import LoadMeter, budget, children_cpu, verdict

_start: dict[str, tuple[float, float, LoadMeter]] = {}
_last_item: set[str] = set()  # node ids of each notebook's last cell
_times: dict[str, tuple[float, float, float]] = {}  # file -> (cpu s, load, wall s)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_runtest_protocol(item, nextitem):
    key = _file(item.nodeid)
    if key.endswith(".ipynb"):
        if key not in _start:
            _start[key] = (children_cpu(), time.perf_counter(), LoadMeter().start())
        if nextitem is None or _file(nextitem.nodeid) != key:
            _last_item.add(item.nodeid)
    return None


def pytest_runtest_logreport(report):
    # The last item's teardown also tears down the notebook and reaps its kernel.
    if report.when == "teardown" and report.nodeid in _last_item:
        key = _file(report.nodeid)
        cpu0, wall0, meter = _start[key]
        cpu, wall = children_cpu() - cpu0, time.perf_counter() - wall0
        _times[key] = (cpu, meter.stop(), wall)


def pytest_terminal_summary(terminalreporter):
    if not _times:
        return
    tr = terminalreporter
    tr.section(
        f"notebook kernel CPU time (budget {budget():.0f} CPU s each, after dividing "
        "by the load factor) and wall time"
    )
    for path, (cpu, load, wall) in sorted(_times.items()):
        scaled, ok = verdict(cpu, load)
        flag = "ok" if ok else "OVER BUDGET"
        tr.write_line(
            f"{cpu:7.1f} CPU s {wall:7.1f} s wall  load x{load:4.2f} -> {scaled:5.1f} "
            f"{flag:11s} {path}"
        )
    tr.write_line(f"{sum(c for c, _, _ in _times.values()):7.1f} CPU s total")


def pytest_sessionfinish(session, exitstatus):
    over = [p for p, (cpu, load, _) in _times.items() if not verdict(cpu, load)[1]]
    if over and session.exitstatus == 0:
        session.exitstatus = 1
