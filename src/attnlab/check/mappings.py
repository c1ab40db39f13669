"""Checks for the chapter on mappings."""

__all__: list[str] = []
