"""``python -m attnlab.grade FILES-FOLDERS-GLOBS [-j N]``: see :mod:`attnlab.grade`."""

import sys

try:
    import jupyter_client  # noqa: F401
    import nbclient  # noqa: F401
    import nbformat  # noqa: F401
except ImportError as err:  # the grader's own dependencies, not the course's
    sys.exit(
        f"error: the grader needs nbclient, nbformat and ipykernel ({err}): "
        "pip install nbclient nbformat ipykernel"
    )

from . import main

sys.exit(main())
