"""Chapter 14's cache-eviction exercise check (part B), re-exported by ``check.py``.

* :func:`keep_low_norm` — ``fn(keys (..., S, Dh), budget, recent) -> (..., min(budget,
  S))``: the eviction policy of Devoto et al. (2024): keep the ``recent`` newest tokens
  and, among the others, the ``budget - recent`` whose keys have the *smallest* L2 norm
  (low-norm keys tend to draw the most attention); indices sorted by position, per
  leading index (e.g. per head); a budget at or above ``S`` keeps everything.
"""

from __future__ import annotations

import torch

from ..check_core import Case, run_check, seeded

__all__ = ["keep_low_norm"]

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "keep_low_norm": (
        "attnlab.kvcompress.keep_h2o",
        "attnlab.kvcompress.evict.keep_h2o",
        "attnlab.kvcompress.keep_tova",
        "attnlab.kvcompress.evict.keep_tova",
    ),
}


def _reference(keys: torch.Tensor, budget: int, recent: int) -> torch.Tensor:
    """A loop over the leading indices, in float64 and plain Python sorting."""
    S = keys.shape[-2]
    lead = keys.shape[:-2]
    if budget >= S:
        return torch.arange(S).expand(*lead, S).clone()
    flat = keys.double().reshape(-1, S, keys.shape[-1])
    rows = []
    for k in flat:
        norms = [float(k[j].norm()) for j in range(S - recent)]
        low = sorted(range(S - recent), key=lambda j: norms[j])[: budget - recent]
        rows.append(sorted(low) + list(range(S - recent, S)))
    return torch.tensor(rows).reshape(*lead, budget)


def _same_indices(got, expected) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and not got.is_floating_point()
        and tuple(got.shape) == tuple(expected.shape)
        and bool((got.long() == expected).all())
    )


def keep_low_norm(fn):
    """Check ``fn(keys, budget, recent)`` against a loop in float64."""
    g = seeded(1400)
    base = torch.randn(2, 3, 12, 4, generator=g)
    scaled = base * torch.linspace(0.2, 3.0, 12)[:, None]  # norms spread by position
    specs = [
        ("(B, G, S, Dh) = (2, 3, 12, 4), budget 6, recent 2", (base, 6, 2),
         "keep the SMALLEST norms among the older tokens, plus the `recent` newest"),
        ("norms growing with position, budget 5, recent 1", (scaled, 5, 1),
         "indices sorted by position; the newest `recent` are always kept"),
        ("recent 0", (base, 4, 0), "with recent = 0 every kept token is chosen by norm"),
        ("budget = recent", (base, 3, 3), "budget = recent keeps just the newest tokens"),
        ("budget >= S keeps all", (base, 12, 2), "a budget at or above S keeps every token"),
        ("one head, (S, Dh)", (base[0, 0], 7, 2), "work on any leading dims, even none"),
    ]  # fmt: skip
    cases = [Case(label, args, _reference(*args), hint) for label, args, hint in specs]
    return run_check(
        "keep_low_norm",
        fn,
        cases,
        compare=_same_indices,
        forbid=FORBIDDEN["keep_low_norm"],
    )
