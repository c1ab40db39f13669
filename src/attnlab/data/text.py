"""A public-domain English text for character language models: Tiny Shakespeare.

``tinyshakespeare.txt.gz`` beside this module (see ``DATA_CARD.md``) is read offline by
:func:`load_shakespeare`. :func:`char_batches` cuts it into (input, target) windows
where the target is the input shifted by one character, from one of two parts that do
not overlap: ``"train"`` (the first 90 % of the characters) and ``"val"`` (the rest).

Typical use::

    text = load_shakespeare()
    vocab = CharVocab(text)
    for x, y in char_batches(text, vocab, batch_size=32, length=64, seed=0):
        ...  # x, y: (B, T) ids; y[:, t] is the character after x[:, t]
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch

from ..seeding import python_rng
from .tatoeba import read_packaged

__all__ = ["load_shakespeare", "CharVocab", "char_split", "char_batches"]

SHAKESPEARE_FILE = "tinyshakespeare.txt.gz"
# sha256 of the uncompressed file (DATA_CARD.md); tests/test_data_real.py checks it
SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TRAIN_SHARE = 0.9


@functools.lru_cache(maxsize=1)
def load_shakespeare() -> str:
    """The whole text (1,115,394 characters)."""
    return read_packaged(SHAKESPEARE_FILE)


class CharVocab:
    """Characters <-> ids, sorted by code point (ids 0..V-1; no special tokens)."""

    def __init__(self, text: str):
        if not text:
            raise ValueError("CharVocab needs a non-empty text")
        self.itos = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> torch.Tensor:
        """A string -> ids (1-D long tensor); an unknown character raises."""
        missing = sorted(set(text) - self.stoi.keys())
        if missing:
            raise ValueError(
                f"CharVocab.encode: characters not in the vocabulary: {missing}"
            )
        return torch.tensor([self.stoi[c] for c in text], dtype=torch.long)

    def decode(self, ids) -> str:
        """Ids (a 1-D tensor or list) -> the string."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"CharVocab.decode expects 1-D ids, got {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        return "".join(self.itos[int(i)] for i in ids)


def char_split(text: str, split: str) -> tuple[int, int]:
    """The character range ``[start, stop)`` of ``split`` (``"train"`` or ``"val"``)."""
    cut = int(len(text) * TRAIN_SHARE)
    if split == "train":
        return 0, cut
    if split == "val":
        return cut, len(text)
    raise ValueError(f"char_split: split must be 'train' or 'val', got {split!r}")


def char_batches(
    text: str,
    vocab: CharVocab,
    batch_size: int = 32,
    length: int = 64,
    split: str = "train",
    seed: int = 0,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless, reproducible batches ``(x, y)`` of shape ``(B, T)`` from one split.

    Each row is a window of ``length + 1`` consecutive characters that lies wholly
    inside the split's range; ``x`` is its first ``length`` characters and ``y`` its
    last ``length`` (the next character at every position). Same seed, same batches.
    """
    if batch_size < 1 or length < 1:
        raise ValueError(
            f"batch_size and length must be >= 1, got {batch_size}, {length}"
        )
    start, stop = char_split(text, split)
    if stop - start < length + 1:
        raise ValueError(f"char_batches: the {split} part is shorter than {length + 1}")
    ids = vocab.encode(text[start:stop])  # (N,)
    rng = python_rng(seed)  # ATTNLAB_SEED moves it (attnlab.seeding)
    last = len(ids) - (length + 1)  # the last start whose window fits in the split
    while True:
        starts = torch.tensor([rng.randint(0, last) for _ in range(batch_size)])
        rows = starts[:, None] + torch.arange(length + 1)[None, :]  # (B, T + 1)
        window = ids[rows]  # (B, T + 1)
        yield window[:, :-1], window[:, 1:]
