"""Chapter 4's probe of trained date models: which output digits are copies, and how
often a sparse model writes a copied digit with zero weight on every source token that
shows it ("blind").

The date task's target is ``Y Y Y Y - M M - D D``. Only some of its digits are copied
from the source: the four year digits, the day's digits, and the month's two digits
when the source writes the month as a number (``5 . 07 . 1999``). A month written from
its name (``November`` -> ``1 1``) is computed, and so is the leading ``0`` of a
one-digit day: for those a zero weight on the source's digits is the right reading,
not a blind copy. :func:`copy_sources` says which source token each target digit
copies; :func:`blind_copies` counts only those digits.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["FIELDS", "copy_sources", "blind_copies"]

FIELDS = ("year", "month", "day")  # the fields of the target, in its order
_FIELD_OF = ["year"] * 4 + [None] + ["month"] * 2 + [None] + ["day"] * 2


def copy_sources(src: Sequence[str]) -> list[int | None]:
    """For each of the 10 target tokens, the source position it copies, or None.

    ``src`` is a date task's source without padding, in one of its three formats
    (``22 November 2026``, ``Nov 22 , 2026``, ``22 . 11 . 2026``). The dashes, a
    month computed from its name and a one-digit day's leading zero copy nothing.
    """
    src = list(src)
    named = [i for i, t in enumerate(src) if t.isalpha()]
    if named:  # the month is a name: computed, not copied
        m = named[0]
        month: list[int | None] = [None, None]
        if "," in src:  # Nov 22 , 2026
            c = src.index(",")
            day, year = list(range(m + 1, c)), list(range(c + 1, c + 5))
        else:  # 22 November 2026
            day, year = list(range(m)), list(range(m + 1, m + 5))
    else:  # 22 . 11 . 2026: every digit is copied
        d1 = src.index(".")
        d2 = src.index(".", d1 + 1)
        day, month, year = (
            list(range(d1)),
            [d1 + 1, d1 + 2],
            list(range(d2 + 1, d2 + 5)),
        )
    if len(day) == 1:  # the target writes 05: its 0 is padding
        day = [None, *day]
    return [*year, None, *month, None, *day]


@torch.no_grad()
def blind_copies(model, task, probe) -> dict:
    """Decode ``probe`` greedily; count the copied digits written blind.

    A digit counts when the model writes it correctly and the target copies it from
    the source (:func:`copy_sources`); it is *blind* when every source token showing
    that digit has weight exactly zero at that output step.

    Returns
    -------
    dict with ``rate`` (blind / copied), ``copied`` and ``blind`` (counts), per field
    ``by_field[f] = {"copied", "blind", "rate"}`` (``f`` in :data:`FIELDS`), and
    ``computed``: the correct digits that copy nothing (a month's name, a day's
    padding zero), left out of the count.
    """
    ids, w = model.greedy(probe.src, probe.src_lengths, max_len=probe.tgt.shape[1] + 5)
    by_field = {f: {"copied": 0, "blind": 0} for f in FIELDS}
    computed = 0
    for b in range(len(ids)):
        src, gold = probe.src_tokens[b], probe.tgt_tokens[b]  # unpadded tokens
        out = task.tgt_vocab.decode(ids[b], strip=False)
        sources = copy_sources(src)
        for t, tok in enumerate(gold):
            if t >= len(out) or out[t] != tok or not tok.isdigit():
                continue  # wrong, or a dash
            if sources[t] is None:
                computed += 1
                continue
            showing = [j for j, s in enumerate(src) if s == tok]  # sources[t] is one
            field = by_field[_FIELD_OF[t]]
            field["copied"] += 1
            field["blind"] += bool((w[b, t, showing] == 0).all())
    for f in by_field.values():
        f["rate"] = f["blind"] / f["copied"] if f["copied"] else float("nan")
    copied = sum(f["copied"] for f in by_field.values())
    blind = sum(f["blind"] for f in by_field.values())
    return {
        "rate": blind / copied,
        "copied": copied,
        "blind": blind,
        "by_field": by_field,
        "computed": computed,
    }
