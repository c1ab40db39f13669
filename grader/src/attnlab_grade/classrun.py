"""A class graded in parallel: jobs in worker processes (each grading starts its own
sandboxed kernels), a progress line with the time left, each report written as its
notebook ends, and a run resumed where it stopped (a report of the same grading is
kept)."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from .report import Report


def write_report(report: Report, base: Path) -> None:
    base.parent.mkdir(parents=True, exist_ok=True)
    j, t = Path(f"{base}.grade.json"), Path(f"{base}.grade.txt")
    j.write_text(json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n")
    t.write_text(report.to_text())
    print(report.to_text(), end="")
    print(f"report: {j} and {t}\n", flush=True)


def fingerprint(sub: Path, digest: str, limits: dict) -> str:
    """What a report was made from: the submission's bytes, the grader's and the
    course package's digest and the limits (a report with the same is not redone)."""
    h = hashlib.sha256(Path(sub).read_bytes())
    h.update(json.dumps([digest, sorted(limits.items())]).encode())
    return h.hexdigest()


def graded_before(base: Path, stamp: str) -> Report | None:
    """The report of an earlier run that graded the same submission the same way."""
    try:
        d = json.loads(Path(f"{base}.grade.json").read_text())
        if d.get("fingerprint") == stamp and Path(f"{base}.grade.txt").is_file():
            return Report.from_dict(d)
    except (OSError, ValueError, TypeError):
        pass
    return None


class Progress:
    """One line on stderr per finished notebook: how many, the time, the time left."""

    def __init__(self, total: int, what: str, jobs: int):
        self.total, self.what, self.jobs = total, what, jobs
        self.done = 0
        self.start = time.monotonic()

    def step(self, name: str, outcome: str) -> None:
        self.done += 1
        took = time.monotonic() - self.start
        left = took / self.done * (self.total - self.done)
        eta = f"about {_clock(left)} left" if self.done < self.total else "done"
        print(
            f"[{self.done}/{self.total} {self.what}, {_clock(took)} elapsed, {eta}, "
            f"-j {self.jobs}] {name}: {outcome}",
            file=sys.stderr,
            flush=True,
        )


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def in_parallel(fn, jobs: list, n: int, done, stop=lambda: False) -> None:
    """``done(job, fn(job))`` for each job, ``n`` at a time (worker processes: each
    grading starts its own sandboxed kernels), in the order they finish; once
    ``stop()`` is true no new job starts."""
    if n <= 1 or len(jobs) <= 1:
        for job in jobs:
            if stop():
                return
            done(job, fn(job))
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=n) as pool:
        futures = {pool.submit(fn, job): job for job in jobs}
        try:
            for f in as_completed(futures):
                try:
                    got = f.result()
                except Exception as err:  # noqa: BLE001 (a worker died)
                    got = err
                done(futures[f], got)
                if stop():
                    for other in futures:
                        other.cancel()
        except KeyboardInterrupt:
            for other in futures:
                other.cancel()
            raise
