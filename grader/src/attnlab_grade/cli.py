"""The command line (``python -m attnlab.grade``): submissions, parallel jobs, reports
and the CSV gradebook."""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import sys
from pathlib import Path

from .integrity import OWN_OUTPUTS, GradeError, PackageChanged, package_digest
from .report import Report
from .verdicts import grade

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


def _report_paths(sub: Path, out: Path | None, names: dict[Path, str]) -> Path:
    return (out or sub.parent) / names[sub]


def _grade_one(job: dict) -> tuple[str, Report | None, str]:
    """Grade one submission; whatever goes wrong stays with it."""
    try:
        return job["sub"], grade(**job["kwargs"]), ""
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


def _write_report(report: Report, base: Path) -> None:
    base.parent.mkdir(parents=True, exist_ok=True)
    j, t = Path(f"{base}.grade.json"), Path(f"{base}.grade.txt")
    j.write_text(json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n")
    t.write_text(report.to_text())
    print(report.to_text(), end="")
    print(f"report: {j} and {t}\n", flush=True)


def _stems(subs: list[Path]) -> dict[Path, str]:
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m attnlab.grade",
        description="Execute students' notebooks and grade their exercises. Grading "
        "RUNS THE STUDENTS' CODE with your permissions: do it in a container or a "
        "throwaway account without network.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "submissions",
        nargs="+",
        help="notebooks: files, folders (searched recursively) or globs; the grader's "
        "own outputs (*.graded.ipynb) are skipped",
    )
    p.add_argument(
        "--master",
        type=Path,
        help="the master notebook, or a folder of them (default: the chapters "
        "packaged with attnlab)",
    )
    p.add_argument("-j", "--jobs", type=int, default=1, help="notebooks graded at once")
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
    args = p.parse_args(argv)
    forbid: dict[str, list[str]] = {}
    for item in args.forbid:
        check, _, dotted = item.partition("=")
        if not check or "." not in dotted:
            p.error(f"--forbid {item}: expected CHECK=module.name")
        forbid.setdefault(check, []).append(dotted)
    if args.master is not None and not args.master.exists():
        p.error(f"--master {args.master} does not exist")
    subs = submissions(args.submissions, args.out)
    if not subs:
        p.error("no notebooks found in " + " ".join(args.submissions))
    names = _stems(subs)
    protected = [str(x.resolve().parent) for x in subs]
    if args.out:
        protected.append(str(args.out.resolve()))
    if args.csv:
        protected.append(str(args.csv.resolve().parent))
    digest = package_digest()
    jobs = []
    for sub in subs:
        out = _report_paths(sub, args.out, names)
        kwargs = dict(
            path=str(sub),
            master=str(args.master) if args.master else None,
            cell_timeout=args.cell_timeout,
            exercise_timeout=args.exercise_timeout,
            time_limit=args.time_limit,
            kernel=args.kernel,
            executed=str(out) + ".graded.ipynb" if args.save_executed else None,
            protected=protected,
            digest=digest,
            forbid=forbid,
        )
        jobs.append({"sub": str(sub), "kwargs": kwargs})
    results: dict[str, tuple[Report | None, str]] = {}
    stop = ""

    def done(sub: str, report: Report | None, err: str) -> None:
        # Each report is written as soon as its notebook's kernels have stopped:
        # no later notebook can reach it (they run under other user ids).
        results[sub] = (report, err)
        if report is not None:
            try:
                _write_report(report, _report_paths(Path(sub), args.out, names))
            except OSError as e:
                results[sub] = (None, f"{sub}: the report could not be written ({e})")

    if args.jobs > 1 and len(jobs) > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(_grade_one, j): j["sub"] for j in jobs}
            for f in as_completed(futures):
                try:
                    sub, report, err = f.result()
                except BaseException as e:  # noqa: BLE001 (a worker died)
                    sub, report = futures[f], None
                    err = f"{sub}: the grader failed on this notebook ({e!r})"
                done(sub, report, err)
                if err.startswith("PACKAGE") and not stop:
                    stop = err
                    for other in futures:
                        other.cancel()
    else:
        for j in jobs:
            if stop:
                break
            sub, report, err = _grade_one(j)
            done(sub, report, err)
            if err.startswith("PACKAGE"):
                stop = err
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
