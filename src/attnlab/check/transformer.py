"""Checks for the chapter on transformer."""

__all__: list[str] = []
