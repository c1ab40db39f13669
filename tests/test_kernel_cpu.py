"""The notebook budget counts a finished child's CPU time, divided by the load."""

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


def test_load_factor_is_the_yardsticks_median_over_its_quiet_time():
    from tools.kernel_cpu import REFERENCE_S, factor

    assert factor([]) == 1.0
    assert factor([REFERENCE_S * 2.0, REFERENCE_S * 3.0, REFERENCE_S * 2.5]) == 2.5
    # load and a slower machine only loosen the raw check, never tighten it
    assert factor([REFERENCE_S * 0.5]) == 1.0


def test_verdict_divides_by_the_load(monkeypatch):
    from tools.kernel_cpu import verdict

    monkeypatch.delenv("ATTNLAB_NB_BUDGET", raising=False)
    assert verdict(150.0, 2.0) == (75.0, True)  # a busy machine: 150 raw s are 75
    assert verdict(150.0, 1.0) == (150.0, False)  # a quiet one: over budget
    assert verdict(90.0, 1.0) == (90.0, True)


def test_meter_samples_the_yardstick_while_it_runs(monkeypatch):
    import tools.kernel_cpu as kc

    calls = iter([0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7])
    monkeypatch.setattr(kc, "calibrate", lambda: next(calls))
    meter = kc.LoadMeter(every=0.05).start()
    import time

    time.sleep(0.3)
    load = meter.stop()
    assert len(meter.samples) >= 3  # at the start, while running, at the end
    assert load == 0.7 / kc.REFERENCE_S


def test_raw_switch_turns_the_correction_off(monkeypatch):
    import tools.kernel_cpu as kc

    monkeypatch.setenv("ATTNLAB_NB_RAW", "1")
    monkeypatch.setattr(kc, "calibrate", lambda: 100.0)
    assert kc.LoadMeter().start().stop() == 1.0


def test_yardstick_measures_real_work():
    from tools.kernel_cpu import calibrate

    assert calibrate() > 0.01  # a real workload, measured in this thread's CPU time
