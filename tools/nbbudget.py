"""pytest plugin: time every notebook run under nbval and enforce a CPU budget.

Loaded with ``-p tools.nbbudget``. Prints one line per notebook and fails the session
if any notebook took longer than ``ATTNLAB_NB_BUDGET`` seconds (default 90): a reader on
a 2-core laptop or a free Colab should never wait longer for one chapter.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

_times: dict[str, float] = defaultdict(float)
_start: dict[str, float] = {}


def _budget() -> float:
    return float(os.environ.get("ATTNLAB_NB_BUDGET", "90"))


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_runtest_protocol(item, nextitem):
    _start.setdefault(_file(item.nodeid), time.perf_counter())
    return None


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        key = _file(report.nodeid)
        if key in _start:
            _times[key] = time.perf_counter() - _start[key]


def pytest_terminal_summary(terminalreporter):
    if not _times:
        return
    tr = terminalreporter
    tr.section(f"notebook execution times (budget {_budget():.0f} s each)")
    for path, secs in sorted(_times.items()):
        flag = "OVER BUDGET" if secs > _budget() else "ok"
        tr.write_line(f"{secs:7.1f} s  {flag:11s} {path}")
    tr.write_line(f"{sum(_times.values()):7.1f} s  total")


def pytest_sessionfinish(session, exitstatus):
    over = [p for p, s in _times.items() if s > _budget()]
    if over and session.exitstatus == 0:
        session.exitstatus = 1
