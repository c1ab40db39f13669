"""Grade students' notebooks: ``python -m attnlab.grade FILES-FOLDERS-GLOBS [-j N]``.

For each submission the grader

1. finds its master (same file name, else the chapter number in its title) in the
   integrity data shipped with the package (:mod:`attnlab.grade.masters`), or in
   ``--master`` (a notebook or a folder of them), and checks every exercise's
   published check cells: an exercise whose check cell was edited or removed is
   **refused** (that exercise only; the report names the cell);
2. executes the notebook top to bottom in a fresh kernel, in a scratch folder, with
   time limits per cell (short for the exercises' cells, longer for the chapter's own)
   and for the whole notebook; a cell that raises, loops or kills the kernel costs its
   exercise and grading goes on (after a dead kernel a new one re-runs the cells that
   had succeeded);
3. takes the verdict out of the notebook's reach. Before any cell runs, a sentry is
   installed in the kernel (:mod:`attnlab.grade.sentry`: an audit hook no cell can
   remove and a profile it watches over). While a check runs it records the student's
   answer on each case as plain data; the grader then **replays** the check in its
   own process on those answers (:mod:`attnlab.grade.replay`), so patching ``print``,
   ``torch``, ``numpy`` or :mod:`attnlab.check` in the kernel changes nothing. The
   sentry also reports, and the grade fails, every exercise touched by: a call to a
   function the exercise forbids (``FORBIDDEN`` in the check modules) or to a check's
   reference answer, a patched ``builtins``/``torch``/``numpy``/``attnlab`` name, a
   write into the installed package or the grader's folders (fake reports), frame or
   ``gc`` introspection, ``ctypes``, a subprocess or thread, or a broken monitor. The
   installed package is hashed before and after each submission;
4. reports per exercise: **passed**, **failed** (the check's message), **not
   attempted** (the stub still raises ``NotImplementedError``), **errored** (a cell
   of the exercise raised, exited or killed the kernel), **timed out**, **flagged**
   (the sentry saw one of the above), **refused** (its check cell was edited) or
   **written** (no check: a derivation or prediction for the instructor to read); the
   student's written answers (markdown cells they filled in) are in the report.

Grading runs students' code with your permissions: grade in a container or a
throwaway account without network (see the instructors' page).

Why nbclient and not nbgrader or otter-grader: our exercises already carry their own
structure (sphinx-exercise boxes, ``solution`` tags, ``attnlab.check`` cells), and both
would need a second, parallel markup kept in sync with it. nbclient is the execution
engine underneath both (and Jupyter Book); this package adds the mapping from cells to
exercises, the integrity checks, the sentry and the report.

Modules, top to bottom (import-linter layers in ``grader/pyproject.toml``): ``cli``
(:func:`main`), ``selfcheck`` (the masters checked on this machine), ``verdicts``
(:func:`grade`: one notebook), ``clean`` (one clean kernel per exercise), ``outcome``
(an exercise's verdict from its runs), ``replay``, ``runner`` (the kernel), ``integrity``
(check cells against the master's, the package digest), ``masters``, ``program``,
``channel``, ``sandbox``, ``sentry`` (in the kernel), ``report``.
"""

from .cli import grade_one, main, report_names, submissions
from .integrity import (
    OWN_OUTPUTS,
    GradeError,
    PackageChanged,
    default_masters,
    find_master,
    integrity_problems,
    master_entry,
    package_digest,
    read_notebook,
)
from .report import STATUSES, ExerciseResult, Report
from .verdicts import grade

__all__ = [
    "OWN_OUTPUTS",
    "STATUSES",
    "ExerciseResult",
    "GradeError",
    "PackageChanged",
    "Report",
    "default_masters",
    "find_master",
    "grade",
    "grade_one",
    "integrity_problems",
    "main",
    "master_entry",
    "package_digest",
    "read_notebook",
    "report_names",
    "submissions",
]
