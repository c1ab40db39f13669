"""Classification tasks with known rationales (chapter 11, "Is attention explanation?").

Each label is a function of a few marked tokens, so an importance measure (attention,
a gradient, leave-one-out) can be scored against the truth, not only against another
measure. Re-exported by :mod:`attnlab.data`.

* ``focus``: the label is the polarity of the word right after ``"overall"``; one to
  three other sentiment words are distractors. Rationale: ``"overall"`` and that word.
* ``count``: the label is 1 iff there are more positive than negative words (one to four
  of them, never tied). Rationale: every sentiment word.

Splits are disjoint by construction: a sequence's split is decided by a fixed hash of
its tokens, so no sequence can be in two splits, whatever the seeds::

    train = rationale_task("focus", "train", n=2000, seed=0)
    test = rationale_task("focus", "test", n=300, seed=0)
    train.ids, train.mask, train.labels, train.rationale   # (N, T) (N, T) (N,) (N, T)
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .registry import Registry
from .seeding import generator, python_rng
from .vocab import Vocab, length_range

__all__ = [
    "FOCUS",
    "POSITIVE",
    "NEGATIVE",
    "NEUTRAL",
    "RATIONALE_VOCAB",
    "RATIONALE_TASKS",
    "RationaleData",
    "rationale_task",
    "rationale_split",
    "minibatches",
]

FOCUS = "overall"  # in the "focus" task the word after it decides the label
POSITIVE = (
    "good great superb lovely fine nice brilliant excellent wonderful charming "
    "moving witty gripping fresh clever warm stunning solid tender vivid"
).split()
NEGATIVE = (
    "bad awful poor dull boring weak terrible horrible ugly bland "
    "clumsy tedious messy flat lazy silly shallow stale sloppy dreary"
).split()
NEUTRAL = (
    "the a an this that it is was and or of to in on at with for by from as film "
    "movie story plot cast actor actress director scene scenes script ending music "
    "camera screen hour minutes night day city house car train road river room "
    "table window door friend family mother father child brother sister town "
    "war love money time year week part side end start middle first second third "
    "then later before after while during about around into over under between "
    "some many few most each every other another same such very quite rather "
    "just also still even only again once twice here there where when who which "
    "what how we they he she you i us them his her their our"
).split()
RATIONALE_VOCAB = Vocab([FOCUS, *POSITIVE, *NEGATIVE, *NEUTRAL])
_SENTIMENT = set(POSITIVE) | set(NEGATIVE)


@dataclass
class RationaleData:
    """A padded, labelled set of token sequences and the tokens that decide each label.

    N examples, T positions (the longest sequence; shorter ones padded with ``<pad>``
    = 0 at the end). ``data[idx]`` (an int, slice, list or tensor of indices) is a
    :class:`RationaleData` again, without the columns that are padding in every row.
    """

    ids: torch.Tensor  # (N, T) long token ids of RATIONALE_VOCAB, 0 = <pad>
    mask: torch.Tensor  # (N, T) bool, True on real tokens
    labels: torch.Tensor  # (N,) long, 0 (negative) or 1 (positive)
    rationale: torch.Tensor  # (N, T) bool, True on the tokens the label depends on
    task: str = ""  # "focus" or "count"
    vocab: Vocab = field(default_factory=lambda: RATIONALE_VOCAB)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def __getitem__(self, idx) -> RationaleData:
        if isinstance(idx, int):
            idx = [idx]
        ids, mask = self.ids[idx], self.mask[idx]
        T = max(1, int(mask.sum(1).max()))  # drop columns that are padding everywhere
        return RationaleData(
            ids[:, :T],
            mask[:, :T],
            self.labels[idx],
            self.rationale[idx][:, :T],
            self.task,
            self.vocab,
        )

    def tokens(self, i: int) -> list[str]:
        """The tokens of example ``i`` (no padding)."""
        return [self.vocab.itos[t] for t in self.ids[i, self.mask[i]].tolist()]

    def text(self, i: int) -> str:
        return " ".join(self.tokens(i))


def _focus_example(rng: random.Random, length: int):
    """Label = polarity of the word right after FOCUS; 1-3 distractor sentiment words."""
    label = rng.randrange(2)
    target = rng.choice(POSITIVE if label else NEGATIVE)
    n_distract = rng.randint(1, 3)
    toks = [rng.choice(NEUTRAL) for _ in range(length - 2 - n_distract)]
    toks += [rng.choice(POSITIVE + NEGATIVE) for _ in range(n_distract)]
    rng.shuffle(toks)
    p = rng.randint(0, len(toks))
    toks = toks[:p] + [FOCUS, target] + toks[p:]
    return toks, label, [p, p + 1]


def _count_example(rng: random.Random, length: int):
    """Label = [#positive > #negative] over 1-4 sentiment words (never a tie)."""
    while True:
        k = rng.randint(1, 4)
        n_pos = rng.randint(0, k)
        if 2 * n_pos != k:
            break
    toks = [rng.choice(NEUTRAL) for _ in range(length - k)]
    toks += [rng.choice(POSITIVE) for _ in range(n_pos)]
    toks += [rng.choice(NEGATIVE) for _ in range(k - n_pos)]
    rng.shuffle(toks)
    return toks, int(2 * n_pos > k), [i for i, t in enumerate(toks) if t in _SENTIMENT]


RATIONALE_TASKS = Registry(
    "rationale task", {"focus": _focus_example, "count": _count_example}
)
_SPLITS = {"train": range(2, 10), "val": range(1, 2), "test": range(0, 1)}


def rationale_split(tokens: Sequence[str]) -> str:
    """The one split a sequence belongs to: ``"train"`` (80 % of the hash range),
    ``"val"`` (10 %) or ``"test"`` (10 %), from a CRC-32 of its tokens."""
    bucket = zlib.crc32(" ".join(tokens).encode()) % 10
    return next(s for s, r in _SPLITS.items() if bucket in r)


def rationale_task(
    name: str, split: str = "train", n: int = 2000, seed: int = 0, lengths=(12, 30)
) -> RationaleData:
    """Generate ``n`` examples of the ``"focus"`` or ``"count"`` task, deterministically.

    Sequences are drawn from a generator seeded with ``(name, split, seed)`` and kept
    only if :func:`rationale_split` puts them in ``split``, so train, val and test are
    disjoint whatever the seeds. ``lengths`` = (lo, hi), the inclusive range of
    sequence lengths (lo >= 5). Returns a :class:`RationaleData`.
    """
    example = RATIONALE_TASKS.get(name)  # unknown: a ValueError listing the names
    if split not in _SPLITS:
        raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
    lo, hi = length_range(lengths)
    if lo < 5:
        raise ValueError(f"need lengths >= 5, got {lengths}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    rng = python_rng(f"{name}/{split}/{seed}")  # ATTNLAB_SEED moves it
    seqs: list = []
    labels: list = []
    where: list = []
    while len(seqs) < n:
        toks, label, rat = example(rng, rng.randint(lo, hi))
        if rationale_split(toks) == split:
            seqs.append(toks)
            labels.append(label)
            where.append(rat)
    T = max(map(len, seqs))
    ids = torch.zeros(n, T, dtype=torch.long)
    mask = torch.zeros(n, T, dtype=torch.bool)
    rationale = torch.zeros(n, T, dtype=torch.bool)
    for i, (toks, rat) in enumerate(zip(seqs, where)):
        ids[i, : len(toks)] = torch.tensor(RATIONALE_VOCAB.encode(toks))
        mask[i, : len(toks)] = True
        rationale[i, rat] = True
    return RationaleData(ids, mask, torch.tensor(labels), rationale, name)


def minibatches(
    data: RationaleData, batch_size: int = 64, epochs: int = 1, seed: int = 0
):
    """``(batch, idx)`` pairs: shuffled minibatches of ``data`` and their row indices,
    ``epochs`` passes in an order fixed by ``seed``."""
    g = generator(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(data), generator=g)
        for i in range(0, len(data), batch_size):
            idx = perm[i : i + batch_size]
            yield data[idx], idx
