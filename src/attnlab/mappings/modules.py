"""The mappings as ``nn.Module`` layers (``Softmax``, ``Sparsemax``, ``Entmax15``, ...)."""

from __future__ import annotations

import torch
from torch import nn

from .basic import softmax
from .bisection import entmax_bisect, fusedmax, normmax_bisect
from .sparse import entmax15, sparsemax


# ---------------------------------------------------------------------- nn.Modules
class _Mapping(nn.Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_Mapping):
    """Module form of :func:`softmax` (with a fixed ``temperature``)."""

    def __init__(self, dim: int = -1, temperature: float = 1.0):
        super().__init__(dim)
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x, self.dim, self.temperature)


class Sparsemax(_Mapping):
    """Module form of :func:`sparsemax` (``k``: size of the first partial sort)."""

    def __init__(self, dim: int = -1, k: int | None = None):
        super().__init__(dim)
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sparsemax(x, self.dim, self.k)


class Entmax15(_Mapping):
    """Module form of :func:`entmax15` (``k``: size of the first partial sort)."""

    def __init__(self, dim: int = -1, k: int | None = None):
        super().__init__(dim)
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return entmax15(x, self.dim, self.k)


class EntmaxBisect(_Mapping):
    """Module form of :func:`entmax_bisect`; pass an ``nn.Parameter`` alpha to learn it."""

    def __init__(
        self,
        alpha: float | torch.Tensor = 1.5,
        dim: int = -1,
        n_iter: int | None = None,
    ):
        super().__init__(dim)
        self.alpha = alpha
        self.n_iter = n_iter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return entmax_bisect(x, self.alpha, self.dim, self.n_iter)


class NormmaxBisect(_Mapping):
    """Module form of :func:`normmax_bisect`."""

    def __init__(
        self,
        alpha: float | torch.Tensor = 2.0,
        dim: int = -1,
        n_iter: int | None = None,
    ):
        super().__init__(dim)
        self.alpha = alpha
        self.n_iter = n_iter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return normmax_bisect(x, self.alpha, self.dim, self.n_iter)


class Fusedmax(_Mapping):
    """Module form of :func:`fusedmax`."""

    def __init__(self, lam: float = 1.0, dim: int = -1):
        super().__init__(dim)
        self.lam = lam

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fusedmax(x, self.lam, self.dim)
