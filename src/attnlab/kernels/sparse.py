"""Thresholds of the sparse mappings (private numerics of :mod:`attnlab.mappings`).

All functions work along ``dim`` of a *shifted* float tensor ``z = x - max(x)``: the
largest entry of every row is ``0``. Entries below ``-1`` (``-inf`` included) can never
be in the support of sparsemax, so callers clamp ``z`` to ``>= -2`` first and no
``inf`` ever reaches a sum.

sparsemax:  p = [z - tau]_+          with   sum_j [z_j - tau]_+ = 1
1.5-entmax: p = [z/2 - tau]_+^2      with   sum_j [z_j/2 - tau]_+^2 = 1
alpha-entmax: p = [(alpha-1) z - tau]_+^(1/(alpha-1))   (solved by bisection)

In every case ``tau`` lies in ``[-1, 0)``: the top entry has ``p <= 1``.
"""

from __future__ import annotations

import math

import torch

FLOOR = -2.0  # below every possible threshold: clamping z here changes nothing


# ----------------------------------------------------------------------------- sort
def sparsemax_tau_sort(z: torch.Tensor, dim: int) -> torch.Tensor:
    """Exact sparsemax threshold by a full sort, O(n log n) (Martins & Astudillo 2016).

    Sorted descending, ``k`` is the largest index with ``1 + k z_(k) > sum_{i<=k} z_(i)``
    and ``tau = (sum_{i<=k} z_(i) - 1) / k``.
    """
    zs, _ = torch.sort(z, dim=dim, descending=True)
    cs = zs.cumsum(dim) - 1
    r = _arange_like(z, dim)
    k = (r * zs > cs).sum(dim=dim, keepdim=True)
    return cs.gather(dim, k - 1) / k.to(z.dtype)


def entmax15_tau_sort(z: torch.Tensor, dim: int) -> torch.Tensor:
    """Exact 1.5-entmax threshold by a full sort (Peters et al. 2019).

    For the ``k`` largest entries of ``y = z/2`` the equation
    ``sum (y_i - tau)^2 = 1`` gives ``tau_k = mean_k - sqrt(1/k - var_k)``; the answer
    is ``tau_k`` for the largest ``k`` with ``tau_k <= y_(k)``.
    """
    ys, _ = torch.sort(z / 2, dim=dim, descending=True)
    r = _arange_like(z, dim)
    mean = ys.cumsum(dim) / r
    var = (ys * ys).cumsum(dim) / r - mean * mean
    tau = mean - torch.sqrt(torch.clamp(1 / r - var, min=0))
    k = (tau <= ys).sum(dim=dim, keepdim=True)
    return tau.gather(dim, k - 1)


def _arange_like(z: torch.Tensor, dim: int) -> torch.Tensor:
    n = z.shape[dim]
    shape = [1] * z.dim()
    shape[dim] = n
    return torch.arange(1, n + 1, device=z.device, dtype=z.dtype).view(shape)


# ------------------------------------------------------------------ threshold iteration
def sparsemax_tau_iter(z: torch.Tensor, dim: int, max_iter: int = 50) -> torch.Tensor:
    """Exact sparsemax threshold without sorting (Michelot 1986 iteration).

    Start from ``tau = -1`` (a lower bound). Repeat: ``S = {j : z_j > tau}``,
    ``tau = (sum_S z - 1) / |S|``. Each step is a Newton step on the piecewise-linear
    ``f(tau) = sum [z - tau]_+ - 1``; ``tau`` rises monotonically and ``S`` shrinks to
    the true support in finitely many steps. Once ``S`` stops changing, ``tau`` is
    exact (it is the closed form on the true support). Rows that have not settled after
    ``max_iter`` steps (never seen in practice) fall back to the sort.
    """
    tau = torch.full_like(z.narrow(dim, 0, 1), -1.0)
    k_old = torch.full(tau.shape, -1, dtype=torch.long, device=z.device)
    for _ in range(max_iter):
        supp = z > tau
        k = supp.sum(dim=dim, keepdim=True)
        s1 = torch.where(supp, z, 0).sum(dim=dim, keepdim=True)
        tau = (s1 - 1) / k.to(z.dtype)
        changed = k != k_old
        if not bool(changed.any()):
            return tau
        k_old = k
    return _fallback(z, dim, tau, changed, sparsemax_tau_sort)


def entmax15_tau_iter(z: torch.Tensor, dim: int, max_iter: int = 50) -> torch.Tensor:
    """Exact 1.5-entmax threshold without sorting: Newton from below + exact finish.

    ``f(tau) = sum [y - tau]_+^2`` (``y = z/2``) is convex and decreasing, so Newton
    steps from the lower bound ``tau = -1`` rise monotonically towards the root and
    ``S = {y > tau}`` always contains the true support. At every step we also solve the
    quadratic on ``S`` exactly (``tau_S = mean_S - sqrt(1/|S| - var_S)``); when no
    element of ``S`` falls at or below ``tau_S``, ``S`` *is* the support and ``tau_S``
    the exact threshold. Rows unsettled after ``max_iter`` steps fall back to the sort.
    """
    y = z / 2
    y2 = y * y
    tau = torch.full_like(z.narrow(dim, 0, 1), -1.0)
    out = torch.empty_like(tau)
    done = torch.zeros(tau.shape, dtype=torch.bool, device=z.device)
    for _ in range(max_iter):
        supp = y > tau
        k = supp.sum(dim=dim, keepdim=True).to(z.dtype)
        s1 = torch.where(supp, y, 0).sum(dim=dim, keepdim=True)
        s2 = torch.where(supp, y2, 0).sum(dim=dim, keepdim=True)
        mean = s1 / k
        delta = 1 / k - (s2 / k - mean * mean)
        tau_s = mean - torch.sqrt(torch.clamp(delta, min=0))
        ok = (delta >= 0) & ((y > tau_s).sum(dim=dim, keepdim=True) == k)
        new = ok & ~done
        out = torch.where(new, tau_s, out)
        done = done | ok
        if bool(done.all()):
            return out
        # Newton step on f(tau) = s2 - 2 tau s1 + k tau^2 = 1 (restricted to S)
        f = s2 - 2 * tau * s1 + k * tau * tau - 1
        tau = tau + f / (2 * (s1 - k * tau))
    return _fallback(z, dim, out, ~done, entmax15_tau_sort)


def _fallback(z, dim, tau, bad, sort_fn):
    """Recompute the threshold by sorting for the rows flagged ``bad``."""
    if not bool(bad.any()):
        return tau
    zt = z.movedim(dim, -1)
    bt = bad.movedim(dim, -1).squeeze(-1)
    tt = tau.movedim(dim, -1).clone()
    tt[bt] = sort_fn(zt[bt], -1)
    return tt.movedim(-1, dim)


# ------------------------------------------------------------------------- bisection
def entmax_tau_bisect(
    z: torch.Tensor, alpha: torch.Tensor, dim: int, n_iter: int | None = None
) -> torch.Tensor:
    """alpha-entmax by bisection on ``tau`` for any ``alpha > 1``; returns ``p``.

    ``f(tau) = sum [(alpha-1) z - tau]_+^(1/(alpha-1))`` decreases in ``tau``; the root
    of ``f = 1`` lies in ``[-1, -(1/n)^(alpha-1)]``. Each step halves the bracket, so
    ``n_iter`` steps give ``2^-n_iter`` accuracy (default: enough for the dtype). The
    result is renormalised to sum to one.
    """
    if n_iter is None:
        n_iter = 60 if z.dtype == torch.float64 else 32
    n = z.shape[dim]
    am1 = alpha - 1
    y = torch.clamp(am1 * z, min=FLOOR)
    beta = 1 / am1
    lo = torch.full_like(y.narrow(dim, 0, 1), -1.0)
    hi = torch.zeros_like(lo) - (1.0 / n) ** am1
    for _ in range(n_iter):
        mid = (lo + hi) / 2
        f = (torch.clamp(y - mid, min=0) ** beta).sum(dim=dim, keepdim=True)
        big = f >= 1
        lo = torch.where(big, mid, lo)
        hi = torch.where(big, hi, mid)
    p = torch.clamp(y - (lo + hi) / 2, min=0) ** beta
    total = p.sum(dim=dim, keepdim=True)
    return p / torch.where(total > 0, total, 1)


# ------------------------------------------------- fast threshold iteration (default)
def _shifted(x: torch.Tensor, dim: int, name: str) -> torch.Tensor:
    """``z = x - max(x)`` along ``dim`` (fully masked rows shifted by 0); raises
    ValueError on NaN or ``+inf``."""
    m = x.amax(dim=dim, keepdim=True)
    worst = float(m.amax())  # NaN propagates through amax
    if math.isnan(worst) or worst == math.inf:
        raise ValueError(f"{name}: x contains NaN or +inf (shape {tuple(x.shape)})")
    return x - torch.nan_to_num(m, neginf=0.0)


BLOCK = 32  # block maxima for the warm start: one score in 32


def _warm_start(z: torch.Tensor, dim: int, passes) -> torch.Tensor:
    """A lower bound on the threshold of every row, from a subset of its scores.

    The threshold of any subset of a row is at most the row's own (sparsemax:
    ``sum_S [z - tau]_+ <= sum [z - tau]_+``; the same for 1.5-entmax's squares), so
    solving the problem on the row's block maxima (one score in ``BLOCK``, ``n / BLOCK``
    of them, cheap) gives a start above ``-1`` and below the answer, from which far
    fewer passes over the whole row remain. ``-1`` for short rows or ``dim`` not last.
    """
    n = z.shape[dim]
    lower = torch.full_like(z.narrow(dim, 0, 1), -1.0)
    if n < 8 * BLOCK or dim not in (-1, z.dim() - 1):
        return lower
    nb = n // BLOCK
    maxima = (
        z.narrow(-1, 0, nb * BLOCK).unflatten(-1, (nb, BLOCK)).amax(-1)
    )  # (..., nb)
    out = passes(maxima, lower, -1, 16)
    return lower if out is None else out[-1]


def _sparsemax_passes(z, tau, dim, max_iter):
    """Michelot passes on ``z`` from the lower bound ``tau``: ``(p, |S|, s, tau)`` once
    no support size changes, else ``None``."""
    r, sg = torch.empty_like(z), torch.empty_like(z)
    size_old = None
    for _ in range(max_iter):
        torch.sub(z, tau, out=r).clamp_(min=0)  # [z - tau]_+
        total = r.sum(dim=dim, keepdim=True)
        size = torch.sign(r, out=sg).sum(dim=dim, keepdim=True)  # |S|
        if size_old is not None and torch.equal(size, size_old):
            return r, size, sg, tau  # p, |S|, the support indicator, the threshold
        tau = tau + (total - 1) / size.clamp(min=1)  # dead rows: |S| = 0
        size_old = size
    return None


def sparsemax_iter(x: torch.Tensor, dim: int, name: str, max_iter: int = 16):
    """sparsemax's ``(p, |S|, s)`` by threshold iteration in a few whole-tensor passes
    (``s`` is the support indicator as floats, 1 on the support, else 0).

    Michelot's iteration on the shifted scores ``z``, from a lower bound on ``tau``
    (``-1``, or better the threshold of the row's block maxima, :func:`_warm_start`):
    each pass computes ``r = [z - tau]_+``, its row sum and its number of nonzeros
    (``sign`` summed: no boolean tensors, which are slow on the CPU) and moves ``tau``
    to ``tau + (sum r - 1) / |S|``. The support only shrinks; when a pass leaves every
    row's support size unchanged, ``tau`` is exact and ``r`` *is* the output. Returns
    ``None`` if some row is still moving after ``max_iter`` passes (adversarial inputs;
    the caller finishes with the partial sort, exactly).
    """
    z = _shifted(x, dim, name)
    out = _sparsemax_passes(z, _warm_start(z, dim, _sparsemax_passes), dim, max_iter)
    return None if out is None else out[:3]


def _entmax15_passes(y, tau, dim, max_iter):
    """Newton passes on ``y = z / 2`` from the lower bound ``tau`` with an exact finish:
    ``(sqrt(p), sum_S sqrt(p), tau)``, or ``None`` if some row has not settled."""
    r, sg = torch.empty_like(y), torch.empty_like(y)
    size_old = None
    for _ in range(max_iter):
        torch.sub(y, tau, out=r).clamp_(min=0)  # [y - tau]_+
        s1 = r.sum(dim=dim, keepdim=True)
        norm = torch.linalg.vector_norm(r, dim=dim, keepdim=True)  # one fused pass
        s2 = norm * norm
        size = torch.sign(r, out=sg).sum(dim=dim, keepdim=True)
        if size_old is not None and torch.equal(size, size_old):
            k = size.clamp(min=1)
            a = s1 / k
            tau_s = tau + a - torch.sqrt(torch.clamp(1 / k - s2 / k + a * a, min=0))
            torch.sub(y, tau_s, out=r).clamp_(min=0)  # sqrt(p) if tau_s is exact
            if torch.equal(torch.sign(r, out=sg).sum(dim=dim, keepdim=True), size):
                return r, r.sum(dim=dim, keepdim=True), tau_s
        # Newton from below on the convex h(tau) = sqrt(s2) = 1 (steps about twice
        # those on s2 = 1 far from the root); dead rows (s1 = 0) move down, harmlessly
        tau = tau + (norm - 1) * norm / s1.clamp(min=1e-30)
        size_old = size
    return None


def entmax15_iter(x: torch.Tensor, dim: int, name: str, max_iter: int = 16):
    """1.5-entmax's ``(sqrt(p), sum_S sqrt(p))`` by Newton passes and an exact finish.

    On ``y = z / 2``, from a lower bound on ``tau`` (``-1`` or :func:`_warm_start`),
    each pass computes ``r = [y - tau]_+``, its sum ``s1``, its squared norm ``s2`` and
    its support size ``k``, and takes a Newton step on ``sqrt(s2) = 1`` (a norm of
    convex functions: convex and decreasing in ``tau``, so the steps rise monotonically
    and the support only shrinks). When a step leaves the support sizes unchanged, the
    quadratic on that support is solved exactly (``tau_S = tau + s1/k - sqrt(1/k -
    s2/k + (s1/k)^2)``) and accepted if it keeps every element of the support: one pass
    that also produces the output. ``None`` if some row has not settled (the caller
    falls back to the partial sort).
    """
    y = _shifted(x, dim, name).mul_(0.5)
    out = _entmax15_passes(y, _warm_start(y, dim, _entmax15_passes), dim, max_iter)
    return None if out is None else out[:2]


# ------------------------------------------------------------ partial sort (top-k)
def _prefix_sparsemax(zs: torch.Tensor, dim: int):
    """On the sorted prefix ``zs`` (top-k of each row, shifted): tau, |S|, |S| < k."""
    cs = zs.cumsum(dim) - 1
    r = _arange_like(zs, dim)
    size = (r * zs > cs).sum(dim=dim, keepdim=True)
    tau = cs.gather(dim, size - 1) / size.to(zs.dtype)
    return tau, size.to(zs.dtype), size < zs.shape[dim]


def _prefix_entmax15(zs: torch.Tensor, dim: int):
    """Same for 1.5-entmax; the third value returned is ``sum_S sqrt(p) = |S| (mean - tau)``."""
    ys = zs / 2
    r = _arange_like(zs, dim)
    mean = ys.cumsum(dim) / r
    delta = 1 / r - ((ys * ys).cumsum(dim) / r - mean * mean)
    tau = mean - torch.sqrt(torch.clamp(delta, min=0))
    size = (tau <= ys).sum(dim=dim, keepdim=True)
    tau_k = tau.gather(dim, size - 1)
    s_sum = size.to(zs.dtype) * (mean.gather(dim, size - 1) - tau_k)
    return tau_k, s_sum, size < zs.shape[dim]


PREFIX = {"sparsemax": _prefix_sparsemax, "entmax15": _prefix_entmax15}
FIRST_K = {"sparsemax": 16, "entmax15": 32}  # a little above typical support sizes


def threshold_topk(
    x: torch.Tensor, dim: int, kind: str, name: str, first_k: int | None = None
):
    """Exact threshold from a partial sort, with an exact fallback.

    Sort only the ``k`` largest scores of each row (``torch.topk``) and run the sorted
    algorithm on that prefix. If the support found is shorter than ``k`` it is the true
    support (the support condition holds for a prefix of the sorted scores and fails
    after it), so the threshold is exact. Rows whose support fills the prefix are redone
    with ``4k``, and so on up to the full sort. ``first_k`` overrides the first ``k``
    (the ``k`` argument of ``entmax.sparsemax``).

    Returns ``(m, tau, aux)``, each with size 1 along ``dim``: the row max ``m`` (0 for
    a fully masked row, whose weights ``[x - m - tau]_+`` are then all 0), the threshold
    ``tau`` for the shifted scores ``x - m``, and ``aux`` (support size for sparsemax,
    ``sum_S sqrt(p)`` for 1.5-entmax). Raises ValueError on NaN or ``+inf``.
    """
    n = x.shape[dim]
    k = min(n, FIRST_K[kind] if first_k is None else first_k)
    vals = _top(x, k, dim)
    top = vals.narrow(dim, 0, 1)
    worst = float(top.amax())  # NaN propagates through amax
    if math.isnan(worst) or worst == math.inf:
        raise ValueError(f"{name}: x contains NaN or +inf (shape {tuple(x.shape)})")
    m = torch.nan_to_num(top, neginf=0.0)  # a fully masked row is shifted by 0
    tau, aux, ok = PREFIX[kind](torch.clamp(vals - m, min=FLOOR), dim)
    if k < n:
        ok |= torch.isneginf(top)  # a fully masked row has nothing to find
        if not bool(ok.all()):
            _redo(x, m, tau, aux, ok, dim, kind, 4 * k)
    return m, tau, aux


def _top(x: torch.Tensor, k: int, dim: int) -> torch.Tensor:
    """The ``k`` largest entries along ``dim``, sorted (a full sort is faster for k ~ n)."""
    if 2 * k >= x.shape[dim]:
        return torch.sort(x, dim=dim, descending=True).values.narrow(dim, 0, k)
    return torch.topk(x, k, dim=dim).values


def _redo(x, m, tau, aux, ok, dim, kind, k):
    """Recompute (in place) ``tau`` and ``aux`` for the rows with ``ok == False``."""
    n = x.shape[dim]
    rows = x.movedim(dim, -1).reshape(-1, n)
    bad = (~ok).movedim(dim, -1).reshape(-1).nonzero().squeeze(-1)
    tau_f = tau.movedim(dim, -1).reshape(-1).clone()  # (rows,) working copies
    aux_f = aux.movedim(dim, -1).reshape(-1).clone()
    m_f = m.movedim(dim, -1).reshape(-1)
    while bad.numel():
        k = min(n, k)
        vals = _top(rows[bad], k, -1)
        t, a, good = PREFIX[kind](torch.clamp(vals - m_f[bad, None], min=FLOOR), -1)
        good = good.squeeze(-1) | (k == n)
        tau_f[bad[good]] = t.squeeze(-1)[good]
        aux_f[bad[good]] = a.squeeze(-1)[good]
        bad, k = bad[~good], 4 * k
    shape = tau.movedim(dim, -1).shape  # write the copies back in place
    tau.copy_(tau_f.view(shape).movedim(-1, dim))
    aux.copy_(aux_f.view(shape).movedim(-1, dim))
