"""Helpers the check tests share (a module of its own: pytest advises against importing
``conftest``)."""

from __future__ import annotations

import re

import pytest


def fails_with(check, answer, pattern):
    """The check rejects ``answer`` and its message matches ``pattern``
    (``from checkhelp import fails_with``)."""
    from attnlab.check import CheckFailed

    with pytest.raises(CheckFailed) as info:
        check(answer)
    assert re.search(pattern, str(info.value), re.DOTALL), str(info.value)
