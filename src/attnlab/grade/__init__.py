"""The grader's old name: ``attnlab.grade`` *is* :mod:`attnlab.course.grade`.

``python -m attnlab.grade`` keeps working (it runs ``attnlab/course/grade/__main__.py``),
and ``attnlab.grade.<module>`` is the module ``attnlab.course.grade.<module>`` itself.
"""

import sys

from attnlab.course import _compat

_compat.install(prefixes={__name__: "attnlab.course.grade"})

from attnlab.course import grade as _grade  # noqa: E402

sys.modules[__name__] = _grade
