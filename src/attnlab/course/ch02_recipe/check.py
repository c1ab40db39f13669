"""Checks for chapter 2, "The attention recipe".

* :func:`additive_score` — ``fn(q, k, W1, W2, v) -> scores`` (Bahdanau's score)
* :func:`winning_key` — ``fn(angle, keys) -> int``: the key a very long query picks
* :func:`smallest_booster` — ``fn(seq, target) -> float``: how strong the key booster
  of the "look for B" toy must be for the Bs to get ``target`` of the weight
* :func:`factor_bilinear` — ``fn(W) -> (W_q, W_k)``: a bilinear score as two
  projections, ``W = W_kᵀ W_q`` (the form self-attention uses)

Every expected value comes from the library (:mod:`attnlab.scoring`,
:func:`attnlab.attend`), never from a second hand-written copy.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from ...attention import attend
from ...scoring import AdditiveScore
from ...toys import RECIPE_KEYS
from ..check_core import TORCH_SOFTMAX, Case, CheckResult, run_check, seeded
from ..check_diagnose import diagnosing, is_constant, same

__all__ = [
    "additive_score",
    "winning_key",
    "smallest_booster",
    "factor_bilinear",
]

# check name -> the library functions its exercise asks the student to write instead
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "additive_score": ("attnlab.scoring.AdditiveScore",),
    "winning_key": (  # "without calling softmax": no attention, no widget
        "attnlab.attention.attend",
        "attnlab.mappings.softmax",
        "attnlab.course.ch02_recipe.widgets.query_vs_keys",
        *TORCH_SOFTMAX,  # nor PyTorch's softmax, in any of its spellings
    ),
    "smallest_booster": (),  # its solution calls attend: the search is the exercise
    "factor_bilinear": (),  # the library has no factorisation
}


def _additive_reference(q, k, W1, W2, v):
    """The library's AdditiveScore with the given weights copied in."""
    d_hidden, d_k = W1.shape
    scorer = AdditiveScore(W2.shape[1], d_k, d_hidden).to(q.dtype)
    with torch.no_grad():
        scorer.W1.weight.copy_(W1)
        scorer.W2.weight.copy_(W2)
        scorer.v.weight.copy_(v[None])
        return scorer(q, k)


def _additive_case(label, q_shape, k_shape, d_hidden, seed, scale=1.0, hint=""):
    g = seeded(seed)
    q = torch.randn(q_shape, generator=g) * scale
    k = torch.randn(k_shape, generator=g) * scale
    W1 = torch.randn(d_hidden, k_shape[-1], generator=g) / math.sqrt(k_shape[-1])
    W2 = torch.randn(d_hidden, q_shape[-1], generator=g) / math.sqrt(q_shape[-1])
    v = torch.randn(d_hidden, generator=g)
    args = (q, k, W1, W2, v)
    return Case(label, args, _additive_reference(*args), hint)


def additive_score(fn: Callable) -> CheckResult:
    """Check ``fn(q, k, W1, W2, v)`` computes ``vᵀ tanh(W1 k_j + W2 q_t)``.

    Shapes: ``q (..., T, Dq)``, ``k (..., S, Dk)``, ``W1 (Dh, Dk)``, ``W2 (Dh, Dq)``,
    ``v (Dh,)`` -> scores ``(..., T, S)``.
    """
    pair = "score[t, j] pairs query t with key j: broadcast (T, 1, Dh) + (1, S, Dh)"
    cases = [
        _additive_case("one query, 4 keys", (1, 3), (4, 3), 5, 0, hint=pair),
        _additive_case(
            "Dq != Dk",
            (2, 3),
            (4, 6),
            5,
            1,
            hint="W1 acts on the keys (Dh, Dk), W2 on the queries (Dh, Dq)",
        ),
        _additive_case("3 queries, 5 keys", (3, 4), (5, 4), 6, 2, hint=pair),
        _additive_case(
            "batched (B=2)",
            (2, 3, 4),
            (2, 5, 4),
            3,
            3,
            hint="keep the leading batch dimensions: use k.unsqueeze(-3), "
            "q.unsqueeze(-2), not fixed dims",
        ),
        _additive_case("length 1 (T = S = 1)", (1, 2), (1, 2), 3, 4),
        _additive_case(
            "inputs x 1000",
            (2, 3),
            (3, 3),
            4,
            5,
            scale=1000.0,
            hint="tanh saturates at ±1: scores stay within ±‖v‖₁",
        ),
    ]
    fn, compare = diagnosing(fn, cases, _diagnose_additive)
    return run_check(
        "additive_score", fn, cases, compare=compare, forbid=FORBIDDEN["additive_score"]
    )


def _diagnose_additive(case: Case, got) -> str | None:
    q, k, W1, W2, v = case.args
    exp = case.expected  # (..., T, S)
    if not isinstance(got, torch.Tensor):
        return "return a tensor of scores, shape (..., T, S)"
    if got.shape != exp.shape and got.shape == exp.transpose(-2, -1).shape:
        if same(got, exp.transpose(-2, -1)):
            return "the scores are (T, S): one row per query; you returned (S, T)"
    hidden = (k @ W1.T).unsqueeze(-3) + (q @ W2.T).unsqueeze(-2)  # (..., T, S, Dh)
    if same(got, hidden @ v):
        return "apply tanh to W1 k_j + W2 q_t before the product with v"
    if same(got, torch.tanh(hidden @ v)):
        return (
            "v weighs the tanh's outputs: tanh(W1 k_j + W2 q_t) @ v, not tanh(... @ v)"
        )
    if same(got, torch.tanh(hidden).sum(-1)):
        return "weight the Dh hidden units with v: tanh(...) @ v, not a plain sum"
    if W1.shape == W2.shape:
        swapped = torch.tanh((k @ W2.T).unsqueeze(-3) + (q @ W1.T).unsqueeze(-2)) @ v
        if same(got, swapped):
            return "W1 acts on the keys (Dh, Dk) and W2 on the queries (Dh, Dq)"
    if is_constant(got, exp):
        return "the scores must depend on the queries and keys"
    return None


# The keys of the chapter's widget (one copy, in attnlab.toys).
WIDGET_KEYS = RECIPE_KEYS


def _winner_reference(angle: float, keys: torch.Tensor, length: float = 1e4) -> int:
    """Index of the key with the largest dot-product weight for a very long query."""
    rad = math.radians(angle)
    q = length * torch.tensor([[math.cos(rad), math.sin(rad)]], dtype=torch.float64)
    k = keys.to(torch.float64)
    _, weights = attend(q, k, k)  # (1, S)
    return int(weights[0].argmax())


def _same_index(got, expected) -> bool:
    """An index: a Python/NumPy integer or a one-element integer tensor (not bool)."""
    if isinstance(got, torch.Tensor):
        if got.numel() != 1 or got.is_floating_point() or got.dtype == torch.bool:
            return False
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, numbers.Integral):
        return False
    return int(got) == expected


def winning_key(fn: Callable) -> CheckResult:
    """Check ``fn(angle, keys) -> int``: which key wins as the query grows long.

    The query is ``length · (cos angle, sin angle)`` (angle in degrees), ``keys (S, 2)``;
    the answer is the index of the key that takes (almost) all the softmax weight of
    dot-product scoring when ``length`` is very large.
    """
    hint = (
        "a long query picks the key with the largest projection k_j·q/‖q‖, "
        "not the key closest in angle"
    )
    near_east = torch.tensor([[1.0, 0.0], [3.0, 3.0]])
    cases = [
        Case(
            f"widget keys, angle {a}°",
            (a, WIDGET_KEYS),
            _winner_reference(a, WIDGET_KEYS),
            hint,
        )
        for a in (10.0, 90.0, 180.0, -80.0, 100.0)
    ]
    cases += [
        Case(
            "a long key 40° away",
            (5.0, near_east),
            _winner_reference(5.0, near_east),
            hint,
        ),
        Case("one key (S = 1)", (123.0, torch.tensor([[0.0, -1.0]])), 0),
        Case(
            "keys as float64",
            (200.0, WIDGET_KEYS.double()),
            _winner_reference(200.0, WIDGET_KEYS),
            hint,
        ),
    ]
    fn, compare = diagnosing(fn, cases, _diagnose_winner, _same_index)
    return run_check(
        "winning_key", fn, cases, compare=compare, forbid=FORBIDDEN["winning_key"]
    )


def _diagnose_winner(case: Case, got) -> str | None:
    angle, keys = case.args
    if isinstance(got, torch.Tensor) and got.numel() != 1:
        return "return one index (an int), not a tensor of scores or weights"
    if isinstance(got, bool) or not isinstance(got, (numbers.Integral, torch.Tensor)):
        return "return the key's index as an int"
    k = keys.double()
    rad = math.radians(angle)
    direction = torch.tensor([math.cos(rad), math.sin(rad)], dtype=torch.float64)
    idx = int(got.item()) if isinstance(got, torch.Tensor) else int(got)
    if idx == int((k @ direction / k.norm(dim=-1)).argmax()):
        return (
            "that key is the closest in angle; a long query picks the largest "
            "projection k_j·q/‖q‖, which counts the key's length too"
        )
    if idx == int(k.norm(dim=-1).argmax()):
        return "the longest key does not always win: project each key on the query"
    wrong_unit = torch.tensor([math.cos(angle), math.sin(angle)], dtype=torch.float64)
    if idx == int((k @ wrong_unit).argmax()):
        return "the angle is in degrees: math.radians(angle) before cos and sin"
    return None


# The "look for B" toy: embeddings, W_q and W_v of the chapter; W_k = c I.
_TOY = {"A": (1.0, 0.0), "B": (0.0, 1.0), "C": (0.8, 0.2)}


def _b_weight(seq: str, c: float) -> float:
    """Weight a query of the toy puts on the B keys with the booster ``W_k = c I``."""
    X = torch.tensor([_TOY[t] for t in seq], dtype=torch.float64)  # (S, 2)
    W_q = torch.tensor([[0.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    _, w = attend((X @ W_q)[:1], c * X, X)  # (1, S): every query is the same
    return float(w[0, [t == "B" for t in seq]].sum())


def _booster_reference(seq: str, target: float) -> float:
    if "B" not in seq:
        return math.inf
    if _b_weight(seq, 0.0) >= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while _b_weight(seq, hi) < target:  # the weight on B grows with c
        lo, hi = hi, 2 * hi
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _b_weight(seq, mid) < target else (lo, mid)
    return hi


def _same_booster(got, expected) -> bool:
    try:
        got = float(got)
    except (TypeError, ValueError):
        return False
    if math.isinf(expected):
        return math.isinf(got) and got > 0
    return abs(got - expected) <= 1e-3 + 1e-3 * expected


def smallest_booster(fn: Callable) -> CheckResult:
    """Check ``fn(seq, target) -> c``: the smallest booster ``c >= 0`` of the toy.

    ``seq`` is a string over ``A``, ``B``, ``C`` with the chapter's embeddings,
    ``W_q`` and ``W_v = I``, and ``W_k = c I``; ``c`` is the smallest value for which a
    query puts at least ``target`` of its softmax weight on the Bs (``0.0`` if ``c = 0``
    is enough, ``math.inf`` if no ``c`` is: a sequence without B). Within 1e-3.
    """
    grows = "the weight on the Bs grows with c: bisect on c, or solve for it"
    cases = [
        Case("A B C B, 0.99", ("ABCB", 0.99), _booster_reference("ABCB", 0.99), grows),
        Case("A B C B, 0.5", ("ABCB", 0.5), 0.0, "at c = 0 the 2 Bs already get 2/4"),
        Case("A B C B, 0.999", ("ABCB", 0.999), _booster_reference("ABCB", 0.999)),
        Case(
            "one B among 99 Cs, 0.99",
            ("B" + "C" * 99, 0.99),
            _booster_reference("B" + "C" * 99, 0.99),
            "more distractors need a larger c (about log of their number)",
        ),
        Case(
            "one B among 999 As, 0.9",
            ("A" * 999 + "B", 0.9),
            _booster_reference("A" * 999 + "B", 0.9),
            grows,
        ),
        Case("B alone", ("B", 0.999), 0.0, "one key always gets all the weight"),
        Case("no B", ("ACCA", 0.9), math.inf, "no booster helps: return math.inf"),
    ]
    fn, compare = diagnosing(fn, cases, _diagnose_booster, _same_booster)
    return run_check(
        "smallest_booster",
        fn,
        cases,
        compare=compare,
        forbid=FORBIDDEN["smallest_booster"],
    )


def _b_weight_single(seq: str, c: float) -> float:
    """The weight on one B, as if the sequence held only one (a usual slip)."""
    nA, nC = seq.count("A"), seq.count("C")
    return 1.0 / (1.0 + nA * math.exp(-c) + nC * math.exp(-0.8 * c))


def _diagnose_booster(case: Case, got) -> str | None:
    seq, target = case.args
    try:
        c = float(got)
    except (TypeError, ValueError):
        return "return the booster c as a float (math.inf if no c works)"
    exp = case.expected
    if math.isinf(exp) and not math.isinf(c):
        return "with no B in the sequence no booster helps: return math.inf"
    if not math.isinf(exp) and math.isinf(c):
        return "this sequence has a B, so some finite c reaches the target"
    if 0.0 < c <= 1.0 and exp > 1.0 and abs(c - target) < 1e-6:
        return "return the booster c, not the target weight"
    if seq != "ABCB" and _same_booster(c, _booster_reference("ABCB", target)):
        return (
            "the answer depends on the sequence: more distractors need a larger c "
            "(about the log of their number)"
        )
    if seq.count("B") > 1 and 0.0 < c < math.inf:
        if abs(_b_weight_single(seq, c) - target) < 1e-3 and exp < c:
            return "every B gets weight: sum the weight on all the Bs, not one"
    if exp == 0.0 and c > 0.0:
        return "check c = 0 first: the Bs may already get the target there"
    return None


def _factors_ok(got, W) -> bool:
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return False
    W_q, W_k = got
    if not (isinstance(W_q, torch.Tensor) and isinstance(W_k, torch.Tensor)):
        return False
    rank = int(torch.linalg.matrix_rank(W.double()))
    d_k, d_q = W.shape
    if W_q.shape != (rank, d_q) or W_k.shape != (rank, d_k):
        return False
    return bool(torch.allclose(W_k.double().T @ W_q.double(), W.double(), atol=1e-6))


def factor_bilinear(fn: Callable) -> CheckResult:
    """Check ``fn(W) -> (W_q, W_k)`` with ``W_kᵀ W_q = W`` and ``r = rank(W)`` rows each.

    ``W`` is a bilinear score's ``(D_k, D_q)`` matrix; ``W_q (r, D_q)`` and
    ``W_k (r, D_k)`` project queries and keys into an ``r``-dimensional space where the
    score is a plain dot product: ``kᵀ W q = (W_k k)ᵀ (W_q q)``.
    """
    g = torch.Generator().manual_seed(5)
    # float64 from the start: a float32 product cast up has rank 3 to matrix_rank.
    u = torch.randn(4, 1, generator=g, dtype=torch.float64)
    v = torch.randn(1, 3, generator=g, dtype=torch.float64)
    svd = "torch.linalg.svd gives W = U diag(σ) Vᵀ: keep the r non-zero σ, split them"
    cases = [
        ("square, full rank", torch.randn(3, 3, generator=g, dtype=torch.float64), svd),
        ("D_k = 5, D_q = 2", torch.randn(5, 2, generator=g, dtype=torch.float64), svd),
        ("D_k = 2, D_q = 6", torch.randn(2, 6, generator=g, dtype=torch.float64), svd),
        (
            "rank 1 (4 x 3)",
            u @ v,
            "a rank-1 W needs only one row in each projection: count σ > tolerance",
        ),
        ("identity: the dot product", torch.eye(3, dtype=torch.float64), svd),
    ]
    out = []
    for label, W, hint in cases:
        out.append(Case(label, (W.clone(),), W, hint))
    fn, compare = diagnosing(fn, out, _diagnose_factor, _factors_ok)
    return run_check(
        "factor_bilinear", fn, out, compare=compare, forbid=FORBIDDEN["factor_bilinear"]
    )


def _diagnose_factor(case: Case, got) -> str | None:
    (W,) = case.args
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return "return a pair (W_q, W_k)"
    W_q, W_k = (torch.as_tensor(t).double() for t in got)
    W = W.double()
    rank = int(torch.linalg.matrix_rank(W))
    if W_q.dim() != 2 or W_k.dim() != 2 or W_q.shape[0] != W_k.shape[0]:
        return "W_q is (r, D_q) and W_k is (r, D_k): the same number of rows r"
    if W_k.shape[1] == W.shape[1] and W_q.shape[1] == W.shape[0]:
        if torch.allclose(W_q.T @ W_k, W, atol=1e-6):
            return "you swapped the two: W_k^T W_q must equal W (W_q acts on queries)"
    product_ok = W_k.shape[1] == W.shape[0] and W_q.shape[1] == W.shape[1]
    if product_ok and torch.allclose(W_k.T @ W_q, W, atol=1e-6):
        if W_q.shape[0] != rank:
            return (
                f"right product, but {W_q.shape[0]} rows: the smallest size is "
                f"rank(W) = {rank} — keep only the singular values above a tolerance"
            )
    return None
