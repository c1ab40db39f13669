"""attnlab.data.metrics: corpus BLEU and chrF against hand computations, against
sacrebleu's numbers for the same inputs, and their input checks."""

from __future__ import annotations

import math
import random

import pytest

from attnlab.data.metrics import corpus_bleu, corpus_chrf, ngrams

# Four hypotheses with one or two references each. The expected values were computed
# by sacrebleu 2.6.0 on this machine (corpus_bleu with tokenize="none",
# smooth_method="none"; corpus_chrf with its defaults), references padded into streams.
HYPS = ["je suis fatigué .", "il est grand .", "qui a gagné ?", "c'est le triste ."]
REFS = [
    ["je suis fatiguée .", "je suis fatigué ."],
    ["il est très grand .", "il est grand !"],
    ["qui a gagné ?", "qui l'a emporté ?"],
    ["c'est triste .", "c'est triste ."],
]
SACREBLEU_BLEU = 70.29266564879364
SACREBLEU_CHRF = 88.31853535348142
SACREBLEU_CHRF_FIRST_REF = 73.05798026576477


def test_bleu_by_hand():
    hyp = ["the", "cat", "sat", "on", "the", "mat"]
    ref = ["the", "cat", "is", "on", "the", "mat"]
    # matches: 1-grams 5/6, 2-grams 3/5 (the cat, on the, the mat),
    # 3-grams 1/4 (on the mat), 4-grams 0/3 -> BLEU 0 without smoothing
    assert corpus_bleu([hyp], [[ref]]) == 0.0
    assert corpus_bleu([hyp], [[ref]], max_n=3) == pytest.approx(
        100 * (5 / 6 * 3 / 5 * 1 / 4) ** (1 / 3)
    )
    # clipping: "the the the" against "the cat": 1 of 3 unigrams counts
    assert corpus_bleu([["the"] * 3], [[["the", "cat"]]], max_n=1) == pytest.approx(
        100 / 3
    )
    # brevity penalty: a perfect 2-token prefix of a 4-token reference
    got = corpus_bleu([["a", "b"]], [[["a", "b", "c", "d"]]], max_n=2)
    assert got == pytest.approx(100 * math.exp(1 - 4 / 2))
    # the closest reference length is used: no penalty when one reference fits
    assert corpus_bleu([["a", "b"]], [[["a", "b", "c", "d"], ["a", "b"]]], 2) == 100


def test_chrf_by_hand():
    # "ab" against "abc": 1-grams P 2/2, R 2/3; 2-grams P 1/1, R 1/2; with order 2
    # P = 1, R = (2/3 + 1/2) / 2 = 7/12, F2 = 5 P R / (4 P + R)
    r = 7 / 12
    assert corpus_chrf(["ab"], [["abc"]], order=2) == pytest.approx(
        100 * 5 * r / (4 + r)
    )
    assert corpus_chrf(["a b"], [["ab"]], order=2) == 100  # spaces are ignored
    assert corpus_chrf(["xyz"], [["abc"]]) == 0.0
    # a reference with no 3-grams: order 3 drops out; orders 1-2 give P (2/3 + 1/2) / 2
    # and R 1, so "abc" against "ab" scores F2 = 5 P / (4 P + 1) at order 3
    p = (2 / 3 + 1 / 2) / 2
    assert corpus_chrf(["abc"], [["ab"]], order=3) == pytest.approx(
        100 * 5 * p / (4 * p + 1)
    )
    assert ngrams("abca", 2) == {"ab": 1, "bc": 1, "ca": 1}


def test_against_sacrebleu_numbers():
    tok = [h.split() for h in HYPS]
    tok_refs = [[r.split() for r in rs] for rs in REFS]
    assert corpus_bleu(tok, tok_refs) == pytest.approx(SACREBLEU_BLEU, abs=1e-9)
    assert corpus_chrf(HYPS, REFS) == pytest.approx(SACREBLEU_CHRF, abs=1e-9)
    first = [[rs[0]] for rs in REFS]
    assert corpus_chrf(HYPS, first) == pytest.approx(SACREBLEU_CHRF_FIRST_REF, abs=1e-9)


def test_against_sacrebleu_on_random_sentences():
    sacrebleu = pytest.importorskip("sacrebleu")
    rng = random.Random(0)
    words = "je tu il suis es est grand petit chat chien le la un . ! ?".split()
    hyps, refs = [], []
    for _ in range(40):
        hyps.append(" ".join(rng.choices(words, k=rng.randint(2, 8))))
        refs.append(
            [" ".join(rng.choices(words, k=rng.randint(2, 8))) for _ in range(2)]
        )
    streams = [[r[i] for r in refs] for i in range(2)]
    want = sacrebleu.corpus_bleu(hyps, streams, tokenize="none", smooth_method="none")
    got = corpus_bleu([h.split() for h in hyps], [[x.split() for x in r] for r in refs])
    assert got == pytest.approx(want.score, abs=1e-9)
    assert corpus_chrf(hyps, refs) == pytest.approx(
        sacrebleu.corpus_chrf(hyps, streams).score, abs=1e-9
    )


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match="2 hypotheses but 1"):
        corpus_bleu([["a"], ["b"]], [[["a"]]])
    with pytest.raises(ValueError, match="at least one"):
        corpus_chrf([], [])
    with pytest.raises(ValueError, match="non-empty list of references"):
        corpus_chrf(["a"], ["a"])  # a bare string instead of a list of references
