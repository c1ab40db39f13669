"""What the first (hidden) cell of every chapter calls: seeds and plotting defaults."""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["setup_notebook", "seed_everything"]


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and torch (all devices) so a chapter runs the same each time."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def setup_notebook(seed: int = 0) -> torch.device:
    """Seed everything, set plot defaults, and return the device chapters should use."""
    import matplotlib as mpl

    seed_everything(seed)
    torch.set_printoptions(precision=4, sci_mode=False)
    mpl.rcParams.update(
        {
            "figure.dpi": 100,
            "figure.figsize": (6, 3.5),
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    from .devices import device

    return device()
