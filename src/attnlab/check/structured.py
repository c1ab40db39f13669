"""Checks for chapter 4, "Soft, hard and structured attention"."""

from __future__ import annotations

import torch

from ..structured import enumerate_linear_chain, linear_chain_log_partition
from ._core import Case, run_check

__all__ = ["reinforce_estimates", "log_partition", "viterbi"]


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

    def __repr__(self):
        vals = ", ".join(f"{v:.4g}" for v in self.exact.tolist())
        extra = (
            "" if self.max_var is None else f", total variance <= {self.max_var:.3g}"
        )
        return f"({self.n}, n) estimates averaging to [{vals}]{extra}"


def _compare_estimates(got, exp: _Estimates) -> bool:
    if not isinstance(got, torch.Tensor) or got.shape != (exp.n, exp.exact.numel()):
        return False
    g = got.detach().double()
    if not bool(torch.isfinite(g).all()):
        return False
    se = g.std(0) / exp.n**0.5  # standard error of the mean, per coordinate
    if not bool(((g.mean(0) - exp.exact).abs() <= 5 * se + 1e-3).all()):
        return False
    return exp.max_var is None or float(g.var(0).sum()) <= exp.max_var


def _wrap(fn):
    """Seed before each call so a student's sampling is reproducible."""

    def call(*args, **kwargs):
        torch.manual_seed(0)
        return fn(*args, **kwargs)

    return call


def reinforce_estimates(fn) -> bool:
    """Check ``fn(scores, reward, n_samples, baseline) -> (n_samples, n)`` estimates.

    Each row is one single-sample REINFORCE estimate ``(r_i - b) ∇_θ log p_i`` of
    ``∇_θ E[r]`` for ``i ~ softmax(scores)``. The check tests that they average to the
    exact gradient and that a baseline near ``E[r]`` shrinks their variance.
    """
    f64 = dict(dtype=torch.float64)
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
    return run_check(
        "reinforce_estimates", _wrap(fn), cases, compare=_compare_estimates
    )


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
            "a_i[c] = u_i[c] + logsumexp_c'(a_{i-1}[c'] + A[c', c])",
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


def log_partition(fn) -> bool:
    """Check ``fn(unary (B, n, C), transition (C, C)) -> log Z (B,)``."""
    cases = [
        Case(lbl, (u.clone(), A.clone()), linear_chain_log_partition(u, A), hint)
        for lbl, u, A, hint in _crf_inputs()
    ]
    return run_check("log_partition", fn, cases)


# ------------------------------------------------------------------------ Viterbi
def _best_path(u: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    configs, logp = enumerate_linear_chain(u, A)  # (K, n), (B, K)
    return configs[logp.argmax(-1)]  # (B, n)


def viterbi(fn) -> bool:
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
    return run_check("viterbi", fn, cases, compare=_equal_paths)


def _equal_paths(got, expected) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and got.shape == expected.shape
        and not got.is_floating_point()
        and bool(torch.equal(got.long().cpu(), expected))
    )
