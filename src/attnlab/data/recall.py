"""Associative recall (chapter 9): a list of (key, value) pairs, then one of its keys.

The answer is the value stored with the query key; chance is ``1 / n_vals``. Each list
has distinct keys out of ``n_keys`` and values out of ``n_vals``. With ``split="train"``
every list's values sum to an even number and with ``split="test"`` to an odd one, so
held-out lists never appear in training, by construction (``split=None``: no parity).

    gen = torch.Generator().manual_seed(0)
    keys, vals, query, answer = recall_batch(64, 8, gen, "train")  # (64, 8) x2, (64,) x2
"""

from __future__ import annotations

import torch

__all__ = ["recall_batch", "RECALL_SPLITS"]

RECALL_SPLITS = ("train", "test", None)


def recall_batch(
    size: int,
    pairs: int,
    gen: torch.Generator,
    split: str | None = "train",
    n_keys: int = 64,
    n_vals: int = 16,
):
    """Lists ``keys, vals (size, pairs)``, the query key and its value ``(size,)``.

    ``split``: ``"train"`` (even sum of values), ``"test"`` (odd) or None (any)."""
    if split not in RECALL_SPLITS:
        raise ValueError(f"split must be one of {RECALL_SPLITS}, got {split!r}")
    if split is not None and pairs < 2:
        raise ValueError("pairs must be >= 2 (one pair is changed to set the parity)")
    if not 1 <= pairs <= n_keys:
        raise ValueError(f"pairs must be in [1, n_keys = {n_keys}], got {pairs}")
    if n_vals < 2 or size < 1:
        raise ValueError(f"need n_vals >= 2 and size >= 1, got {n_vals}, {size}")
    keys = torch.argsort(torch.rand(size, n_keys, generator=gen), -1)[:, :pairs]
    vals = torch.randint(0, n_vals, (size, pairs), generator=gen)
    which = torch.randint(0, pairs, (size,), generator=gen)
    rows = torch.arange(size)
    if split is not None:
        parity = vals.sum(-1) % 2  # (size,)
        flip = parity != (0 if split == "train" else 1)
        other = (which + 1) % pairs  # change a pair that is not the one asked for
        vals[rows[flip], other[flip]] ^= 1  # keeps the value in [0, n_vals)
    return keys, vals, keys[rows, which], vals[rows, which]
