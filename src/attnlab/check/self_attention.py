"""Checks for the chapter on self-attention."""

__all__: list[str] = []
