"""Real English–French sentence pairs from Tatoeba, shipped with the package.

The file ``eng_fra.tsv.gz`` beside this module holds 18,065 short pairs (English tab
French) from the Tatoeba project, as compiled by ManyThings.org; licence CC BY 2.0 FR.
``DATA_CARD.md`` in this folder says where the file came from, how it was cut, its
checksum and its attribution. Nothing is downloaded: :func:`load_eng_fra` reads the
packaged file.

Held-out data is held out by construction (:func:`eng_fra_split`):

* every pair goes to the split that a fixed hash of its **normalised English** picks
  (lower case, punctuation and spacing removed: ``"I'm OK."`` and ``"i'm ok!"`` share
  one key), so an English sentence in training never appears in validation or test,
  in any spelling;
* a validation or test pair whose **normalised French** also occurs in a training pair
  is dropped, so the held-out sets share neither side with training.

Typical use (chapter 1)::

    task = EngFraTask(max_words=5)              # training pairs, word tokens
    test = task.with_split("test")              # same vocabularies, held-out pairs
    for batch in task.stream(64, seed=0): ...   # endless, reproducible
    test.groups()                               # [(src tokens, [reference tokens, ...])]
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from importlib import resources

from ..seeding import python_rng
from ..vocab import Vocab, length_range
from .tasks import Task

__all__ = [
    "EngFraTask",
    "load_eng_fra",
    "normalize",
    "sentence_key",
    "tokenize",
    "detokenize",
    "eng_fra_split",
    "eng_fra_splits",
    "SPLITS",
]

SPLITS = ("train", "val", "test")
ENG_FRA_FILE = "eng_fra.tsv.gz"
# sha256 of the uncompressed file (DATA_CARD.md); tests/test_data_real.py checks it
ENG_FRA_SHA256 = "c52ae3c5a2f6b3c96d985aad8e2f1aab814c6701cfa9face467989069624bcaa"
_HELD_OUT = 0.1  # the share of English keys in "val", and again in "test"


def read_packaged(name: str) -> str:
    """The text of a gzip-compressed data file shipped in ``attnlab/data``."""
    raw = resources.files("attnlab.data").joinpath(name).read_bytes()
    return gzip.decompress(raw).decode("utf-8")


@functools.lru_cache(maxsize=1)
def load_eng_fra() -> tuple[tuple[str, str], ...]:
    """All pairs ``(english, french)`` as written in the shipped file (its order)."""
    pairs = []
    for n, line in enumerate(read_packaged(ENG_FRA_FILE).splitlines(), 1):
        parts = line.split("\t")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise ValueError(f"{ENG_FRA_FILE} line {n}: expected 'english<TAB>french'")
        pairs.append((parts[0], parts[1]))
    return tuple(pairs)


_QUOTES = str.maketrans({"’": "'", "‘": "'", "`": "'", "\u202f": " ", "\xa0": " "})


def normalize(text: str) -> str:
    """Unicode NFC, typographic apostrophes and spaces made plain, lower case, spaces
    collapsed: ``"Je l’ai vu\u202f!"`` -> ``"je l'ai vu !"``."""
    text = unicodedata.normalize("NFC", text).translate(_QUOTES).lower()
    return " ".join(text.split())


def sentence_key(text: str) -> str:
    """The key that decides near-duplicates: :func:`normalize`, then only the words
    (letters, digits, apostrophes inside words), one space apart."""
    return " ".join(re.findall(r"\w+(?:'\w+)*", normalize(text)))


_TOKEN = {
    # English: "don't" -> "don", "'t"; "tom's" -> "tom", "'s"
    "en": re.compile(r"\w+|'\w+|[^\w\s]"),
    # French: elision stays on the first word: "j'ai" -> "j'", "ai"; "qu'il" -> "qu'", "il"
    "fr": re.compile(r"\w+'|\w+|[^\w\s]"),
}


def tokenize(text: str, lang: str) -> list[str]:
    """Word tokens of a sentence (``lang`` ``"en"`` or ``"fr"``), after :func:`normalize`.

    Punctuation marks are tokens of their own; hyphens split words
    (``"est-ce"`` -> ``"est"``, ``"-"``, ``"ce"``).
    """
    if lang not in _TOKEN:
        raise ValueError(f"tokenize: lang must be 'en' or 'fr', got {lang!r}")
    return _TOKEN[lang].findall(normalize(text))


def detokenize(tokens: Sequence[str], lang: str = "fr") -> str:
    """Tokens -> a readable sentence (the inverse of :func:`tokenize` up to spacing)."""
    out = ""
    for tok in tokens:
        glue = (
            not out
            or out.endswith(("'", "-"))
            or tok in {".", ",", "-", ")"}
            or (lang == "en" and tok in {"!", "?", ";", ":"})
            or (lang == "en" and tok.startswith("'"))
        )
        out += tok if glue else " " + tok
    return out


def eng_fra_split(english: str) -> str:
    """The split (``"train"`` 80 %, ``"val"`` 10 %, ``"test"`` 10 %) that an English
    sentence's key falls in: a BLAKE2 hash of :func:`sentence_key`, the same on every
    machine. Before the French check of :func:`eng_fra_splits`."""
    key = sentence_key(english).encode()
    u = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2**64
    return "val" if u < _HELD_OUT else "test" if u < 2 * _HELD_OUT else "train"


@functools.lru_cache(maxsize=1)
def eng_fra_splits() -> dict[str, tuple[tuple[str, str], ...]]:
    """The shipped pairs in three disjoint splits (see the module docstring).

    A held-out pair is dropped when its French key also belongs to a training pair, so
    no English key and no French key is shared between ``"train"`` and ``"val"`` or
    ``"test"``. Computed on the whole file, before any length filter.
    """
    out: dict[str, list[tuple[str, str]]] = {s: [] for s in SPLITS}
    for en, fr in load_eng_fra():
        out[eng_fra_split(en)].append((en, fr))
    seen_fr = {sentence_key(fr) for _, fr in out["train"]}
    for split in ("val", "test"):
        out[split] = [p for p in out[split] if sentence_key(p[1]) not in seen_fr]
    return {s: tuple(v) for s, v in out.items()}


class EngFraTask(Task):
    """Translate short real English sentences into French, word by word tokens.

    Parameters
    ----------
    max_words : the longest English sentence kept, in tokens (punctuation counts);
        an int ``n`` keeps 1..n, or a pair ``(lo, hi)``.
    max_fr : the longest French sentence kept, in tokens (None: no limit).
    min_count : a word enters a vocabulary when it occurs at least this often in the
        training pairs (of these lengths); rarer words read as ``<unk>``.
    split : which pairs to draw (``"train"``, ``"val"`` or ``"test"``); the
        vocabularies always come from the training pairs.
    known_only : drop the *training* pairs that contain a word outside the
        vocabularies (so the model never learns to write ``<unk>``); held-out pairs
        are all kept, unknown words included.
    """

    name = "eng-fra"

    def __init__(
        self,
        max_words=6,
        max_fr: int | None = 8,
        min_count: int = 2,
        split: str = "train",
        seed: int = 0,
        known_only: bool = True,
        _vocabs: tuple[Vocab, Vocab] | None = None,
    ):
        lengths = (1, max_words) if isinstance(max_words, int) else max_words
        super().__init__(lengths, seed)
        if split not in SPLITS:
            raise ValueError(
                f"EngFraTask: split must be one of {SPLITS}, got {split!r}"
            )
        if max_fr is not None and max_fr < 1:
            raise ValueError(f"EngFraTask: max_fr must be >= 1 or None, got {max_fr}")
        self.max_fr, self.min_count, self.split = max_fr, min_count, split
        self.known_only = known_only
        self.src_vocab, self.tgt_vocab = _vocabs or self._build_vocabs()
        self.examples = self._examples(split)
        if known_only and split == "train":
            sv, tv = self.src_vocab, self.tgt_vocab
            self.examples = [
                (s, t)
                for s, t in self.examples
                if all(w in sv for w in s) and all(w in tv for w in t)
            ]
        if not self.examples:
            raise ValueError(f"EngFraTask: no {split} pairs of {self.lengths} words")
        refs: dict[tuple[str, ...], list[list[str]]] = {}
        for src, tgt in self.examples:
            refs.setdefault(tuple(src), []).append(tgt)
        self._refs = refs

    def _examples(self, split: str) -> list[tuple[list[str], list[str]]]:
        lo, hi = self.lengths
        out = []
        for en, fr in eng_fra_splits()[split]:
            src, tgt = tokenize(en, "en"), tokenize(fr, "fr")
            if lo <= len(src) <= hi and (
                self.max_fr is None or len(tgt) <= self.max_fr
            ):
                out.append((src, tgt))
        return out

    def _build_vocabs(self) -> tuple[Vocab, Vocab]:
        train = self._examples("train")
        vocabs = []
        for side in (0, 1):
            counts = Counter(t for pair in train for t in pair[side])
            keep = sorted(t for t, c in counts.items() if c >= self.min_count)
            vocabs.append(Vocab(sorted(keep, key=lambda t: -counts[t])))
        return vocabs[0], vocabs[1]

    def with_split(self, split: str) -> EngFraTask:
        """The same task (same lengths and vocabularies) drawing from another split."""
        return EngFraTask(
            self.lengths,
            self.max_fr,
            self.min_count,
            split,
            self.seed,
            self.known_only,
            _vocabs=(self.src_vocab, self.tgt_vocab),
        )

    def pairs(self, n: int, lengths=None, seed: int | None = None):
        """``n`` pairs drawn with replacement from this split (English length in
        ``lengths``, default all kept lengths); ``seed=None`` continues the task's own
        random stream."""
        rng = self.rng if seed is None else python_rng(seed)  # ATTNLAB_SEED moves it
        lo, hi = length_range(lengths if lengths is not None else self.lengths)
        pool = [p for p in self.examples if lo <= len(p[0]) <= hi]
        if not pool:
            raise ValueError(f"EngFraTask: no {self.split} pairs of {lo}..{hi} words")
        return [rng.choice(pool) for _ in range(n)]

    def groups(self) -> list[tuple[list[str], list[list[str]]]]:
        """Every distinct source of this split with all its reference translations."""
        return [(list(src), refs) for src, refs in self._refs.items()]

    def references(self, src_tokens: Sequence[str]) -> list[list[str]]:
        """The French translations of a source in this split ([] if it has none)."""
        return self._refs.get(tuple(src_tokens), [])

    def tokenize(self, text: str) -> list[str]:
        return tokenize(text, "en")

    def target(self, src_tokens: Sequence[str]) -> list[str]:
        refs = self.references(src_tokens)
        return list(refs[0]) if refs else []

    def join(self, tokens: Sequence[str]) -> str:
        return detokenize(tokens, "fr")

    def __repr__(self) -> str:
        return (
            f"EngFraTask(split={self.split!r}, {len(self.examples)} pairs, "
            f"english {self.lengths[0]}-{self.lengths[1]} tokens, src_vocab="
            f"{len(self.src_vocab)}, tgt_vocab={len(self.tgt_vocab)})"
        )
