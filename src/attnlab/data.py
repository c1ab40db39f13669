"""Toy translation tasks, generated on the fly: no downloads, deterministic given a seed.

Two tasks share one interface (:class:`Task`):

==============  =======================================  ================================
task            example (source -> target)               alignment
==============  =======================================  ================================
``reversal``    ``c a f e b`` -> ``b e f a c``           anti-diagonal (last in, first out)
``date``        ``22 November 2026`` -> ``2026-11-22``   non-monotone (year, month, day)
==============  =======================================  ================================

Every sequence is a list of string tokens. A :class:`Vocab` maps tokens to ids and
reserves four special tokens with fixed ids: ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2 and
``<unk>`` 3. A :class:`Batch` holds padded tensors:

* ``src (B, S)`` source ids, padded with ``<pad>``; ``src_lengths (B,)``;
* ``tgt (B, T + 1)`` target ids ``<bos> y_1 ... y_n <eos>`` padded with ``<pad>``, so
  teacher forcing feeds ``tgt_in = tgt[:, :-1]`` and predicts ``tgt_out = tgt[:, 1:]``.

Typical use (chapters 1 and 7)::

    task = attnlab.data.make_task("reversal", lengths=(3, 24), distinct=True)
    for batch in task.stream(batch_size=64, seed=0):   # endless, reproducible
        ...                                            # bucket=True: one length a batch
    batch = task.batch(64, lengths=20, seed=1)         # one batch, every source length 20
    task.decode(batch.tgt[0])                          # -> "string" (stops at <eos>)
    batch.src_mask                                     # (B, S) True on real tokens

Held-out data is held out by construction. Every calendar date belongs to exactly one
of three splits (``"train"`` 80 %, ``"val"`` 10 %, ``"test"`` 10 %), decided by a fixed
hash of the date itself, so a date seen in training in any of its spellings never
appears in the validation (early-stopping) or test sets::

    dates = make_task("date")                 # split="train": the only dates fit sees
    val, test = dates.with_split("val"), dates.with_split("test")
    fit(model, dates.stream(128, seed=0), eval_fn=lambda m: evaluate(m, val)["accuracy"])
    evaluate(model, test, n=1000, seed=99)

Models trained on these batches follow :class:`attnlab.decoding.Seq2SeqModel`
(``model.logits(batch)``, ``model.step(src, src_lengths)``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from .masking import padding_mask
from .rationales import *  # noqa: F403  (re-exported: attnlab.data.rationale_task)
from .rationales import __all__ as _rationale_names
from .vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab, _length_range  # noqa: F401

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "Vocab",
    "Batch",
    "Task",
    "ReversalTask",
    "DateTask",
    "DATE_SPLITS",
    "date_split",
    "make_task",
    "collate",
]


@dataclass
class Batch:
    """A padded batch. Shapes: B examples, S source positions, T + 1 target positions."""

    src: torch.Tensor  # (B, S) source ids, <pad> after each length
    src_lengths: torch.Tensor  # (B,) true source lengths (>= 1)
    tgt: torch.Tensor  # (B, T + 1) <bos> y_1 .. y_n <eos> <pad> ...
    tgt_lengths: torch.Tensor  # (B,) target lengths counting <eos>, not <bos>
    src_tokens: list = field(default_factory=list)  # the source tokens, unpadded
    tgt_tokens: list = field(default_factory=list)  # the target tokens, unframed

    @property
    def tgt_in(self) -> torch.Tensor:
        """Decoder input under teacher forcing: ``<bos> y_1 .. y_n`` (B, T)."""
        return self.tgt[:, :-1]

    @property
    def tgt_out(self) -> torch.Tensor:
        """What the decoder must predict at each step: ``y_1 .. y_n <eos>`` (B, T)."""
        return self.tgt[:, 1:]

    @property
    def src_mask(self) -> torch.Tensor:
        """Boolean (B, S), True on real source tokens (= keys that may be attended)."""
        return padding_mask(self.src_lengths, self.src.shape[1], device=self.src.device)

    def __len__(self) -> int:
        return self.src.shape[0]

    def to(self, device) -> Batch:
        """The same batch with its tensors on ``device``."""
        return Batch(
            self.src.to(device),
            self.src_lengths.to(device),
            self.tgt.to(device),
            self.tgt_lengths.to(device),
            self.src_tokens,
            self.tgt_tokens,
        )


def collate(pairs, src_vocab: Vocab, tgt_vocab: Vocab, device=None) -> Batch:
    """List of ``(src_tokens, tgt_tokens)`` -> padded :class:`Batch`."""
    if not pairs:
        raise ValueError("collate needs at least one (src, tgt) pair")
    src_ids = [src_vocab.encode(s) for s, _ in pairs]
    tgt_ids = [tgt_vocab.encode(t, bos=True, eos=True) for _, t in pairs]
    if min(len(s) for s in src_ids) < 1:
        raise ValueError("every source needs at least one token")
    B, S, T1 = len(pairs), max(map(len, src_ids)), max(map(len, tgt_ids))
    src = torch.full((B, S), Vocab.pad_id, dtype=torch.long)
    tgt = torch.full((B, T1), Vocab.pad_id, dtype=torch.long)
    for b, (s, t) in enumerate(zip(src_ids, tgt_ids)):
        src[b, : len(s)] = torch.tensor(s)
        tgt[b, : len(t)] = torch.tensor(t)
    batch = Batch(
        src,
        torch.tensor([len(s) for s in src_ids]),
        tgt,
        torch.tensor([len(t) - 1 for t in tgt_ids]),
        [list(s) for s, _ in pairs],
        [list(t) for _, t in pairs],
    )
    return batch.to(device) if device is not None else batch


class Task:
    """Base class: a generator of (source tokens, target tokens) pairs.

    Subclasses define ``src_vocab``, ``tgt_vocab``, :meth:`sample` and :meth:`tokenize`.
    ``lengths`` is the default source-length range ``(lo, hi)`` (inclusive) or one int.
    """

    name = "task"

    def __init__(self, lengths=(4, 20), seed: int = 0):
        self.lengths = _length_range(lengths)
        self.seed = seed
        self.rng = random.Random(seed)
        self.src_vocab: Vocab
        self.tgt_vocab: Vocab

    def sample(self, rng: random.Random, length: int) -> tuple[list[str], list[str]]:
        """One example with (about) ``length`` source tokens."""
        raise NotImplementedError

    def tokenize(self, text: str) -> list[str]:
        """A typed source string -> source tokens."""
        raise NotImplementedError

    def target(self, src_tokens: Sequence[str]) -> list[str]:
        """The correct target tokens for a source."""
        raise NotImplementedError

    def pairs(self, n: int, lengths=None, seed: int | None = None):
        """``n`` examples; ``seed=None`` continues the task's own random stream."""
        rng = self.rng if seed is None else random.Random(seed)
        lo, hi = _length_range(lengths if lengths is not None else self.lengths)
        return [self.sample(rng, rng.randint(lo, hi)) for _ in range(n)]

    def batch(
        self, batch_size: int = 64, lengths=None, seed=None, device=None
    ) -> Batch:
        """One padded :class:`Batch` (see :meth:`pairs` for ``lengths`` and ``seed``)."""
        pairs = self.pairs(batch_size, lengths, seed)
        return collate(pairs, self.src_vocab, self.tgt_vocab, device)

    def stream(
        self,
        batch_size: int = 64,
        lengths=None,
        seed: int = 0,
        device=None,
        bucket: bool = False,
    ) -> Iterator[Batch]:
        """An endless, reproducible iterator of batches (same ``seed`` -> same batches).

        With ``bucket=True`` every batch draws one source length and all its examples
        have it: no padding, so recurrent models train about twice as fast.
        """
        rng = random.Random(seed)
        lo, hi = _length_range(lengths if lengths is not None else self.lengths)
        while True:
            span = rng.randint(lo, hi) if bucket else (lo, hi)
            b_seed = rng.randrange(2**31)
            yield self.batch(batch_size, span, seed=b_seed, device=device)

    def encode(self, text_or_tokens, device=None) -> Batch:
        """A batch of one example from a typed string (or a token list)."""
        if isinstance(text_or_tokens, str):
            tokens = self.tokenize(text_or_tokens)
        else:
            tokens = list(text_or_tokens)
        if not tokens:
            raise ValueError(f"{self.name}: empty input {text_or_tokens!r}")
        return collate(
            [(tokens, self.target(tokens))], self.src_vocab, self.tgt_vocab, device
        )

    def decode(self, ids) -> str:
        """Target ids -> a readable string (stops at ``<eos>``)."""
        return self.join(self.tgt_vocab.decode(ids))

    def join(self, tokens: Sequence[str]) -> str:
        """Tokens -> display string."""
        return " ".join(tokens)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(lengths={self.lengths}, src_vocab={len(self.src_vocab)}"
            f", tgt_vocab={len(self.tgt_vocab)})"
        )


class ReversalTask(Task):
    """Reverse a string of letters: ``c a f e b`` -> ``b e f a c``.

    With ``distinct=True`` no letter repeats within a string, so every output token
    has exactly one source position it must come from. Output token ``i`` copies input
    token ``n - 1 - i``: the ideal alignment is the
    anti-diagonal. A model without attention must squeeze the whole string into one
    vector before writing the first output token.
    """

    name = "reversal"

    def __init__(
        self,
        lengths=(4, 20),
        n_symbols: int = 26,
        distinct: bool = False,
        seed: int = 0,
    ):
        super().__init__(lengths, seed)
        if not 2 <= n_symbols <= 26:
            raise ValueError(f"n_symbols must be in 2..26, got {n_symbols}")
        if distinct and self.lengths[1] > n_symbols:
            raise ValueError(
                f"distinct letters: lengths up to {self.lengths[1]} need n_symbols >= "
                f"{self.lengths[1]}, got {n_symbols}"
            )
        self.distinct = distinct
        self.symbols = [chr(ord("a") + i) for i in range(n_symbols)]
        self.src_vocab = self.tgt_vocab = Vocab(self.symbols)

    def sample(self, rng, length):
        if self.distinct:
            if length > len(self.symbols):
                raise ValueError(f"no {length} distinct letters among {self.symbols}")
            src = rng.sample(self.symbols, length)
        else:
            src = [rng.choice(self.symbols) for _ in range(length)]
        return src, self.target(src)

    def target(self, src_tokens):
        return list(reversed(src_tokens))

    @staticmethod
    def alignment(lengths, S: int | None = None) -> torch.Tensor:
        """The ideal attention for reversal: (B, S, S) with ``A[b, i, n_b - 1 - i] = 1``.

        Row ``i`` is output token ``i``; column ``j`` is source position ``j``. Rows
        and columns past a source length ``n_b`` (padding) are zero.
        """
        lengths = torch.as_tensor(lengths)
        if lengths.dim() != 1 or (lengths.numel() and int(lengths.min()) < 0):
            raise ValueError(f"lengths must be a 1-D list of n >= 0, got {lengths}")
        S = int(lengths.max()) if S is None else S
        i = torch.arange(S)[:, None]  # (S, 1) output step
        j = torch.arange(S)[None, :]  # (1, S) source position
        n = lengths[:, None, None]  # (B, 1, 1)
        return ((i + j == n - 1) & (j < n)).float()  # (B, S, S)

    def tokenize(self, text):
        return [c for c in text.lower() if not c.isspace()]

    def join(self, tokens):
        return "".join(tokens)


MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


DATE_SPLITS = ("train", "val", "test")
_HELD_OUT = 0.1  # fraction of all calendar dates in "val", and again in "test"


def date_split(year: int, month: int, day: int) -> str:
    """The split (``"train"``, ``"val"`` or ``"test"``) a calendar date belongs to.

    A fixed function of the date alone (a BLAKE2 hash, identical on every machine and
    Python version), so the three splits partition the calendar: each date is in
    exactly one of them, whatever the format it is written in, the seed or the order
    of sampling. About 80 % of dates are ``"train"``, 10 % ``"val"``, 10 % ``"test"``.
    """
    key = f"{year:04d}-{month:02d}-{day:02d}".encode()
    u = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2**64
    if u < _HELD_OUT:
        return "val"
    if u < 2 * _HELD_OUT:
        return "test"
    return "train"


class DateTask(Task):
    """Rewrite a written date in ISO form: ``22 November 2026`` -> ``2026-11-22``.

    Source tokens are digits, punctuation and month names (one token each, full or
    three-letter): ``2 2 November 2 0 2 6``. Three source formats are mixed, so the
    model must find the year, month and day wherever they are:

    * ``22 November 2026``   (day month year)
    * ``Nov 22 , 2026``      (month day, year)
    * ``22 . 11 . 2026``     (all digits)

    The target is always ``2 0 2 6 - 1 1 - 2 2``: year first, so the alignment crosses
    itself (non-monotone). ``lengths`` is ignored for sampling (dates are 5–10 source
    tokens long); it is kept for the common interface.

    ``split`` says which calendar dates this task draws from (see :func:`date_split`):
    ``"train"`` (the default, so anything trained on a default task never sees a
    held-out date), ``"val"`` for early stopping, ``"test"`` for the final number, or
    ``None`` for all dates (demos only). :meth:`with_split` gives the same task on
    another split; every method that samples (:meth:`pairs`, :meth:`batch`,
    :meth:`stream`, and so :func:`attnlab.train.evaluate`) stays inside the split.
    Typed examples (:meth:`encode`) are taken as given.
    """

    name = "date"
    FORMATS = ("dmy", "mdy", "numeric")

    def __init__(
        self,
        lengths=(5, 10),
        years=(1900, 2099),
        seed: int = 0,
        split: str | None = "train",
    ):
        super().__init__(lengths, seed)
        if split is not None and split not in DATE_SPLITS:
            raise ValueError(
                f"split must be one of {DATE_SPLITS} or None (all dates), got {split!r}"
            )
        self.split = split
        self.years = years
        digits = [str(d) for d in range(10)]
        words = MONTHS + [m[:3] for m in MONTHS]
        self.src_vocab = Vocab(digits + words + [",", "."])
        self.tgt_vocab = Vocab(digits + ["-"])

    def with_split(self, split: str | None) -> DateTask:
        """The same task (same vocabularies and years) drawing from another split."""
        return DateTask(self.lengths, self.years, self.seed, split=split)

    def split_of(self, src_tokens: Sequence[str]) -> str:
        """The split of the calendar date a source denotes (in any of its formats)."""
        y, m, d = "".join(self.target(src_tokens)).split("-")
        return date_split(int(y), int(m), int(d))

    def sample(self, rng, length=None):
        while True:  # rejection sampling: same distribution, restricted to the split
            y = rng.randint(*self.years)
            m = rng.randint(1, 12)
            d = rng.randint(1, _DAYS[m - 1])
            if self.split is None or date_split(y, m, d) == self.split:
                break
        fmt = rng.choice(self.FORMATS)
        short = rng.random() < 0.5
        month = MONTHS[m - 1][:3] if short else MONTHS[m - 1]
        day, year = list(str(d)), list(str(y))
        if fmt == "dmy":
            src = day + [month] + year
        elif fmt == "mdy":
            src = [month] + day + [","] + year
        else:
            src = day + ["."] + list(f"{m:02d}") + ["."] + year
        return src, self.target(src)

    def pairs(self, n, lengths=None, seed=None):
        rng = self.rng if seed is None else random.Random(seed)
        return [self.sample(rng) for _ in range(n)]

    def target(self, src_tokens):
        toks = list(src_tokens)
        names = {w: i + 1 for i, m in enumerate(MONTHS) for w in (m, m[:3])}
        month = next((names[t] for t in toks if t in names), None)
        if month is not None:  # dmy or mdy: digits before the comma/year are the day
            rest = [t for t in toks if t not in names]
            if "," in rest:
                i = rest.index(",")
                day, year = rest[:i], rest[i + 1 :]
            else:
                day, year = rest[:-4], rest[-4:]
        else:
            parts = "".join(toks).split(".")
            if len(parts) != 3:
                raise ValueError(f"not a date this task knows: {' '.join(toks)!r}")
            day, month, year = list(parts[0]), int(parts[1]), list(parts[2])
        day_s = "".join(day).zfill(2)
        return list("".join(year)) + ["-"] + list(f"{month:02d}") + ["-"] + list(day_s)

    def tokenize(self, text):
        out = []
        for word in text.replace(",", " , ").replace(".", " . ").split():
            if word.isdigit():
                out.extend(word)
            else:
                key = word[:1].upper() + word[1:].lower()
                out.append(key)
        return out

    def join(self, tokens):
        return "".join(tokens)

    def __repr__(self) -> str:
        return (
            f"DateTask(split={self.split!r}, src_vocab={len(self.src_vocab)}, "
            f"tgt_vocab={len(self.tgt_vocab)})"
        )


TASKS = {"reversal": ReversalTask, "date": DateTask}


def make_task(name: str, **kwargs) -> Task:
    """Build a task by name: ``reversal`` or ``date`` (keyword arguments go to it)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name](**kwargs)


# Classification tasks with known rationales (chapter 11) live in their own module and
# are re-exported here: attnlab.data.rationale_task("focus", "test").
__all__ += _rationale_names
