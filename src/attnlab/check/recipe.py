"""Checks for chapter 2, "The attention recipe"."""

__all__: list[str] = []
