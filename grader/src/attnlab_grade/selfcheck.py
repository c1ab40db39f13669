"""The masters checked on the grading machine, before any student is graded.

A master that fails where the grader runs fails every student: a chapter whose own
code raises on this CPU (a live-run assert with too thin a margin, a library missing)
makes every clean run of its exercises "errored". So before a class is graded, the
master of each chapter in it is graded like a submission, with the same limits, and
must get full marks on its auto-checked exercises; otherwise the run stops before
any student's notebook is run, with one line per exercise that says why (``the
master's cell 21 raised AssertionError: ... on this machine``).

A success is remembered per machine and per commit (:func:`cache_key`: the grader's
and the course package's digest, the master's own text, the limits, the CPU, Python
and torch), in ``$ATTNLAB_GRADE_CACHE`` or ``~/.cache/attnlab-grade``, so a class run
checks each chapter once and the next run on the same machine not at all. A failure
is never remembered.

A master needs its solutions to be checked: the packaged answer key has none (it is
a skeleton), so with no chapters at hand (``--master`` or a clone's ``chapters/``)
the masters cannot be checked and the run says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .classrun import Progress, in_parallel
from .integrity import (
    GradeError,
    default_masters,
    find_master,
    package_digest,
    read_notebook,
)
from .verdicts import grade

CACHE_ENV = "ATTNLAB_GRADE_CACHE"


@dataclass
class MasterCheck:
    master: str  # the notebook's path
    chapter: str  # its title's id ("2", "7a") or its file name
    ok: bool
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False

    def line(self) -> str:
        if self.ok:
            how = "remembered from an earlier check" if self.cached else "checked"
            return (
                f"master of chapter {self.chapter} ({Path(self.master).name}): full "
                f"marks on this machine ({how}, {self.seconds:.0f} s)"
            )
        head = (
            f"master of chapter {self.chapter} ({Path(self.master).name}) does not "
            "get full marks on this machine:"
        )
        return "\n".join([head, *[f"  {p}" for p in self.problems]])


def machine() -> dict:
    """What makes this machine's run of a chapter differ from another's."""
    cpu = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        keep = [
            ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))
        ]
        cpu = "\n".join(dict.fromkeys(keep))
    except OSError:
        pass
    import torch

    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")()
    return {
        "node": platform.node(),
        "arch": platform.machine(),
        "cpu": hashlib.sha256(cpu.encode()).hexdigest()[:16],
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "capability": capability,
        "threads": os.environ.get("OMP_NUM_THREADS", ""),
    }


def cache_key(master: Path, limits: dict, digest: str | None = None) -> str:
    parts = {
        "package": digest or package_digest(),
        "master": hashlib.sha256(Path(master).read_bytes()).hexdigest(),
        "limits": sorted(limits.items()),
        "machine": machine(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "attnlab-grade"


def _remembered(key: str) -> dict | None:
    try:
        return json.loads((cache_dir() / f"master-{key}.json").read_text())
    except (OSError, ValueError):
        return None


def _remember(key: str, check: MasterCheck) -> None:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".master-{key}.{os.getpid()}.json"
        tmp.write_text(
            json.dumps({"master": check.master, "seconds": check.seconds}) + "\n"
        )
        tmp.replace(folder / f"master-{key}.json")
    except OSError:
        pass  # an unwritable cache costs a re-check next time, nothing else


def problems_of(report) -> list[str]:
    """One line per auto-checked exercise the master did not pass."""
    out = []
    for e in report.exercises:
        if e.status in ("passed", "written"):
            continue
        message = e.message or "no message"
        out.append(f"exercise {e.number} ({e.label}) {e.status}: {message}")
    if not report.exercises:
        out.append("no exercise found in the master")
    return out


def check_master(
    master: Path, limits: dict, digest: str | None = None, use_cache: bool = True
) -> MasterCheck:
    """Grade ``master`` (a notebook with its solutions) against itself."""
    from .integrity import chapter_id, read_notebook

    master = Path(master)
    try:
        chapter = chapter_id(read_notebook(master)) or master.stem
    except Exception:  # noqa: BLE001 (reported below, by grade)
        chapter = master.stem
    key = cache_key(master, limits, digest) if use_cache else ""
    seen = _remembered(key) if use_cache else None
    if seen is not None:
        return MasterCheck(str(master), chapter, True, [], seen["seconds"], True)
    start = time.monotonic()
    try:
        report = grade(master, master=master, digest=digest, **limits)
    except Exception as err:  # noqa: BLE001 (a master that cannot be graded at all)
        problems = [f"the grader could not grade it ({type(err).__name__}: {err})"]
    else:
        problems = problems_of(report)
    check = MasterCheck(
        str(master), chapter, not problems, problems, time.monotonic() - start
    )
    if check.ok and use_cache:
        _remember(key, check)
    return check


def check_one(job: dict) -> MasterCheck:
    """Check one master (in a worker process); never raises."""
    try:
        return check_master(Path(job["master"]), job["limits"], job["digest"])
    except BaseException as err:  # noqa: BLE001 (a worker must answer)
        if isinstance(err, KeyboardInterrupt):
            raise
        name = Path(job["master"]).stem
        why = f"the check itself failed ({type(err).__name__}: {err})"
        return MasterCheck(job["master"], name, False, [why])


def masters_of(subs: list[Path], master: Path | None) -> tuple[list[Path], list[str]]:
    """The master notebooks (with solutions) of the submissions, and the chapters whose
    master is only the packaged skeleton (no solutions: cannot be checked)."""
    folder = master if master is not None else default_masters()
    found: dict[Path, None] = {}
    skeletons: dict[str, None] = {}
    for sub in subs:
        try:
            m = find_master(read_notebook(sub), sub, folder)
        except GradeError:
            continue  # that submission is refused when it is graded
        if isinstance(m, Path):
            found[m.resolve()] = None
        else:
            skeletons[str(m)] = None
    return list(found), list(skeletons)


def check_masters(masters: list[Path], limits: dict, n: int, digest: str) -> bool:
    """Check each master on this machine (:mod:`attnlab_grade.selfcheck`); print one
    line per master; True when every one gets full marks."""
    if not masters:
        return True
    jobs = [{"master": str(m), "limits": limits, "digest": digest} for m in masters]
    progress = Progress(len(jobs), "masters checked", n)
    bad: list[MasterCheck] = []

    def done(job, got):
        if not isinstance(got, MasterCheck):
            got = MasterCheck(
                job["master"], Path(job["master"]).stem, False, [repr(got)]
            )
        print(got.line(), flush=True)
        progress.step(Path(job["master"]).name, "ok" if got.ok else "FAILS")
        if not got.ok:
            bad.append(got)

    in_parallel(check_one, jobs, n, done)
    if bad:
        print(
            f"\nSTOPPED before grading any student: {len(bad)} master(s) do not get "
            "full marks on this machine, so every student would lose those exercises. "
            "Fix the chapter (or the machine) first; --no-check-masters grades anyway.",
            file=sys.stderr,
        )
        for b in bad:
            print(b.line(), file=sys.stderr)
    return not bad
