"""Checks for chapter 4, "Soft, hard and structured attention"."""

from __future__ import annotations

from typing import Any

import torch

from ...structured import (
    enumerate_linear_chain,
    linear_chain_log_partition,
    linear_chain_marginals,
)
from ..check_core import Case, CheckResult, run_check
from ..check_diagnose import diagnosing, is_constant, same

__all__ = ["reinforce_estimates", "log_partition", "viterbi"]

_CRF = (
    "attnlab.structured.linear_chain_log_partition",
    "attnlab.structured.linear_chain_marginals",
    "attnlab.structured.enumerate_linear_chain",
    "attnlab.structured.segmentation_marginals",
)
# check name -> the library functions its exercise asks the student to write instead
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "reinforce_estimates": ("attnlab.structured.ReinforceSample",),
    # The exercise asks for a comparison with linear_chain_marginals (marginals are
    # the gradient of log Z; they cannot give log Z itself): allowed in the answer.
    "log_partition": tuple(
        f for f in _CRF if f != "attnlab.structured.linear_chain_marginals"
    ),
    "viterbi": _CRF,
}


# ------------------------------------------------------------- REINFORCE estimates
def _exact_grad(scores: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """∇_θ E_{i~softmax(θ)}[r_i] = p ⊙ (r − p·r)."""
    p = torch.softmax(scores, -1)
    return p * (reward - (p * reward).sum())


class _Estimates:
    """What a REINFORCE case expects: the exact gradient, and a variance bound."""

    def __init__(self, scores, reward, n_samples, baseline, max_var=None):
        self.exact = _exact_grad(scores, reward)
        self.n, self.baseline, self.max_var = n_samples, baseline, max_var
        # single-sample estimates have this total variance; an answer that never
        # samples (or averages several samples per row) falls far below it
        self.var = _single_sample_variance(scores, reward, baseline)

    def __repr__(self):
        vals = ", ".join(f"{v:.4g}" for v in self.exact.tolist())
        extra = (
            "" if self.max_var is None else f", total variance <= {self.max_var:.3g}"
        )
        return f"({self.n}, n) estimates averaging to [{vals}]{extra}"


def _single_sample_variance(scores, reward, baseline) -> float:
    """Total variance of one estimate (r_i - b)(e_i - p), i ~ p, in closed form."""
    p = torch.softmax(scores, -1)
    n = len(p)
    rows = (reward - baseline)[:, None] * (torch.eye(n, dtype=p.dtype) - p)  # (n, n)
    second = (p[:, None] * rows**2).sum(0)  # E[x_j^2]
    return float((second - _exact_grad(scores, reward) ** 2).sum())


def _compare_estimates(got, exp: _Estimates) -> bool:
    if not isinstance(got, torch.Tensor) or got.shape != (exp.n, exp.exact.numel()):
        return False
    g = got.detach().double()
    if not bool(torch.isfinite(g).all()):
        return False
    se = g.std(0) / exp.n**0.5  # standard error of the mean, per coordinate
    if not bool(((g.mean(0) - exp.exact).abs() <= 5 * se + 1e-3).all()):
        return False
    var = float(g.var(0).sum())
    if exp.var > 1e-12 and var < 0.5 * exp.var:  # no sampling: too little noise
        return False
    return exp.max_var is None or var <= exp.max_var


class _Seeded:
    """Calls ``fn`` after seeding torch, so a student's sampling is reproducible.

    It carries ``fn``'s ``__globals__`` for the forbidden-call tripwires."""

    def __init__(self, fn):
        self.fn = fn
        self.__globals__ = getattr(fn, "__globals__", {})

    def __call__(self, *args, **kwargs):
        torch.manual_seed(0)
        return self.fn(*args, **kwargs)


def _wrap(fn):
    return _Seeded(fn) if callable(fn) else fn


def reinforce_estimates(fn) -> CheckResult:
    """Check ``fn(scores, reward, n_samples, baseline) -> (n_samples, n)`` estimates.

    Each row is one single-sample REINFORCE estimate ``(r_i - b) ∇_θ log p_i`` of
    ``∇_θ E[r]`` for ``i ~ softmax(scores)``. The check tests that they average to the
    exact gradient and that a baseline near ``E[r]`` shrinks their variance.
    """
    f64: dict[str, Any] = {"dtype": torch.float64}
    theta = torch.tensor([0.5, -0.3, 1.2, 0.0], **f64)
    r = torch.tensor([1.0, 0.0, 2.0, -1.0], **f64)
    shifted = r + 10.0
    p = torch.softmax(theta, -1)
    mean_r = float((p * shifted).sum())
    # the variance with the ideal constant baseline is far below the no-baseline one
    no_base = torch.stack(
        [(shifted[i] - 0) * (torch.eye(4, **f64)[i] - p) for i in range(4)]
    )
    var_nb = float(
        (p[:, None] * no_base**2).sum(0).sub(_exact_grad(theta, shifted) ** 2).sum()
    )
    cases = [
        Case(
            "no baseline",
            (theta, r, 4000, 0.0),
            _Estimates(theta, r, 4000, 0.0),
            "each row: (r_i - b) * (onehot(i) - softmax(scores)) for a sampled i",
        ),
        Case(
            "rewards shifted by +10, baseline E[r]",
            (theta, shifted, 4000, mean_r),
            _Estimates(theta, shifted, 4000, mean_r, max_var=0.5 * var_nb),
            "subtract the baseline from the reward before multiplying",
        ),
        Case(
            "one key",
            (torch.tensor([0.3], **f64), torch.tensor([2.0], **f64), 10, 0.0),
            _Estimates(torch.tensor([0.3], **f64), torch.tensor([2.0], **f64), 10, 0.0),
            "with one key, log p = 0 and every estimate is 0",
        ),
    ]
    fn, compare = diagnosing(_wrap(fn), cases, _diagnose_reinforce, _compare_estimates)
    return run_check(
        "reinforce_estimates",
        fn,
        cases,
        compare=compare,
        forbid=FORBIDDEN["reinforce_estimates"],
    )


def _diagnose_reinforce(case: Case, got) -> str | None:
    scores, reward, n_samples, baseline = case.args
    exp = case.expected
    if not isinstance(got, torch.Tensor) or got.dim() != 2:
        return f"return one estimate per row: a ({n_samples}, n) tensor"
    if got.shape != (n_samples, len(scores)):
        return f"shape ({n_samples}, {len(scores)}): n_samples rows, one per sample"
    g = got.detach().double()
    if bool((g == g[0]).all()) and exp.var > 1e-12:
        return (
            "every row is the same: each row must be one sampled key's estimate "
            "(torch.multinomial), not the exact gradient"
        )
    p = torch.softmax(scores, -1)
    eye = torch.eye(len(p), dtype=p.dtype)
    grad_p = ((reward - baseline) * p)[:, None] * (eye - p)  # (n, n): (r_i - b) ∇p_i
    if exp.var > 1e-12 and _rows_among(g, grad_p):
        return (
            "each row is (r_i − b) ∇p_i = (r_i − b) p_i (onehot(i) − p): REINFORCE "
            "needs ∇ log p_i = onehot(i) − p, without the factor p_i"
        )
    var = float(g.var(0).sum())
    if exp.var > 1e-12 and var < 0.5 * exp.var:
        return (
            f"total variance {var:.3g}, while single-sample estimates have "
            f"{exp.var:.3g}: draw one key per row, do not average several"
        )
    se = g.std(0) / n_samples**0.5
    if not bool(((g.mean(0) - exp.exact).abs() <= 5 * se + 1e-3).all()):
        if bool(
            (g.mean(0) - p * (reward - baseline)).abs().max() < 5 * se.max() + 1e-3
        ):
            return "∇ log p_i = onehot(i) − p: the − p term is missing"
        return "the estimates do not average to the exact gradient p ⊙ (r − p·r)"
    if exp.max_var is not None and var > exp.max_var:
        return "subtract the baseline b from the reward before multiplying"
    return None


def _rows_among(g: torch.Tensor, rows: torch.Tensor) -> bool:
    """Is every row of ``g`` (K, n) one of the candidate ``rows`` (n, n)?"""
    dist = (g[:, None, :] - rows[None]).abs().amax(-1)  # (K, n)
    return bool((dist.amin(-1) <= 1e-6 * (1 + rows.abs().max())).all())


# ------------------------------------------------------------ forward algorithm
def _crf_inputs() -> list[tuple[str, torch.Tensor, torch.Tensor, str]]:
    g = torch.Generator().manual_seed(4)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return [
        (
            "binary chain, 5 positions",
            rnd(1, 5, 2),
            rnd(2, 2),
            "a_i[c] = ψ_i[c] + logsumexp_c'(a_{i-1}[c'] + A[c', c])",
        ),
        ("a batch, 3 states", rnd(4, 6, 3), rnd(3, 3), "one chain per batch row"),
        ("length 1", rnd(2, 1, 3), rnd(3, 3), "one position: no transition at all"),
        ("one state", rnd(2, 4, 1), rnd(1, 1), "C = 1: log Z is the sum of everything"),
        (
            "scores x 1000",
            rnd(2, 5, 3) * 1000,
            rnd(3, 3) * 1000,
            "use logsumexp, never exp then log",
        ),
    ]


def log_partition(fn) -> CheckResult:
    """Check ``fn(unary (B, n, C), transition (C, C)) -> log Z (B,)``."""
    cases = [
        Case(lbl, (u.clone(), A.clone()), linear_chain_log_partition(u, A), hint)
        for lbl, u, A, hint in _crf_inputs()
    ]
    fn, compare = diagnosing(fn, cases, _diagnose_log_partition)
    return run_check(
        "log_partition", fn, cases, compare=compare, forbid=FORBIDDEN["log_partition"]
    )


def _viterbi_score(u: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    best = u[:, 0]
    for i in range(1, u.shape[1]):
        best = u[:, i] + (best[:, :, None] + A).amax(dim=1)
    return best.amax(-1)  # (B,)


def _diagnose_log_partition(case: Case, got) -> str | None:
    u, A = case.args
    exp = case.expected
    if not isinstance(got, torch.Tensor) or got.shape != exp.shape:
        return f"return one log Z per chain: shape {tuple(exp.shape)}"
    if not bool(torch.isfinite(got).all()):
        return "exp then log overflows: stay in log space with torch.logsumexp"
    if same(got, linear_chain_log_partition(u, A.T)):
        return (
            "transition[c_prev, c]: the previous state is the row, so "
            "alpha[:, :, None] + A and logsumexp over dim 1"
        )
    if same(got, _viterbi_score(u, A)):
        return "max gives the best labelling's score (Viterbi): log Z needs logsumexp"
    if same(got, torch.logsumexp(u, -1).sum(-1)):
        return "the transitions are missing: add A[c_prev, c] inside the recursion"
    if is_constant(got, exp):
        return "log Z must depend on the potentials"
    return None


# ------------------------------------------------------------------------ Viterbi
def _best_path(u: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    configs, logp = enumerate_linear_chain(u, A)  # (K, n), (B, K)
    return configs[logp.argmax(-1)]  # (B, n)


def viterbi(fn) -> CheckResult:
    """Check ``fn(unary (B, n, C), transition (C, C)) -> best labelling (B, n)``."""
    cases = [
        Case(
            lbl,
            (u.clone(), A.clone()),
            _best_path(u, A),
            hint + " (keep back-pointers: argmax instead of logsumexp)",
        )
        for lbl, u, A, hint in _crf_inputs()
    ]
    # the chapter's "à" scores with agreement 2: marginals above 1/2 on "to the", but
    # the best labelling selects nothing (the exercise's question)
    a = torch.tensor([-1.6, -1.2, -0.7, 1.6, 0.9, -1.3], dtype=torch.float64)
    u_a = torch.stack([torch.zeros_like(a), a], dim=-1)[None]  # (1, 6, 2)
    A2 = torch.tensor([[1.0, -1.0], [-1.0, 1.0]], dtype=torch.float64)
    cases.append(
        Case(
            "'à' with agreement 2 (marginals above 1/2 on 'to the')",
            (u_a, A2),
            _best_path(u_a, A2),
            "the best labelling is the argmax over whole labellings, which need not "
            "agree with the words whose marginal is above 1/2",
        )
    )
    fn, compare = diagnosing(fn, cases, _diagnose_viterbi, _equal_paths)
    return run_check("viterbi", fn, cases, compare=compare, forbid=FORBIDDEN["viterbi"])


def _greedy_path(u: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    z = [u[:, 0].argmax(-1)]
    for i in range(1, u.shape[1]):
        z.append((u[:, i] + A[z[-1]]).argmax(-1))
    return torch.stack(z, 1)


def _diagnose_viterbi(case: Case, got) -> str | None:
    u, A = case.args
    exp = case.expected
    if not isinstance(got, torch.Tensor) or got.shape != exp.shape:
        return f"return a (B, n) tensor of labels, here {tuple(exp.shape)}"
    if got.is_floating_point():
        return "labels are integers: return a long tensor (argmax gives one)"
    got = got.long().cpu()
    if torch.equal(got, u.argmax(-1)):
        return "the best label of each word alone ignores the transitions"
    if torch.equal(got, linear_chain_marginals(u, A).argmax(-1)):
        return (
            "the argmax of the marginals is not the best labelling: replace "
            "logsumexp by max and keep back-pointers"
        )
    if torch.equal(got, _greedy_path(u, A)):
        return (
            "a greedy left-to-right choice cannot undo an early pick: keep, for "
            "every state, the best previous state, and follow the pointers back"
        )
    if torch.equal(got, _best_path(u, A.T)):
        return "transition[c_prev, c]: the previous state is the row of A"
    return None


def _equal_paths(got, expected) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and got.shape == expected.shape
        and not got.is_floating_point()
        and bool(torch.equal(got.long().cpu(), expected))
    )
