"""Checks for the chapter on seq2seq."""

__all__: list[str] = []
