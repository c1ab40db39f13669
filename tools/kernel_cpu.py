"""A notebook's CPU budget that load cannot break: kernel CPU seconds against a yardstick.

Each notebook runs in its own kernel, a child process of the process that executes it
(pytest under nbval, Sphinx under jupyter-book), started for that notebook and shut
down and reaped after it. The difference of :func:`children_cpu` taken before and after
one notebook is therefore that kernel's CPU time, user plus system, over all its threads.

Why CPU time and not wall time: ``make test`` runs two stages side by side on two cores,
so a notebook's wall time there depends on what else runs. CPU time depends on it less,
but not nothing: beside other CPU-bound jobs (a CI runner's neighbours, a laptop
compiling something) the same chapter was measured at 2-3x its quiet CPU seconds
(caches and the core's other hardware thread are shared; torch's small operations
suffer most). A budget enforced on raw CPU seconds then fails on a busy machine.

So the budget is checked against a yardstick measured at the same time, on the same
machine: :class:`LoadMeter` runs a fixed small torch training loop (:func:`calibrate`,
the kind of work the chapters do) in a thread of the executing process at the
notebook's start, every ``every`` seconds while it runs, and at its end. The *load
factor* is the median of those samples over the yardstick's CPU seconds on the quiet
reference machine (:data:`REFERENCE_S`), floored at 1: load and a slower machine can
only loosen the raw check, never tighten it. A notebook passes when

    kernel CPU seconds / load factor <= ATTNLAB_NB_BUDGET (default 90)

which on the quiet reference machine (factor 1) is the plain 90-CPU-second budget a
reader on a 2-core laptop or a free Colab should never exceed, and on a busy machine
the same budget in the reference machine's seconds. The yardstick costs about 2 % of
one core while a notebook runs. ``ATTNLAB_NB_RAW=1`` switches the correction off (the
quiet-machine check, for a job that has the machine to itself).
"""

from __future__ import annotations

import os
import resource
import statistics
import threading
import time

# calibrate()'s CPU seconds on the reference machine, quiet (every other process
# stopped): the project's 2-core AMD EPYC (AVX2), torch 2.13.0, one thread; median of
# 21 samples in three runs, 2026-12-07 (0.25-0.39 s; the same machine beside a load
# of ~12 runnable processes: 0.53-0.69 s, while chapter 6 went from 6-7 to 16.2 CPU s).
REFERENCE_S = 0.35


def children_cpu() -> float:
    """User + system CPU seconds of every reaped child process so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def budget() -> float:
    """The per-notebook budget in CPU seconds: ``ATTNLAB_NB_BUDGET`` (default 90)."""
    return float(os.environ.get("ATTNLAB_NB_BUDGET", "90"))


_model = None


def calibrate() -> float:
    """CPU seconds of this thread for one fixed workload: 300 Adam steps of a tiny MLP
    (64 -> 128 -> 64, batch 64) on one torch thread, the chapters' kind of work."""
    global _model
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(0)
        if _model is None:  # first use: lazy initialisation, not timed
            _model = _workload(torch, g)
        t0 = time.thread_time()
        _workload(torch, g)
        return time.thread_time() - t0
    finally:
        torch.set_num_threads(old)


def _workload(torch, g):
    lin1 = torch.nn.Linear(64, 128)
    lin2 = torch.nn.Linear(128, 64)
    params = [*lin1.parameters(), *lin2.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    x = torch.randn(64, 64, generator=g)  # (B, D)
    for _ in range(300):
        loss = (lin2(torch.tanh(lin1(x))) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return lin1


class LoadMeter:
    """Samples :func:`calibrate` in a background thread between :meth:`start` and
    :meth:`stop`; :meth:`stop` returns the load factor (>= 1)."""

    def __init__(self, every: float = 10.0):
        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LoadMeter:
        self.samples = []
        self._stop.clear()
        if os.environ.get("ATTNLAB_NB_RAW") == "1":
            return self
        self.samples.append(calibrate())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(calibrate())

    def stop(self) -> float:
        if self._thread is None:
            return 1.0
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.samples.append(calibrate())
        return factor(self.samples)


def factor(samples: list[float]) -> float:
    """The load factor of yardstick samples: median / :data:`REFERENCE_S`, at least 1."""
    if not samples:
        return 1.0
    return max(1.0, statistics.median(samples) / REFERENCE_S)


def verdict(cpu: float, load: float) -> tuple[float, bool]:
    """``(cpu / load, within budget)``: the kernel's CPU seconds in the reference
    machine's seconds, and whether they fit :func:`budget`."""
    scaled = cpu / load
    return scaled, scaled <= budget()
