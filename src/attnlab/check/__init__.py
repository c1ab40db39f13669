"""Exercise checks: ``attnlab.check.<name>(your_function)``.

Each chapter's checks live in their own module below and are re-exported here, so a
notebook only ever writes ``attnlab.check.additive_score(my_additive_score)``.
"""

from ._core import Case, CheckFailed, run_check, strict_mode  # noqa: F401
from .explanation import *  # noqa: F401,F403  chapter 11
from .fast_attention import *  # noqa: F401,F403  chapter 8
from .mappings import *  # noqa: F401,F403  chapter 3
from .multihead import *  # noqa: F401,F403  chapter 6
from .pretrained import *  # noqa: F401,F403  chapter 10
from .recipe import *  # noqa: F401,F403  chapter 2
from .self_attention import *  # noqa: F401,F403  chapter 5
from .seq2seq import *  # noqa: F401,F403  chapter 1
from .structured import *  # noqa: F401,F403  chapter 4
from .subquadratic import *  # noqa: F401,F403  chapter 9
from .transformer import *  # noqa: F401,F403  chapter 7
