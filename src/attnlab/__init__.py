"""attnlab — the one shared implementation behind the attention course.

Every chapter of the book imports this package; every from-scratch idea in a chapter is
asserted equal to the code here, and the code here is tested against PyTorch and the
``entmax`` package. Shape legend: B batch, H heads, T queries, S keys/values, D model
width, Dh head width. Masks: boolean ``True`` = may attend.
"""

from __future__ import annotations

from . import check, masking, mappings, scoring
from .attention import attend
from .devices import available_devices, device
from .notebook import setup_notebook

__version__ = "0.1.0"

__all__ = [
    "attend",
    "available_devices",
    "check",
    "device",
    "mappings",
    "masking",
    "scoring",
    "setup_notebook",
]
