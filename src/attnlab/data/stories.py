"""Seeded synthetic stories: the character-level text of the shipped LMs (chapter 14).

A *story* introduces three names (random 3-5-letter strings), then tells 4-7 sentences
about them from a few templates (``"ana gave bo a cup ."``, ``"kit went to the park
."``), so a model gains by copying names from earlier in its context. Text is lower-case
letters, space and full stop; the vocabulary is ``<bos>`` (id 0) and those 28
characters (:data:`VOCAB`, :func:`encode`, :func:`decode`).

Held out by construction: every name of a ``"train"`` story starts with a letter of
``a..l``, every name of a ``"heldout"`` story with ``m..z``, so no held-out story
shares a name with any training story; the two splits also draw from different seed
streams (:data:`HELDOUT_SEED_OFFSET`).

    ids = stream(torch.Generator().manual_seed(0), 256, split="heldout")  # (256,)
    prompts = heldout_prompts(8, 128, seed=0)                            # (8, 128)
"""

from __future__ import annotations

import torch

from ..seeding import generator
from ..validation import integer

__all__ = [
    "CHARS",
    "VOCAB",
    "BOS",
    "encode",
    "decode",
    "story",
    "stream",
    "heldout_prompts",
    "HELDOUT_SEED_OFFSET",
    "TEMPLATE_WORDS",
]

CHARS = " .abcdefghijklmnopqrstuvwxyz"
BOS = 0
VOCAB = 1 + len(CHARS)  # 29
HELDOUT_SEED_OFFSET = 1_000_003
_TRAIN_FIRST = "abcdefghijkl"
_HELDOUT_FIRST = "mnopqrstuvwxyz"
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_OBJECTS = ("cup", "book", "key", "map", "hat", "coin", "lamp", "box")
_VERBS = ("met", "saw", "called", "helped", "found")
_PLACES = ("park", "shop", "river", "hill", "school")
_SPLITS = ("train", "heldout")
TEMPLATE_WORDS = frozenset(
    ("and", "gave", "a", "went", "to", "the", ".", *_OBJECTS, *_VERBS, *_PLACES)
)  # every word of a story that is not a name


def encode(text: str) -> list[int]:
    """Character ids (``<bos>`` is not added)."""
    try:
        return [1 + CHARS.index(c) for c in text]
    except ValueError:
        bad = next(c for c in text if c not in CHARS)
        raise ValueError(
            f"encode: character {bad!r} is not in the vocabulary"
        ) from None


def decode(ids) -> str:
    """Text of ids (a list or a 1-d tensor); ``<bos>`` is written ``|``."""
    out = []
    for i in ids.tolist() if isinstance(ids, torch.Tensor) else ids:
        i = int(i)
        if not 0 <= i < VOCAB:
            raise ValueError(f"decode: id {i} is outside the vocabulary [0, {VOCAB})")
        out.append("|" if i == BOS else CHARS[i - 1])
    return "".join(out)


def _pick(gen: torch.Generator, seq):
    return seq[int(torch.randint(0, len(seq), (1,), generator=gen))]


def _name(gen: torch.Generator, split: str) -> str:
    first = _HELDOUT_FIRST if split == "heldout" else _TRAIN_FIRST
    n = 3 + int(torch.randint(0, 3, (1,), generator=gen))
    return _pick(gen, first) + "".join(_pick(gen, _LETTERS) for _ in range(n - 1))


def _split(split: object) -> str:
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    return str(split)


def story(gen: torch.Generator, split: str = "train") -> str:
    """One story (ends with a space): three names, then 4-7 template sentences."""
    split = _split(split)
    names = [_name(gen, split) for _ in range(3)]
    out = [f"{names[0]} and {names[1]} and {names[2]} ."]
    for _ in range(4 + int(torch.randint(0, 4, (1,), generator=gen))):
        a, b = _pick(gen, names), _pick(gen, names)
        kind = int(torch.randint(0, 3, (1,), generator=gen))
        if kind == 0:
            out.append(f"{a} gave {b} a {_pick(gen, _OBJECTS)} .")
        elif kind == 1:
            out.append(f"{a} {_pick(gen, _VERBS)} {b} .")
        else:
            out.append(f"{a} went to the {_pick(gen, _PLACES)} .")
    return " ".join(out) + " "


def stream(gen: torch.Generator, length: int, split: str = "train") -> torch.Tensor:
    """``<bos>`` then whole stories in a row, cut to ``length`` ids: (length,) int64."""
    length = integer(length, "length", "stream", low=1)
    split = _split(split)
    ids = [BOS]
    while len(ids) < length:
        ids += encode(story(gen, split))
    return torch.tensor(ids[:length])


def heldout_prompts(n: int, length: int, seed: int = 0) -> torch.Tensor:
    """``n`` held-out streams of ``length`` ids, (n, length) int64: names never seen in
    training, from the held-out seed stream (``seed + HELDOUT_SEED_OFFSET``)."""
    n = integer(n, "n", "heldout_prompts", low=1)
    length = integer(length, "length", "heldout_prompts", low=1)
    seed = integer(seed, "seed", "heldout_prompts", low=0)
    gen = generator(seed + HELDOUT_SEED_OFFSET)
    return torch.stack([stream(gen, length, "heldout") for _ in range(n)])
