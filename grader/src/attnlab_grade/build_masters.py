"""``python -m attnlab.grade.build_masters [chapters [student ...]]``: write the
grader's packaged integrity data (:mod:`attnlab.grade.masters`)."""

import sys
from pathlib import Path

from .masters import editions_of, write


def main(argv: list[str]) -> None:
    folder = Path(argv[0] if argv else "chapters")
    if not folder.is_dir() or not list(folder.glob("*.ipynb")):
        sys.exit(f"error: {folder} is no folder of chapter notebooks (nothing written)")
    extra = [Path(a) for a in argv[1:]] or editions_of(folder.parent)
    print(f"wrote {write(folder, extra)}")


# Importing the module (tests/test_imports.py imports every module) writes nothing.
if __name__ == "__main__":
    main(sys.argv[1:])
