"""Checks for the chapter on multihead."""

__all__: list[str] = []
