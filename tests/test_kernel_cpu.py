"""The notebook budget counts a finished child's CPU time, not the time it waited."""

import subprocess
import sys

from tools.kernel_cpu import budget, children_cpu


def _run(code: str) -> float:
    before = children_cpu()
    subprocess.run([sys.executable, "-c", code], check=True)  # waits: child reaped
    return children_cpu() - before


def test_busy_child_is_counted():
    spent = _run(
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    )
    assert spent >= 0.5


def test_sleeping_child_costs_almost_nothing():
    spent = _run("import time; time.sleep(0.8)")
    assert spent < 0.4


def test_budget_from_environment(monkeypatch):
    monkeypatch.setenv("ATTNLAB_NB_BUDGET", "12.5")
    assert budget() == 12.5
    monkeypatch.delenv("ATTNLAB_NB_BUDGET")
    assert budget() == 90.0
