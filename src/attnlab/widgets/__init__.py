"""The old home of the chapters' widgets and twins, kept as names only (deprecated).

Deprecated since 0.2.0: importing ``attnlab.widgets.<name>`` warns; import the
canonical ``attnlab.course.chNN_topic.widgets`` / ``.twins`` / ``attnlab.course.twin``.
Nothing in ``src/``, the chapters or the tests imports these names (ruff ``TID251``).

Each chapter's widgets are now ``attnlab/course/chNN_topic/widgets.py``, its twins
``twins.py`` beside them, the twins' runtime :mod:`attnlab.course.twin`. The old names
(``attnlab.widgets.recipe``, ``attnlab.widgets.twin``, ``attnlab.widgets.twins_pretrained``
...) are aliases of those very modules, made on first import (see
:mod:`attnlab.course._compat`); ``attnlab.widgets.twins`` re-exports the twins of
chapters 1, 2, 3, 5 and 7, which used to share that one module.

Convention: the function that draws an experiment is a plain function of plain values
(``recipe.query_vs_keys(angle=30.0, length=1.0)``) that the tests call directly; the
widget only wires ipywidgets sliders to it with :func:`ipywidgets.interactive`. Nothing
here waits for user input, and importing it never needs a display.
"""

from attnlab.course import _compat

_TWINS = ("structured", "fast_attention", "subquadratic", "pretrained", "explanation")
_compat.install(
    {
        f"{__name__}.twin": "attnlab.course.twin",
        **{
            f"{__name__}.{old}": f"attnlab.course.{ch}.widgets"
            for old, ch in _compat.CHAPTERS.items()
        },
        **{
            f"{__name__}.twins_{old}": f"attnlab.course.{_compat.CHAPTERS[old]}.twins"
            for old in _TWINS
        },
    },
    deprecated=True,
)
