"""Mappings from scores to weights: softmax and its sparse and structured cousins.

Every mapping here is a *regularised argmax* over the probability simplex

    pi_Omega(x) = argmax_{p in simplex}  p.x - Omega(p)

with ``Omega = 0`` (argmax), negative Shannon entropy (softmax), ``1/2 ||p||^2``
(sparsemax), the Tsallis entropy (alpha-entmax) or ``1/2 ||p||^2 + lam * TV(p)``
(fusedmax). Each takes scores ``(..., n, ...)`` and returns weights of the same shape,
on the simplex along ``dim``. Positions at ``-inf`` get exactly ``0``; a row whose every
entry is ``-inf`` (a fully masked row) gets all zeros, never NaN — in the forward pass
and in the backward pass. ``NaN`` or ``+inf`` scores raise ``ValueError``; integer or
boolean scores raise ``TypeError``. An empty input (a last dimension of size 0, or an
empty batch) gives an empty output of the same shape, as ``torch.softmax`` does.
float16/bfloat16 inputs are computed in float32 and cast back.

Layering (as in deep-spin/entmax): private numerics in :mod:`attnlab.kernels` →
``torch.autograd.Function`` with a hand-written backward → lowercase function → thin
CamelCase ``nn.Module``.
"""

from .basic import (  # noqa: F401
    argmax,
    sigmoid,
    softmax,
)
from .bisection import (  # noqa: F401
    EntmaxBisectFunction,
    FusedmaxFunction,
    entmax_bisect,
    fusedmax,
    normmax_bisect,
)
from .modules import (  # noqa: F401
    Entmax15,
    EntmaxBisect,
    Fusedmax,
    NormmaxBisect,
    Softmax,
    Sparsemax,
)
from .sparse import (  # noqa: F401
    Entmax15Function,
    SparsemaxFunction,
    entmax15,
    sparsemax,
)

__all__ = [
    "softmax",
    "sigmoid",
    "argmax",
    "sparsemax",
    "entmax15",
    "entmax_bisect",
    "fusedmax",
    "normmax_bisect",
    "SparsemaxFunction",
    "Entmax15Function",
    "EntmaxBisectFunction",
    "FusedmaxFunction",
    "Softmax",
    "Sparsemax",
    "Entmax15",
    "EntmaxBisect",
    "Fusedmax",
    "NormmaxBisect",
]
