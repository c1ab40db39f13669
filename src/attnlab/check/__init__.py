"""Exercise checks: ``attnlab.check.<name>(your_function)``.

Each chapter's checks live in its folder (``attnlab/course/chNN_topic/check.py``) and
are re-exported here, so a notebook only ever writes
``attnlab.check.additive_score(my_additive_score)``. The old module names keep working
and are the same module objects: ``attnlab.check.recipe`` *is*
``attnlab.course.ch02_recipe.check``, ``attnlab.check._core`` is
``attnlab.course.check_core`` (see :mod:`attnlab.course._compat`).
"""

import importlib as _importlib
import sys as _sys

from attnlab.course import _compat
from attnlab.course.ch01_seq2seq.check import *  # noqa: F403
from attnlab.course.ch02_recipe.check import *  # noqa: F403
from attnlab.course.ch03_mappings.check import *  # noqa: F403
from attnlab.course.ch04_structured.check import *  # noqa: F403
from attnlab.course.ch05_self_attention.check import *  # noqa: F403
from attnlab.course.ch06_multihead.check import *  # noqa: F403
from attnlab.course.ch07_transformer.check import *  # noqa: F403
from attnlab.course.ch08_fast_attention.check import *  # noqa: F403
from attnlab.course.ch09_subquadratic.check import *  # noqa: F403
from attnlab.course.ch10_pretrained.check import *  # noqa: F403
from attnlab.course.ch11_explanation.check import *  # noqa: F403
from attnlab.course.ch12_circuits.check import *  # noqa: F403
from attnlab.course.ch13_modern.check import *  # noqa: F403
from attnlab.course.ch14_serving.check import *  # noqa: F403
from attnlab.course.check_core import Case, CheckFailed, run_check, strict_mode  # noqa: F401

MODULES: dict[str, str] = {
    "_core": "attnlab.course.check_core",
    "_diagnose": "attnlab.course.check_diagnose",
    **{
        old: f"attnlab.course.{folder}.check"
        for old, folder in _compat.CHAPTERS.items()
    },
}
"""``attnlab.check.<old name>`` -> the module it is (the grader walks these)."""

# Every old submodule name is the moved module itself, bound now (all are loaded above).
for _old, _new in MODULES.items():
    _sys.modules[f"{__name__}.{_old}"] = globals()[_old] = _importlib.import_module(
        _new
    )
_compat.install({f"{__name__}.{old}": new for old, new in MODULES.items()})
del _old, _new
