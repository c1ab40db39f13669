"""pytest plugin: time every notebook run under nbval and enforce a CPU budget.

Loaded with ``-p tools.nbbudget``. Prints one line per notebook (its kernel's CPU time
and the wall time) and fails the session if any kernel used more than
``ATTNLAB_NB_BUDGET`` CPU seconds (default 90): a reader on a 2-core laptop or a free
Colab should never wait longer for one chapter. CPU time, not wall time, because
``make test`` runs two notebook passes side by side (see ``tools/kernel_cpu.py``).
"""

from __future__ import annotations

import time

from tools.kernel_cpu import budget, children_cpu

_start: dict[str, tuple[float, float]] = {}
_times: dict[str, tuple[float, float]] = {}  # file -> (cpu s, wall s)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_runtest_protocol(item, nextitem):
    _start.setdefault(_file(item.nodeid), (children_cpu(), time.perf_counter()))
    return None


def pytest_runtest_logreport(report):
    # The last item's teardown also tears down the notebook and reaps its kernel.
    if report.when == "teardown":
        key = _file(report.nodeid)
        if key in _start:
            cpu0, wall0 = _start[key]
            _times[key] = (children_cpu() - cpu0, time.perf_counter() - wall0)


def pytest_terminal_summary(terminalreporter):
    if not _times:
        return
    tr = terminalreporter
    tr.section(
        f"notebook kernel CPU time (budget {budget():.0f} CPU s each) and wall time"
    )
    for path, (cpu, wall) in sorted(_times.items()):
        flag = "OVER BUDGET" if cpu > budget() else "ok"
        tr.write_line(f"{cpu:7.1f} CPU s {wall:7.1f} s wall  {flag:11s} {path}")
    tr.write_line(f"{sum(c for c, _ in _times.values()):7.1f} CPU s total")


def pytest_sessionfinish(session, exitstatus):
    over = [p for p, (cpu, _) in _times.items() if cpu > budget()]
    if over and session.exitstatus == 0:
        session.exitstatus = 1
