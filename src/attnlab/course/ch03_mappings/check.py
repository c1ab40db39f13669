"""Checks for chapter 3, "From scores to probabilities".

* :func:`sparsemax_sort` — ``fn(scores) -> weights``: sparsemax by sorting
* :func:`tail_mass` — ``fn(p, k) -> mass``: the weight outside the ``k`` largest
* :func:`entmax_vjp` — ``fn(p, g, alpha) -> J^T g``: the backward pass of α-entmax
* :func:`fusedmax_vjp` — ``fn(p, groups, g) -> J^T g``: the backward pass of fusedmax
"""

from __future__ import annotations

import torch

from ...mappings import entmax15, entmax_bisect, fusedmax, softmax, sparsemax
from ..check_core import Case, CheckResult, run_check
from ..check_diagnose import diagnosing, is_constant, same

__all__ = [
    "sparsemax_sort",
    "tail_mass",
    "entmax_vjp",
    "fusedmax_vjp",
]

_MAPPINGS = (
    "attnlab.mappings.sparsemax",
    "attnlab.mappings.entmax15",
    "attnlab.mappings.entmax_bisect",
    "attnlab.mappings.fusedmax",
)
# check name -> the library functions its exercise asks the student to write instead
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "sparsemax_sort": _MAPPINGS
    + (
        "attnlab.kernels.sparse.sparsemax_tau_sort",
        "attnlab.kernels.sparse.sparsemax_tau_iter",
        "attnlab.kernels.sparse.threshold_topk",
        "attnlab.kernels.sparse.sparsemax_iter",
        "attnlab.kernels.sparse._sparsemax_passes",
    ),
    "tail_mass": (),  # one topk: nothing in the library to call
    # the library's forward passes carry its backward: autograd through them is it
    "entmax_vjp": _MAPPINGS
    + ("attnlab.mappings.softmax", "attnlab.mappings.basic.jvp_simplex"),
    "fusedmax_vjp": _MAPPINGS
    + ("attnlab.mappings.basic.jvp_simplex", "attnlab.kernels.tv1d.group_mean"),
}

_INF = float("-inf")


def _t(*rows) -> torch.Tensor:
    """One row gives a 1-D tensor, several rows a 2-D one (float64)."""
    return torch.tensor(rows[0] if len(rows) == 1 else rows, dtype=torch.float64)


def _inputs() -> list[tuple[str, torch.Tensor, str]]:
    """(label, scores, hint): the same hostile inputs for every exercise."""
    g = torch.Generator().manual_seed(3)
    return [
        (
            "three scores",
            _t([1.0, 0.8, 0.1]),
            "sort descending, then keep j with 1 + j z_(j) > cumsum",
        ),
        (
            "a batch of rows",
            torch.randn(4, 6, generator=g, dtype=torch.float64),
            "work along the last dimension, one threshold per row",
        ),
        ("all equal", _t([0.3, 0.3, 0.3, 0.3]), "equal scores share the mass equally"),
        ("length 1", _t([2.5]), "a single score gets all the weight"),
        (
            "logits x 1000",
            _t([1.0, 3.0, 2.0, -1.0]) * 1000,
            "subtract the row max first",
        ),
        (
            "masked entries",
            _t([0.5, _INF, 0.2, _INF, 0.4]),
            "-inf entries must get exactly 0 and never produce NaN",
        ),
        (
            "a fully masked row",
            _t([0.1, 0.4, 0.2], [_INF, _INF, _INF]),
            "a row that is all -inf gets all zeros (no support: guard k = 0)",
        ),
    ]


def sparsemax_sort(fn) -> CheckResult:
    """Check ``fn(scores) -> weights``: sparsemax along the last dim by sorting."""
    cases = [Case(lbl, (x.clone(),), sparsemax(x), hint) for lbl, x, hint in _inputs()]
    fn, compare = diagnosing(fn, cases, _diagnose_sparsemax)
    return run_check(
        "sparsemax_sort", fn, cases, compare=compare, forbid=FORBIDDEN["sparsemax_sort"]
    )


def _sparsemax_k_off(x: torch.Tensor, off: int) -> torch.Tensor:
    """Sparsemax with the support size off by ``off`` (a usual slip), finite rows."""
    zs, _ = torch.sort(x, dim=-1, descending=True)
    cumsum = zs.cumsum(-1)
    k = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    size = (1 + k * zs > cumsum).sum(-1, keepdim=True)
    size = (size + off).clamp(1, x.shape[-1])
    tau = (cumsum.gather(-1, size - 1) - 1) / size
    return torch.clamp(x - tau, min=0)


def _diagnose_sparsemax(case: Case, got) -> str | None:
    (x,) = case.args
    exp = case.expected
    if not isinstance(got, torch.Tensor) or got.shape != exp.shape:
        return f"return weights of the input's shape {tuple(exp.shape)}"
    if bool(torch.isnan(got).any()):
        if bool(torch.isinf(x).all(-1).any()):
            return "a row that is all -inf gets all zeros (no support: guard k = 0)"
        return "-inf entries must get exactly 0 and never produce NaN"
    if same(got, softmax(x)):
        return "that is softmax: sparsemax subtracts a threshold and clips at 0"
    if bool(torch.isfinite(x).all()):
        up = torch.clamp(x - _ascending_tau(x), min=0)
        if same(got, up):
            return "sort in decreasing order (descending=True)"
        for off in (1, -1):
            if same(got, _sparsemax_k_off(x, off)):
                return (
                    "the support size is off by one: it is the largest k (counting "
                    "from 1) with 1 + k z_(k) > sum of the top k"
                )
    if (
        x.dim() > 1
        and x.shape[0] > 1
        and not same(got.sum(-1), torch.ones_like(got[..., 0]))
    ):
        return "work along the last dimension: every row's weights sum to one"
    if is_constant(got, exp):
        return "the weights must depend on the scores"
    return None


def _ascending_tau(x: torch.Tensor) -> torch.Tensor:
    zs, _ = torch.sort(x, dim=-1)
    cumsum = zs.cumsum(-1)
    k = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    size = (1 + k * zs > cumsum).sum(-1, keepdim=True).clamp(min=1)
    return (cumsum.gather(-1, size - 1) - 1) / size


def tail_mass(fn) -> CheckResult:
    """Check ``fn(p, k) -> mass``: the weight outside the ``k`` largest, last dim.

    ``p`` is any tensor of weights (rows on the simplex); the answer has ``p``'s shape
    without its last dimension. ``k >= n`` leaves no tail (0), ``k = 0`` leaves all.
    """
    g = torch.Generator().manual_seed(6)
    rows = softmax(torch.randn(3, 50, generator=g, dtype=torch.float64))
    cases = []
    for label, p, k, hint in [
        ("one row", _t([0.5, 0.1, 0.3, 0.1]), 2, "sum all but the k largest"),
        ("unsorted batch", rows, 10, "the k largest of each row, not the first k"),
        ("ties", _t([0.25, 0.25, 0.25, 0.25]), 3, ""),
        ("k >= n: no tail", _t([0.7, 0.3]), 5, "torch.topk fails for k > n: clamp k"),
        ("k = 0: everything", _t([0.7, 0.3]), 0, ""),
        ("sparse weights", sparsemax(_t([2.0, 1.5, -1.0, 0.0])), 2, ""),
    ]:
        kk = min(k, p.shape[-1])
        top = p.topk(kk, dim=-1).values.sum(-1) if kk else torch.zeros(p.shape[:-1])
        expected = (p.sum(-1) - top).to(p.dtype)
        cases.append(Case(label, (p.clone(), k), expected, hint))
    fn, compare = diagnosing(fn, cases, _diagnose_tail)
    return run_check(
        "tail_mass", fn, cases, compare=compare, forbid=FORBIDDEN["tail_mass"]
    )


def _diagnose_tail(case: Case, got) -> str | None:
    p, k = case.args
    exp = case.expected
    if not isinstance(got, torch.Tensor) or got.shape != exp.shape:
        return (
            f"one number per row: reduce the last dimension (shape {tuple(exp.shape)})"
        )
    kk = min(k, p.shape[-1])
    if same(got, p[..., kk:].sum(-1)):
        return "the k largest entries, not the first k: use torch.topk"
    if same(got, p.sum(-1) - exp):
        return "the tail is the weight outside the k largest: total minus the top k"
    return None


def _entmax_fn(alpha: float):
    if alpha == 1.0:
        return softmax
    if alpha == 1.5:
        return entmax15
    if alpha == 2.0:
        return sparsemax
    return lambda x: entmax_bisect(x, alpha)


def entmax_vjp(fn) -> CheckResult:
    """Check ``fn(p, g, alpha) -> J^T g`` for the α-entmax output ``p`` (α >= 1).

    ``J = diag(u) - u uᵀ / sum(u)`` with ``u_j = p_j^(2 - α)`` on the support and 0 off
    it; α = 1 is softmax, α = 2 sparsemax. Along the last dimension, any shape.
    """
    cases = []
    gen = torch.Generator().manual_seed(7)
    alphas = [1.5, 2.0, 1.0, 1.2, 3.0, 1.5, 1.5, 2.0]
    for alpha, (lbl, x, _) in zip(alphas, _inputs()[1:] + _inputs()[:1]):
        fwd = _entmax_fn(alpha)
        p = fwd(x).detach()
        g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        xr = x.clone().requires_grad_()
        (fwd(xr) * g).sum().backward()  # the reference: autograd of the library
        hint = "u = p^(2 - alpha) on the support, 0 elsewhere; J^T g = u * (g - ḡ)"
        if alpha == 2.0:
            hint = "for alpha = 2, u is the support indicator: 0^0 must not become 1"
        if "fully" in lbl:
            hint = "an empty support has a zero Jacobian: guard the division by sum(u)"
        cases.append(Case(f"alpha {alpha}, {lbl}", (p, g, alpha), xr.grad, hint))
    fn, compare = diagnosing(fn, cases, _diagnose_vjp)
    return run_check(
        "entmax_vjp", fn, cases, compare=compare, forbid=FORBIDDEN["entmax_vjp"]
    )


def _vjp_with(s: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    total = s.sum(-1, keepdim=True)
    g_bar = (s * g).sum(-1, keepdim=True) / torch.where(total > 0, total, 1.0)
    return s * (g - g_bar)


def _diagnose_vjp(case: Case, got) -> str | None:
    p, g, alpha = case.args
    exp = case.expected
    if not isinstance(got, torch.Tensor) or got.shape != exp.shape:
        return f"return J^T g with the shape of p, {tuple(exp.shape)}"
    support = p > 0
    if bool(torch.isnan(got).any()):
        if not bool(support.any(-1).all()):
            return "an empty support has a zero Jacobian: guard the division by sum(u)"
        return (
            "u must be 0 off the support: p^(2 - alpha) of a zero weight is 1/0 "
            "when alpha > 2 (and 0^0 = 1 when alpha = 2)"
        )
    s = torch.where(support, p.clamp_min(1e-300) ** (2 - alpha), 0.0)
    if alpha != 1.0 and same(got, _vjp_with(p, g)):
        return "u = p is softmax's case only: for alpha-entmax, u = p^(2 - alpha)"
    if not bool(support.all()) and same(got, _vjp_with(p ** (2 - alpha), g)):
        return "u must be 0 off the support: 0^(2 - alpha) is 1 when alpha = 2 (0^0)"
    if same(got, s * g):
        return "subtract the u-weighted mean of g: J^T g = u * (g - ḡ)"
    n = p.shape[-1]
    if same(got, s * (g - g.mean(-1, keepdim=True))) and n > 1:
        return "ḡ is weighted by u: sum(u * g) / sum(u), not a plain mean of g"
    if is_constant(got, exp):
        return "the gradient must depend on p and g"
    return None


def fusedmax_vjp(fn) -> CheckResult:
    """Check ``fn(p, groups, g) -> J^T g`` for fusedmax's output ``p`` (one 1-D row).

    ``groups`` is the group id of every position in the fused scores (as
    :func:`attnlab.kernels.tv1d.prox_tv1d` returns it, as a long tensor). fusedmax is
    sparsemax of the fused scores, and a group's fused value is the mean of its scores
    plus a constant, so ``J^T g`` is sparsemax's ``s * (g - ḡ_support)`` averaged over
    each group. The reference is autograd through :func:`attnlab.fusedmax`.
    """
    from ...kernels.tv1d import prox_tv1d

    gen = torch.Generator().manual_seed(11)
    bumps = _t([0.21, 1.52, 1.33, 1.61, 0.38, 1.17, 1.36, 0.12])  # two fused groups win
    bump = _t([0.1, 1.0, 1.3, 0.8, 1.1, 0.2, -0.4, 0.3])  # the page's example
    noisy = torch.randn(12, generator=gen, dtype=torch.float64)
    cases = []
    for label, x, lam, hint in [
        ("two bumps, λ = 0.1", bumps, 0.1, ""),
        ("two bumps, λ = 0.3", bumps, 0.3, ""),
        ("twelve scores, λ = 0.2", noisy, 0.2, ""),
        (
            "the page's eight scores, λ = 0.3",
            bump,
            0.3,
            "one group holds the whole support: its weights cannot change",
        ),
        (
            "λ = 0: every position its own group",
            noisy,
            0.0,
            "with λ = 0 fusedmax is sparsemax: s * (g - mean of g over the support)",
        ),
        (
            "λ = 5: one group",
            bump,
            5.0,
            "one group holding every key: p is uniform and no change of the scores "
            "can move it",
        ),
        (
            "logits x 1000, λ = 0.3",
            _t([1.0, 3.0, 2.0, -1.0]) * 1000,
            0.3,
            "one key left in the support: the gradient is 0",
        ),
        ("length 1", _t([2.5]), 0.5, "a single key always gets weight 1: gradient 0"),
    ]:
        y, groups = prox_tv1d(x.numpy(), lam)
        p = sparsemax(torch.from_numpy(y)).detach()
        g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        xr = x.clone().requires_grad_()
        (fusedmax(xr, lam=lam) * g).sum().backward()  # autograd of the library
        gr = torch.from_numpy(groups).long()
        cases.append(Case(label, (p, gr, g), xr.grad, hint))
    fn, compare = diagnosing(fn, cases, _diagnose_fused)
    return run_check(
        "fusedmax_vjp", fn, cases, compare=compare, forbid=FORBIDDEN["fusedmax_vjp"]
    )


def _group_op(v: torch.Tensor, groups: torch.Tensor, mean: bool) -> torch.Tensor:
    out = torch.empty_like(v)
    for gid in groups.unique():
        on = groups == gid
        out[on] = v[on].mean() if mean else v[on].sum()
    return out


def _diagnose_fused(case: Case, got) -> str | None:
    p, groups, g = case.args
    exp = case.expected
    if not isinstance(got, torch.Tensor) or got.shape != exp.shape:
        return f"return the gradient with the shape of p, {tuple(exp.shape)}"
    if bool(torch.isnan(got).any()):
        return "no NaN: a position outside the support gets gradient 0"
    s = (p > 0).to(g.dtype)
    sp = _vjp_with(s, g)  # sparsemax's backward at p
    if same(got, exp):
        return None
    if same(got, sp):
        return (
            "that is sparsemax's backward: fusedmax first fuses the scores, and a "
            "group's fused value moves by the mean of its scores' moves; average the "
            "gradient over each group"
        )
    if same(got, _group_op(sp, groups, mean=False)):
        return (
            "summing over a group counts it |G| times: a group's fused value is the "
            "mean of its scores (plus a constant), so average"
        )
    if same(got, _group_op(g, groups, mean=True)) or same(
        got, _group_op(g, groups, mean=True) * s
    ):
        return (
            "add sparsemax's Jacobian: on the support subtract the mean of g over the "
            "support (the weights must still sum to one)"
        )
    if same(got, _group_op(_vjp_with(p, g), groups, mean=True)):
        return "sparsemax's u is the support indicator (1 on the support), not p"
    if is_constant(got, exp) and bool(exp.abs().max() > 1e-9):
        return "the gradient must depend on p, the groups and g"
    return None
