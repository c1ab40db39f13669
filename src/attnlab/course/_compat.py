"""The old import paths of the course's modules, kept working.

Before the course scaffolding moved into :mod:`attnlab.course`, its modules were
``attnlab.check.<chapter>``, ``attnlab.widgets.<chapter>``, ``attnlab.widgets.twin``,
``attnlab.widgets.twins_<chapter>`` and ``attnlab.grade.*``. Notebooks (and students'
check cells, which the grader compares with the masters') still use those names, so each
old name is an *alias* of the module that moved: ``import attnlab.widgets.recipe`` gives
the very module object ``attnlab.course.ch02_recipe.widgets`` (not a copy that re-exports
it), so a monkeypatch or a check's ``forbid`` tripwire sees one object whichever name
was used. The alias is made on first import, so importing ``attnlab.widgets`` loads no
chapter's widgets.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# old module name -> the module it now is (exact names)
ALIASES: dict[str, str] = {}
# old package prefix -> new package prefix (every submodule, e.g. attnlab.grade.*)
PREFIXES: dict[str, str] = {}
# old names that warn (DeprecationWarning) when imported: attnlab.widgets.*. The
# attnlab.check.* and attnlab.grade.* module names stay silent: the grader walks them.
DEPRECATED: set[str] = set()


def target(name: str) -> str | None:
    """The module that the old name ``name`` now is, or None if it is no alias."""
    if name in ALIASES:
        return ALIASES[name]
    for old, new in PREFIXES.items():
        if name.startswith(old + ".") and not name.endswith(".__main__"):
            return new + name[len(old) :]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the module it now is (no second copy)."""

    def __init__(self, real: str):
        self.real = real
        self.spec = None

    def create_module(self, spec):
        if spec.name in DEPRECATED:
            warnings.warn(
                f"{spec.name} is deprecated since attnlab 0.2.0: import {self.real}",
                DeprecationWarning,
                stacklevel=2,
            )
        module = importlib.import_module(self.real)
        self.spec = module.__spec__  # importlib overwrites it; put it back below
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = self.spec

    def get_code(self, fullname):  # python -m <old name> (runpy asks for the code)
        return importlib.util.find_spec(self.real).loader.get_code(self.real)


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target_=None):
        real = target(fullname)
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real))


def install(
    aliases: dict[str, str] | None = None,
    prefixes: dict[str, str] | None = None,
    deprecated: bool = False,
) -> None:
    """Register old names (idempotent) and put the finder first on ``sys.meta_path``.

    ``deprecated=True``: importing one of ``aliases`` warns (``DeprecationWarning``).
    """
    ALIASES.update(aliases or {})
    if deprecated:
        DEPRECATED.update(aliases or {})
    PREFIXES.update(prefixes or {})
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


CHAPTERS = {
    "seq2seq": "ch01_seq2seq",
    "recipe": "ch02_recipe",
    "mappings": "ch03_mappings",
    "structured": "ch04_structured",
    "self_attention": "ch05_self_attention",
    "multihead": "ch06_multihead",
    "transformer": "ch07_transformer",
    "fast_attention": "ch08_fast_attention",
    "subquadratic": "ch09_subquadratic",
    "pretrained": "ch10_pretrained",
    "explanation": "ch11_explanation",
    "circuits": "ch12_circuits",
    "modern": "ch13_modern",
    "serving": "ch14_serving",
}
"""The old per-chapter module name -> the chapter's folder under ``attnlab/course``."""
