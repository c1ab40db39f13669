"""Exercise checks: ``attnlab.check.<name>(your_function)``.

Each chapter's checks live in their own module below and are re-exported here, so a
notebook only ever writes ``attnlab.check.additive_score(my_additive_score)``.
"""

from ._core import Case, CheckFailed, run_check, strict_mode  # noqa: F401
from .recipe import *  # noqa: F401,F403  chapter 2
