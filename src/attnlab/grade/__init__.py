"""The grader's name in the course package: ``attnlab.grade`` re-exports ``attnlab_grade``.

The grader is its own distribution, ``attnlab-grade`` (the repository's ``grader/``
folder), so that the course package students install carries no audit hook and no
socket. This alias keeps ``python -m attnlab.grade`` and ``attnlab.grade.<module>``
(the very module ``attnlab_grade.<module>``) working where the grader is installed:
``pip install ./grader`` in a clone (``pip install -e ./grader`` to work on it).
"""

try:
    from attnlab_grade import *  # noqa: F403
    from attnlab_grade import __all__  # noqa: F401
except ModuleNotFoundError as err:
    if err.name != "attnlab_grade":
        raise
    raise ModuleNotFoundError(
        "attnlab.grade is the grader, a distribution of its own (attnlab-grade): "
        "pip install ./grader in a clone of the course, or "
        "pip install 'attnlab-grade @ git+<repository URL>#subdirectory=grader'",
        name=err.name,
    ) from None

from attnlab.course import _compat

# attnlab.grade.<module> is attnlab_grade.<module> (one module object, not a copy).
_compat.install(prefixes={__name__: "attnlab_grade"})
