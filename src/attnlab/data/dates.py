"""The date-normalisation task ("3 March 2001" -> "2001-03-03") with held-out dates
disjoint from training by construction, and the tasks by name (:func:`make_task`)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from ..registry import Registry
from ..vocab import Vocab
from .tasks import ReversalTask, Task

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

    def sample(
        self, rng: random.Random, length: int | None = None
    ) -> tuple[list[str], list[str]]:
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

    def _draw(self, rng: random.Random, n: int, lengths) -> list:
        return [self.sample(rng) for _ in range(n)]  # a date has its own length

    def target(self, src_tokens: Sequence[str]) -> list[str]:
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

    def tokenize(self, text: str) -> list[str]:
        out: list[str] = []
        for word in text.replace(",", " , ").replace(".", " . ").split():
            if word.isdigit():
                out.extend(word)
            else:
                key = word[:1].upper() + word[1:].lower()
                out.append(key)
        return out

    def join(self, tokens: Sequence[str]) -> str:
        return "".join(tokens)

    def __repr__(self) -> str:
        return (
            f"DateTask(split={self.split!r}, src_vocab={len(self.src_vocab)}, "
            f"tgt_vocab={len(self.tgt_vocab)})"
        )


TASKS: Registry[type[Task]] = Registry(
    "task", {"reversal": ReversalTask, "date": DateTask}
)


def make_task(name: str, **kwargs) -> Task:
    """Build a task by name: ``reversal`` or ``date`` (keyword arguments go to it)."""
    return TASKS.get(name)(**kwargs)
