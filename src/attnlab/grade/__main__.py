"""``python -m attnlab.grade SUBMISSION.ipynb [...]``: see :mod:`attnlab.grade`."""

import sys

from . import main

sys.exit(main())
