"""The command line (``attnlab-grade``, ``python -m attnlab.grade``): the masters checked
on this machine, submissions graded in parallel (one sandbox and kernel each), a
progress line, reports written as each notebook ends, a run resumed where it stopped,
and the CSV gradebook."""

from __future__ import annotations

import argparse
import csv
import glob
import os
import sys
from pathlib import Path

from .classrun import Progress, fingerprint, graded_before, in_parallel, write_report
from .integrity import (
    OWN_OUTPUTS,
    GradeError,
    PackageChanged,
    default_masters,
    package_digest,
)
from .report import Report
from .selfcheck import check_masters, masters_of
from .verdicts import grade

MASTERS_FAILED = 3  # the exit status when a master does not pass on this machine

# ------------------------------------------------------------------ command line


def submissions(args: list[str | Path], out: Path | None = None) -> list[Path]:
    """The notebooks named by files, folders (searched recursively) and globs, in a
    stable order, without the grader's own outputs and Jupyter's checkpoints."""
    found: list[Path] = []
    for arg in map(str, args):
        p = Path(arg)
        if p.is_dir():
            found += sorted(p.rglob("*.ipynb"))
        elif not p.exists() and glob.has_magic(arg):
            found += sorted(Path(x) for x in glob.glob(arg, recursive=True))
        else:
            found.append(p)
    keep, seen = [], set()
    out_dir = out.resolve() if out else None
    for p in found:
        r = p.resolve()
        if r in seen or p.name.endswith(OWN_OUTPUTS) or ".ipynb_checkpoints" in p.parts:
            continue
        if out_dir is not None and p.is_file() and out_dir in r.parents:
            continue
        seen.add(r)
        keep.append(p)
    return keep


def report_path(sub: Path, out: Path | None, names: dict[Path, str]) -> Path:
    return (out or sub.parent) / names[sub]


def grade_one(job: dict) -> tuple[str, Report | None, str]:
    """Grade one submission; whatever goes wrong stays with it."""
    try:
        report = grade(**job["kwargs"])
        report.fingerprint = job.get("fingerprint", "")
        return job["sub"], report, ""
    except PackageChanged as err:
        return job["sub"], None, f"PACKAGE {err}"
    except GradeError as err:
        return job["sub"], None, str(err)
    except BaseException as err:  # noqa: BLE001 (anything: one notebook, one error)
        if isinstance(err, KeyboardInterrupt):
            raise
        return (
            job["sub"],
            None,
            f"{job['sub']}: the grader failed on this notebook "
            f"({type(err).__name__}: {str(err)[:300]})",
        )


FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")


def csv_safe(value):
    """A CSV cell no spreadsheet runs as a formula (a leading quote when needed)."""
    if isinstance(value, str) and value.startswith(FORMULA):
        return "'" + value
    return value


def report_names(subs: list[Path]) -> dict[Path, str]:
    """A report name per submission, unique even when files share a name."""
    count: dict[str, int] = {}
    for s in subs:
        count[s.stem] = count.get(s.stem, 0) + 1
    names = {}
    for s in subs:
        stem = s.stem
        if count[stem] > 1:
            stem = "_".join([*s.parent.parts[-2:], s.stem]).replace(os.sep, "_")
        names[s] = stem
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="attnlab-grade",
        description="Execute students' notebooks and grade their exercises. Grading "
        "RUNS THE STUDENTS' CODE with your permissions: do it in a container or a "
        "throwaway account without network. Before any student is graded, the master "
        "of each chapter is graded on this machine and must get full marks.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "submissions",
        nargs="*",
        help="notebooks: files, folders (searched recursively) or globs; the grader's "
        "own outputs (*.graded.ipynb) are skipped",
    )
    p.add_argument(
        "--master",
        type=Path,
        help="the master notebook, or a folder of them (default: a clone's chapters/, "
        "else the answer key packaged with the grader)",
    )
    p.add_argument(
        "--check-masters",
        action="store_true",
        help="only check that the masters (those of the submissions given, else every "
        "notebook in --master or chapters/) get full marks on this machine",
    )
    p.add_argument(
        "--no-check-masters",
        action="store_true",
        help="grade without checking the masters first (a success is remembered per "
        "machine and commit, so the check costs one grading per chapter, once)",
    )
    p.add_argument("-j", "--jobs", type=int, default=1, help="notebooks graded at once")
    p.add_argument(
        "--regrade",
        action="store_true",
        help="grade again the submissions whose report from an earlier run is there "
        "(same notebook, same grader, same limits); by default they are skipped",
    )
    p.add_argument(
        "--exercise-timeout",
        type=float,
        default=60.0,
        help="seconds per cell of an exercise (the student's cells and its check)",
    )
    p.add_argument(
        "--cell-timeout",
        type=float,
        default=300.0,
        help="seconds per other cell (the chapter's own code)",
    )
    p.add_argument(
        "--time-limit", type=float, default=900.0, help="seconds per notebook"
    )
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    p.add_argument(
        "--out", type=Path, help="folder for the reports (default: beside each file)"
    )
    p.add_argument(
        "--csv",
        type=Path,
        help="gradebook: one row per notebook, one column per exercise",
    )
    p.add_argument(
        "--save-executed",
        action="store_true",
        help="also write the executed notebook, NAME.graded.ipynb (never graded)",
    )
    p.add_argument(
        "--forbid",
        action="append",
        default=[],
        metavar="CHECK=MODULE.NAME",
        help="also fail answers to CHECK that call MODULE.NAME (repeatable), on top of "
        "the lists the check modules publish (FORBIDDEN)",
    )
    return p


def one_thread_per_kernel(jobs: int) -> None:
    """Each kernel's torch (and BLAS) gets cores / jobs threads (one on a 2-core
    machine at -j 2), unless OMP_NUM_THREADS is set: N kernels never fight over cores.
    Kernels inherit the variable; the masters' check is keyed on it."""
    if "OMP_NUM_THREADS" not in os.environ:
        n = max(1, (os.cpu_count() or 1) // max(1, jobs))
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(n)
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def main(argv: list[str] | None = None) -> int:  # noqa: C901
    p = parser()
    args = p.parse_args(argv)
    forbid: dict[str, list[str]] = {}
    for item in args.forbid:
        check, _, dotted = item.partition("=")
        if not check or "." not in dotted:
            p.error(f"--forbid {item}: expected CHECK=module.name")
        forbid.setdefault(check, []).append(dotted)
    if args.master is not None and not args.master.exists():
        p.error(f"--master {args.master} does not exist")
    if args.jobs < 1:
        p.error("-j must be at least 1")
    one_thread_per_kernel(args.jobs)
    limits = {
        "cell_timeout": args.cell_timeout,
        "exercise_timeout": args.exercise_timeout,
        "time_limit": args.time_limit,
    }
    digest = package_digest()
    if args.check_masters and not args.submissions:
        folder = args.master or default_masters()
        if folder is None:
            p.error(
                "--check-masters needs the masters with their solutions: --master "
                "FOLDER (a clone's chapters/ or the complete edition full/)"
            )
        masters = [folder] if folder.is_file() else sorted(folder.glob("*.ipynb"))
        ok = check_masters(masters, limits, args.jobs, digest)
        return 0 if ok else MASTERS_FAILED
    if not args.submissions:
        p.error("no submissions given (or --check-masters)")
    subs = submissions(args.submissions, args.out)
    if not subs:
        p.error("no notebooks found in " + " ".join(args.submissions))
    if not args.no_check_masters:
        masters, skeletons = masters_of(subs, args.master)
        for s in skeletons:
            print(
                f"note: {s} is the packaged answer key (no solutions): its master "
                "cannot be checked on this machine; pass --master with the chapters",
                file=sys.stderr,
            )
        if not check_masters(masters, limits, args.jobs, digest):
            return MASTERS_FAILED
        if args.check_masters:
            return 0
    return grade_class(args, subs, forbid, limits, digest)


def grade_class(args, subs, forbid, limits, digest) -> int:  # noqa: C901
    names = report_names(subs)
    protected = [str(x.resolve().parent) for x in subs]
    if args.out:
        protected.append(str(args.out.resolve()))
    if args.csv:
        protected.append(str(args.csv.resolve().parent))
    results: dict[str, tuple[Report | None, str]] = {}
    jobs = []
    for sub in subs:
        out = report_path(sub, args.out, names)
        stamp = fingerprint(sub, digest, limits)
        before = None if args.regrade else graded_before(out, stamp)
        if before is not None:
            results[str(sub)] = (before, "")
            continue
        kwargs = dict(
            path=str(sub),
            master=str(args.master) if args.master else None,
            kernel=args.kernel,
            executed=str(out) + ".graded.ipynb" if args.save_executed else None,
            protected=protected,
            digest=digest,
            forbid=forbid,
            **limits,
        )
        jobs.append({"sub": str(sub), "kwargs": kwargs, "fingerprint": stamp})
    if results:
        print(
            f"{len(results)} submission(s) already graded by an earlier run (same "
            "notebook, grader and limits): their reports are kept (--regrade redoes "
            "them)",
            file=sys.stderr,
        )
    stop = [""]
    progress = Progress(len(jobs), "notebooks graded", args.jobs)

    def done(job, got) -> None:
        # Each report is written as soon as its notebook's kernels have stopped:
        # no later notebook can reach it (they run under other user ids).
        if isinstance(got, BaseException):
            sub, report = job["sub"], None
            err = f"{sub}: the grader failed on this notebook ({got!r})"
        else:
            sub, report, err = got
        results[sub] = (report, err)
        if report is not None:
            try:
                write_report(report, report_path(Path(sub), args.out, names))
            except OSError as e:
                results[sub] = (None, f"{sub}: the report could not be written ({e})")
        if err.startswith("PACKAGE") and not stop[0]:
            stop[0] = err
        outcome = f"{report.passed}/{report.total} passed" if report else "not graded"
        progress.step(Path(sub).name, outcome)

    in_parallel(grade_one, jobs, args.jobs, done, stop=lambda: bool(stop[0]))
    return gradebook(args, subs, names, results, stop[0])


def gradebook(args, subs, names, results, stop: str) -> int:
    rows, failed = [], 0
    for sub in subs:
        report, err = results.get(str(sub), (None, stop or "not graded"))
        if report is None:
            failed += 1
            print(f"error: {err}", file=sys.stderr)
            rows.append({"student": names[sub], "submission": str(sub), "status": err})
            continue
        total = report.total
        row = {
            "student": names[sub],
            "submission": str(sub),
            "status": report.status,
            "passed": report.passed,
            "total": total,
            "percent": round(100 * report.passed / total, 1) if total else "",
        }
        row.update({e.number: e.status for e in report.exercises})
        row["written"] = report.written
        row["integrity"] = " | ".join(report.integrity) or "ok"
        rows.append(row)
    if args.csv:
        tail = ["written", "integrity"]
        keys = list(dict.fromkeys(k for r in rows for k in r if k not in tail))
        keys += tail
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows([{k: csv_safe(v) for k, v in r.items()} for r in rows])
        print(f"gradebook: {args.csv} ({len(rows)} notebooks)")
    if stop:
        print(f"STOPPED: {stop.removeprefix('PACKAGE ')}", file=sys.stderr)
        return 2
    return 1 if failed else 0


def entry() -> None:
    """The ``attnlab-grade`` console script."""
    sys.exit(main())
