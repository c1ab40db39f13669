"""``python -m attnlab.grade.build_masters [chapters [student ...]]``: write the
grader's packaged integrity data (:mod:`attnlab.grade.masters`)."""

import sys
from pathlib import Path

from .masters import editions_of, write

folder = Path(sys.argv[1] if len(sys.argv) > 1 else "chapters")
extra = [Path(a) for a in sys.argv[2:]] or editions_of(folder.parent)
print(f"wrote {write(folder, extra)}")
