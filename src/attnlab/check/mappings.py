"""Checks for chapter 3, "From scores to probabilities" (sparsemax exercises)."""

from __future__ import annotations

import torch

from ..mappings import sparsemax
from ._core import Case, run_check

__all__ = ["sparsemax_sort", "sparsemax_threshold", "sparsemax_vjp"]

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


def _tau(x: torch.Tensor) -> torch.Tensor:
    """The sparsemax threshold of each row (x - p on the support, -inf rows: nan-free 0)."""
    p = sparsemax(x)
    first = p.argmax(dim=-1, keepdim=True)
    tau = (x.gather(-1, first) - p.gather(-1, first)).squeeze(-1)
    return torch.where(torch.isfinite(tau), tau, torch.zeros_like(tau))


def sparsemax_threshold(fn) -> bool:
    """Check ``fn(theta) -> tau`` for a 1-D ``theta``: sum_j [theta_j - tau]_+ = 1."""
    cases = [
        Case(lbl, (x.clone(),), float(_tau(x)), hint)
        for lbl, x, hint in _inputs()
        if x.dim() == 1
    ]
    cases.insert(
        1,
        Case(
            "worked example",
            (_t([1.0, 0.8, 0.1, -0.5]),),
            0.4,
            "support {1, 2}: tau = (1.0 + 0.8 - 1) / 2",
        ),
    )
    cases[0] = Case(
        cases[0].label,
        cases[0].args,
        cases[0].expected,
        "try support sizes k = 1, 2, ...: tau = (sum of top k - 1) / k",
    )
    return run_check("sparsemax_threshold", fn, cases)


def sparsemax_vjp(fn) -> bool:
    """Check ``fn(p, g) -> J^T g`` for the sparsemax output ``p`` and upstream ``g``."""
    cases = []
    gen = torch.Generator().manual_seed(4)
    for lbl, x, _ in _inputs():
        p = sparsemax(x)
        g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        xr = x.clone().requires_grad_()
        (sparsemax(xr) * g).sum().backward()  # the reference: autograd of the library
        hint = "J = diag(s) - s s^T / |S|, with s the support indicator of p"
        if "fully" in lbl:
            hint = "an empty support has a zero Jacobian: guard the division by |S|"
        if "length" in lbl or "1000" in lbl:
            hint = "a support of size 1 has a zero Jacobian"
        cases.append(Case(lbl, (p, g), xr.grad, hint))
    return run_check("sparsemax_vjp", fn, cases)
