"""Token vocabularies and the length-range helper shared by the task modules.

:mod:`attnlab.data` (translation-like tasks) and :mod:`attnlab.rationales`
(classification tasks with rationales) both build on these; they live here so that
neither of those modules has to import the other (each imports on its own).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["PAD", "BOS", "EOS", "UNK", "SPECIALS", "Vocab"]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3 in every vocabulary


class Vocab:
    """Token <-> id map with ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3."""

    def __init__(self, tokens: Sequence[str]):
        extra = [t for t in dict.fromkeys(tokens) if t not in SPECIALS]
        self.itos: list[str] = list(SPECIALS) + extra
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {' '.join(self.itos[:12])}{' ...' * (len(self) > 12)})"

    def encode(self, tokens: Sequence[str], bos: bool = False, eos: bool = False):
        """Tokens -> list of ids (unknown tokens -> ``<unk>``), optionally framed."""
        if isinstance(tokens, str):
            raise TypeError(
                f"Vocab.encode expects a list of tokens, got the string {tokens!r}; "
                "use task.tokenize(text) first"
            )
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def decode(self, ids, strip: bool = True) -> list[str]:
        """Ids -> tokens. With ``strip``, drop ``<bos>``/``<pad>`` and stop at ``<eos>``."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"Vocab.decode expects 1-D ids, got {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if strip and i == self.eos_id:
                break
            if strip and i in (self.pad_id, self.bos_id):
                continue
            out.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return out


def length_range(lengths) -> tuple[int, int]:
    lo, hi = (lengths, lengths) if isinstance(lengths, int) else tuple(lengths)
    if not (isinstance(lo, int) and isinstance(hi, int)) or lo < 1 or hi < lo:
        raise ValueError(
            f"lengths must be an int >= 1 or a pair lo <= hi, got {lengths}"
        )
    return lo, hi
