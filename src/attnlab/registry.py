"""One pattern for the library's "by name" tables (scorers, mappings, positional
encodings, activations, tasks, ...).

A :class:`Registry` maps names to objects (classes, factories or functions). It reads
like a dict (``name in r``, ``r[name]``, iteration, ``len``) and adds three methods:

* :meth:`Registry.register` adds an entry (also usable as a decorator);
* :meth:`Registry.get` returns an entry; an unknown name raises :class:`UnknownName`
  (a ``ValueError`` and a ``KeyError``) whose message lists the known names;
* :meth:`Registry.names` returns the names in the order they were registered.

The old functions (``get_scorer``, ``get_positional``, ``get_mapping``, ``make_task``,
...) are thin wrappers over one registry each.

>>> r = Registry("colour", {"red": 1})
>>> r.get("blue")
Traceback (most recent call last):
...
attnlab.registry.UnknownName: unknown colour 'blue'; choose one of red
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

__all__ = ["Registry", "UnknownName"]

T = TypeVar("T")


class UnknownName(ValueError, KeyError):
    """A name no registry entry has. A ``ValueError`` (bad argument value) and a
    ``KeyError`` (``registry[name]`` raises it as a dict would)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """Names -> objects, with one error message for an unknown name.

    Parameters
    ----------
    what : what an entry is, for the error message (``"scorer"``, ``"mapping"``).
    entries : optional initial ``{name: object}``, in the order to list them.
    otherwise : what else the caller accepts, for the error message (``"a callable"``).
    """

    def __init__(
        self, what: str, entries: Mapping[str, T] | None = None, otherwise: str = ""
    ) -> None:
        self.what = what
        self.otherwise = otherwise
        self._entries: dict[str, T] = {}
        for name, obj in (entries or {}).items():
            self.register(name, obj)

    def register(self, name: str, obj: T | None = None) -> T | Callable[[T], T]:
        """Add ``obj`` under ``name`` and return it; without ``obj``, a decorator.

        Raises
        ------
        TypeError
            ``name`` is not a non-empty string.
        ValueError
            ``name`` is taken already.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"{self.what} names are non-empty strings, got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered already")
        if obj is None:

            def decorator(o: T) -> T:
                self._entries[name] = o
                return o

            return decorator
        self._entries[name] = obj
        return obj

    def get(self, name: str) -> T:
        """The entry called ``name``.

        Raises
        ------
        UnknownName
            (a ``ValueError`` and a ``KeyError``) naming the known entries.
        """
        try:
            return self._entries[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            known = ", ".join(self._entries)
            also = f", or {self.otherwise}" if self.otherwise else ""
            raise UnknownName(
                f"unknown {self.what} {name!r}; choose one of {known}{also}"
            ) from None

    def names(self) -> tuple[str, ...]:
        """The known names, in the order they were registered."""
        return tuple(self._entries)

    def items(self):
        return self._entries.items()

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._entries
        except TypeError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, names={self.names()})"
