"""CPU seconds used by finished child processes: how the notebook budget is measured.

Each notebook runs in its own kernel, a child process of the process that executes it
(pytest under nbval, Sphinx under jupyter-book), started for that notebook and shut
down and reaped after it. The difference of :func:`children_cpu` taken before and after
one notebook is therefore that kernel's CPU time, user plus system, over all its threads.

Why CPU time and not wall time: ``make test`` runs the site build and the student
edition side by side on two cores, so a notebook's wall time there depends on what else
runs. Its CPU time does not, and it bounds what a reader waits on an idle 2-core
machine (a CPU-bound kernel on two threads finishes in at most its CPU time).
"""

from __future__ import annotations

import os
import resource


def children_cpu() -> float:
    """User + system CPU seconds of every reaped child process so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def budget() -> float:
    """The per-notebook budget in CPU seconds: ``ATTNLAB_NB_BUDGET`` (default 90)."""
    return float(os.environ.get("ATTNLAB_NB_BUDGET", "90"))
