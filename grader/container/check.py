"""Grade one honest and one cheating notebook inside the container (build.sh's root).

    sudo python3 grader/container/check.py ROOT [OUT]

Standard library only (it runs on the host, which needs no torch). The honest notebook
is chapter 2 with its own solutions; the cheating one is the same notebook whose answer
to 2.2 is the check's own reference function, imported under the student's name. Inside
the container the grader first checks chapter 2's master on that machine, then grades
both: the honest one must pass its four auto-checked exercises, the cheating one must
have 2.2 flagged and the other three passed. Exit status 0 when both hold.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHAPTER = REPO / "chapters" / "02_attention_recipe.ipynb"
CHECK = REPO / "src" / "attnlab" / "course" / "ch02_recipe" / "check.py"


def notebooks(folder: Path) -> tuple[Path, Path]:
    nb = json.loads(CHAPTER.read_text())
    honest = folder / "honest.ipynb"
    honest.write_text(json.dumps(nb))
    reference = re.search(r"^def (_\w*booster\w*)\(", CHECK.read_text(), re.M).group(1)
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and "solution" in tags and "b_weight" in src:
            cell["source"] = (
                f"from attnlab.check.recipe import {reference} as smallest_booster"
            )
            break
    else:
        raise SystemExit("check.py: chapter 2's answer to 2.2 was not found")
    cheat = folder / "cheat.ipynb"
    cheat.write_text(json.dumps(nb))
    return honest, cheat


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else Path(tempfile.mkdtemp(prefix="graded-"))
    with tempfile.TemporaryDirectory() as tmp:
        honest, cheat = notebooks(Path(tmp))
        grade = Path(__file__).with_name("grade.sh")
        run = subprocess.run(
            ["bash", str(grade), str(root), str(out), honest, cheat, "--", "-j", "2"]
        )
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open())}
    got = {
        who: [rows[who].get(n, "") for n in ("2.1", "2.2", "2.3", "2.4")]
        for who in ("honest", "cheat")
    }
    want = {
        "honest": ["passed"] * 4,
        "cheat": ["passed", "flagged", "passed", "passed"],
    }
    print(f"grader exit {run.returncode}; verdicts {got}; reports in {out}")
    return 0 if run.returncode == 0 and got == want else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
