"""The grader's name in the course package: ``attnlab.grade`` *is* ``attnlab_grade``.

The grader is its own distribution, ``attnlab-grade`` (the repository's ``grader/``
folder), so that the course package students install carries no audit hook and no
socket. This alias keeps ``python -m attnlab.grade`` and ``attnlab.grade.<module>``
working: it imports ``attnlab_grade`` when it is installed, or from ``grader/src``
beside this package's ``src/`` in a clone, and otherwise says how to install it.
"""

import sys
from pathlib import Path

from attnlab.course import _compat

try:
    import attnlab_grade as _grade
except ImportError:
    _clone = Path(__file__).resolve().parents[3] / "grader" / "src"
    if not (_clone / "attnlab_grade" / "__init__.py").is_file():
        raise ImportError(
            "python -m attnlab.grade needs the grader, a distribution of its own: "
            "pip install 'git+<repository URL>#subdirectory=grader' (attnlab-grade)"
        ) from None
    sys.path.insert(0, str(_clone))
    import attnlab_grade as _grade

_compat.install(prefixes={__name__: "attnlab_grade"})
sys.modules[__name__] = _grade
