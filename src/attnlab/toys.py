"""Toy data shared by the chapters' widgets and exercise checks.

Both :mod:`attnlab.widgets` and :mod:`attnlab.check` take their fixed examples from
here, so a widget never imports a check (or the reverse) and each example has one copy.
Plain tensors only: no matplotlib, no ipywidgets.
"""

from __future__ import annotations

import torch

__all__ = ["RECIPE_KEYS"]

# Chapter 2: four fixed keys in the plane: east (short), north, west-ish, and a long
# diagonal one: (1, 0), (0, 1.2), (-1, -0.3), (1.6, 1.6).
RECIPE_KEYS = torch.tensor([[1.0, 0.0], [0.0, 1.2], [-1.0, -0.3], [1.6, 1.6]])
