"""What every toy task shares (:class:`Task`, :class:`Batch`, :func:`collate`), and the
reversal task of chapters 1 and 3."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from ..masking import padding_mask
from ..seeding import python_rng, unshifted
from ..vocab import Vocab, length_range


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
        self.lengths = length_range(lengths)
        self.seed = seed
        self.rng = python_rng(seed)
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
        rng = self.rng if seed is None else python_rng(seed)  # ATTNLAB_SEED moves it
        return self._draw(rng, n, lengths)

    def _draw(self, rng: random.Random, n: int, lengths) -> list:
        lo, hi = length_range(lengths if lengths is not None else self.lengths)
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
        rng = python_rng(seed)  # ATTNLAB_SEED moves it (attnlab.seeding)
        lo, hi = length_range(lengths if lengths is not None else self.lengths)
        while True:
            span = rng.randint(lo, hi) if bucket else (lo, hi)
            b_seed = rng.randrange(
                2**31
            )  # derived from a shifted rng: not shifted again
            with unshifted():  # pairs() may be a task's own (EngFraTask's)
                batch = self.batch(batch_size, span, seed=b_seed, device=device)
            yield batch

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

    def sample(self, rng: random.Random, length: int) -> tuple[list[str], list[str]]:
        if self.distinct:
            if length > len(self.symbols):
                raise ValueError(f"no {length} distinct letters among {self.symbols}")
            src = rng.sample(self.symbols, length)
        else:
            src = [rng.choice(self.symbols) for _ in range(length)]
        return src, self.target(src)

    def target(self, src_tokens: Sequence[str]) -> list[str]:
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

    def tokenize(self, text: str) -> list[str]:
        return [c for c in text.lower() if not c.isspace()]

    def join(self, tokens: Sequence[str]) -> str:
        return "".join(tokens)
