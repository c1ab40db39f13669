"""Scores of translations against reference translations: corpus BLEU and chrF.

Both take the hypotheses and, for each, a list of references (several translations of
one sentence are common in Tatoeba); sentences are token lists (BLEU) or strings
(chrF). The numbers are percentages, 0 to 100, as papers report them.

* :func:`corpus_bleu` (Papineni et al., 2002): n-gram precisions for n = 1..4, each
  n-gram's count clipped at its largest count in any one reference, summed over the
  corpus; their geometric mean times the brevity penalty ``exp(1 - r/c)`` when the
  hypotheses are shorter in total (``c``) than the references closest in length
  (``r``). No smoothing: a corpus without a single matching 4-gram scores 0.
* :func:`corpus_chrf` (Popović, 2015): character n-grams for n = 1..6 with spaces
  removed; precision and recall of each order from counts summed over the corpus,
  averaged over the orders that hypothesis and reference both have, then ``F_beta``
  with ``beta = 2`` (recall weighs more). With several references, each sentence
  counts against the one it matches best (its own chrF). These are sacreBLEU's
  conventions (chrF, ``eps_smoothing=False``); ``tests/test_data_metrics.py`` compares.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

__all__ = ["corpus_bleu", "corpus_chrf", "ngrams"]


def ngrams(seq: Sequence, n: int) -> Counter:
    """Counts of the contiguous n-grams of ``seq`` (tuples for lists, strings for str)."""
    return Counter(seq[i : i + n] for i in range(len(seq) - n + 1))


def _check(hyps, refs, fn):
    if len(hyps) != len(refs):
        raise ValueError(
            f"{fn}: {len(hyps)} hypotheses but {len(refs)} reference lists"
        )
    if not hyps:
        raise ValueError(f"{fn}: needs at least one hypothesis")
    for i, r in enumerate(refs):
        if isinstance(r, str) or not len(r):
            raise ValueError(
                f"{fn}: refs[{i}] must be a non-empty list of references, got {r!r}"
            )


def corpus_bleu(
    hyps: Sequence[Sequence[str]],
    refs: Sequence[Sequence[Sequence[str]]],
    max_n: int = 4,
) -> float:
    """Corpus BLEU (0-100) of token lists ``hyps`` against lists of token lists."""
    _check(hyps, refs, "corpus_bleu")
    match, total = [0] * max_n, [0] * max_n
    c_len = r_len = 0
    for hyp, rs in zip(hyps, refs):
        hyp = tuple(hyp)
        rs = [tuple(r) for r in rs]
        c_len += len(hyp)
        # the reference length closest to the hypothesis (the shorter one on a tie)
        r_len += min((abs(len(r) - len(hyp)), len(r)) for r in rs)[1]
        for n in range(1, max_n + 1):
            h = ngrams(hyp, n)
            best: Counter = Counter()
            for r in rs:
                best |= ngrams(r, n)  # the largest count in any one reference
            match[n - 1] += sum(min(c, best[g]) for g, c in h.items())
            total[n - 1] += max(len(hyp) - n + 1, 0)
    if min(match) == 0:
        return 0.0
    log_p = sum(math.log(m / t) for m, t in zip(match, total)) / max_n
    bp = 1.0 if c_len > r_len else math.exp(1 - r_len / c_len)
    return 100 * bp * math.exp(log_p)


def _chrf_stats(hyp: str, ref: str, order: int) -> list[tuple[int, int, int]]:
    """Per order n: (hypothesis n-grams, reference n-grams, matched n-grams)."""
    hyp, ref = "".join(hyp.split()), "".join(ref.split())
    out = []
    for n in range(1, order + 1):
        h, r = ngrams(hyp, n), ngrams(ref, n)
        # a reference too short for order n leaves the hypothesis' n-grams uncounted
        n_hyp = sum(h.values()) if r else 0
        out.append((n_hyp, sum(r.values()), sum((h & r).values())))
    return out


def _chrf_from(stats, beta: float) -> float:
    # average over the orders both sides have (a 3-character sentence has no 4-grams)
    both = [(h, r, m) for h, r, m in stats if h and r]
    if not both:
        return 0.0
    p = sum(m / h for h, _, m in both) / len(both)
    r = sum(m / r for _, r, m in both) / len(both)
    if p + r == 0:
        return 0.0
    return 100 * (1 + beta**2) * p * r / (beta**2 * p + r)


def corpus_chrf(
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    order: int = 6,
    beta: float = 2.0,
) -> float:
    """Corpus chrF (0-100) of strings ``hyps`` against lists of reference strings."""
    _check(hyps, refs, "corpus_chrf")
    total = [[0, 0, 0] for _ in range(order)]
    for hyp, rs in zip(hyps, refs):
        cands = [_chrf_stats(hyp, r, order) for r in rs]
        best = max(cands, key=lambda s: _chrf_from(s, beta))  # first best on a tie
        for acc, s in zip(total, best):
            for k in range(3):
                acc[k] += s[k]
    return _chrf_from(total, beta)
