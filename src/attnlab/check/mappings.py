"""Checks for chapter 3, "From scores to probabilities".

* :func:`sparsemax_sort` — ``fn(scores) -> weights``: sparsemax by sorting
* :func:`tail_mass` — ``fn(p, k) -> mass``: the weight outside the ``k`` largest
* :func:`entmax_vjp` — ``fn(p, g, alpha) -> J^T g``: the backward pass of α-entmax
"""

from __future__ import annotations

import torch

from ..mappings import entmax15, entmax_bisect, softmax, sparsemax
from ._core import Case, run_check

__all__ = [
    "sparsemax_sort",
    "tail_mass",
    "entmax_vjp",
]

_INF = float("-inf")


def _t(*rows) -> torch.Tensor:
    """One row gives a 1-D tensor, several rows a 2-D one (float64)."""
    return torch.tensor(rows[0] if len(rows) == 1 else rows, dtype=torch.float64)


def _inputs() -> list[tuple[str, torch.Tensor, str]]:
    """(label, scores, hint): the same hostile inputs for every exercise."""
    g = torch.Generator().manual_seed(3)
    return [
        (
            "three scores",
            _t([1.0, 0.8, 0.1]),
            "sort descending, then keep j with 1 + j z_(j) > cumsum",
        ),
        (
            "a batch of rows",
            torch.randn(4, 6, generator=g, dtype=torch.float64),
            "work along the last dimension, one threshold per row",
        ),
        ("all equal", _t([0.3, 0.3, 0.3, 0.3]), "equal scores share the mass equally"),
        ("length 1", _t([2.5]), "a single score gets all the weight"),
        (
            "logits x 1000",
            _t([1.0, 3.0, 2.0, -1.0]) * 1000,
            "subtract the row max first",
        ),
        (
            "masked entries",
            _t([0.5, _INF, 0.2, _INF, 0.4]),
            "-inf entries must get exactly 0 and never produce NaN",
        ),
        (
            "a fully masked row",
            _t([0.1, 0.4, 0.2], [_INF, _INF, _INF]),
            "a row that is all -inf gets all zeros (no support: guard k = 0)",
        ),
    ]


def sparsemax_sort(fn) -> bool:
    """Check ``fn(scores) -> weights``: sparsemax along the last dim by sorting."""
    cases = [Case(lbl, (x.clone(),), sparsemax(x), hint) for lbl, x, hint in _inputs()]
    return run_check("sparsemax_sort", fn, cases)


def tail_mass(fn) -> bool:
    """Check ``fn(p, k) -> mass``: the weight outside the ``k`` largest, last dim.

    ``p`` is any tensor of weights (rows on the simplex); the answer has ``p``'s shape
    without its last dimension. ``k >= n`` leaves no tail (0), ``k = 0`` leaves all.
    """
    g = torch.Generator().manual_seed(6)
    rows = softmax(torch.randn(3, 50, generator=g, dtype=torch.float64))
    cases = []
    for label, p, k, hint in [
        ("one row", _t([0.5, 0.1, 0.3, 0.1]), 2, "sum all but the k largest"),
        ("unsorted batch", rows, 10, "the k largest of each row, not the first k"),
        ("ties", _t([0.25, 0.25, 0.25, 0.25]), 3, ""),
        ("k >= n: no tail", _t([0.7, 0.3]), 5, "torch.topk fails for k > n: clamp k"),
        ("k = 0: everything", _t([0.7, 0.3]), 0, ""),
        ("sparse weights", sparsemax(_t([2.0, 1.5, -1.0, 0.0])), 2, ""),
    ]:
        kk = min(k, p.shape[-1])
        top = p.topk(kk, dim=-1).values.sum(-1) if kk else torch.zeros(p.shape[:-1])
        expected = (p.sum(-1) - top).to(p.dtype)
        cases.append(Case(label, (p.clone(), k), expected, hint))
    return run_check("tail_mass", fn, cases)


def _entmax_fn(alpha: float):
    if alpha == 1.0:
        return softmax
    if alpha == 1.5:
        return entmax15
    if alpha == 2.0:
        return sparsemax
    return lambda x: entmax_bisect(x, alpha)


def entmax_vjp(fn) -> bool:
    """Check ``fn(p, g, alpha) -> J^T g`` for the α-entmax output ``p`` (α >= 1).

    ``J = diag(s) - s sᵀ / sum(s)`` with ``s_j = p_j^(2 - α)`` on the support and 0 off
    it; α = 1 is softmax, α = 2 sparsemax. Along the last dimension, any shape.
    """
    cases = []
    gen = torch.Generator().manual_seed(7)
    alphas = [1.5, 2.0, 1.0, 1.2, 3.0, 1.5, 1.5, 2.0]
    for alpha, (lbl, x, _) in zip(alphas, _inputs()[1:] + _inputs()[:1]):
        fwd = _entmax_fn(alpha)
        p = fwd(x).detach()
        g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        xr = x.clone().requires_grad_()
        (fwd(xr) * g).sum().backward()  # the reference: autograd of the library
        hint = "s = p^(2 - alpha) on the support, 0 elsewhere; J^T g = s * (g - ḡ)"
        if alpha == 2.0:
            hint = "for alpha = 2, s is the support indicator: 0^0 must not become 1"
        if "fully" in lbl:
            hint = "an empty support has a zero Jacobian: guard the division by sum(s)"
        cases.append(Case(f"alpha {alpha}, {lbl}", (p, g, alpha), xr.grad, hint))
    return run_check("entmax_vjp", fn, cases)
