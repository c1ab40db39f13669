"""``make grade-check``: the grader gives every chapter's own solutions full marks.

    python tools/grade_check.py [NOTEBOOKS or FOLDER ...] [-j N] [--out DIR]

Grades the master notebooks (``chapters/``, solutions included; or the complete
edition ``full/``) with ``python -m attnlab.grade`` — sandboxes, clean runs and all —
and fails unless every notebook is graded and every auto-checked exercise passes
(written exercises are the instructor's; they are counted apart). A false verdict on
honest work shows up here first. Prints the time per notebook: the cost per
submission quoted in instructors.md.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", default=[str(ROOT / "chapters")])
    p.add_argument("-j", "--jobs", type=int, default=1)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    from attnlab.grade import main as grade_main

    out = args.out or Path(tempfile.mkdtemp(prefix="grade-check-"))
    book = out / "grades.csv"
    start = time.monotonic()
    rc = grade_main(
        [*args.notebooks, "--no-check-masters", "-j", str(args.jobs)]
        + ["--out", str(out), "--csv", str(book)]
    )
    took = time.monotonic() - start
    rows = list(csv.DictReader(book.open()))
    bad = []
    for r in rows:
        if r.get("status") != "graded":
            bad.append(f"{r['submission']}: {r.get('status')}")
        elif r["passed"] != r["total"]:
            ex = {k: v for k, v in r.items() if k[:1].isdigit() and v != "passed"}
            ex = {k: v for k, v in ex.items() if v not in ("written", "")}
            bad.append(f"{r['submission']}: {r['passed']}/{r['total']} {ex}")
    print(
        f"grade-check: {len(rows)} notebooks in {took:.0f} s "
        f"({took / max(len(rows), 1):.0f} s per notebook, -j {args.jobs}); "
        f"reports in {out}"
    )
    for b in bad:
        print("FALSE VERDICT ON HONEST WORK:", b, file=sys.stderr)
    return 1 if bad or rc else 0


if __name__ == "__main__":
    sys.exit(main())
