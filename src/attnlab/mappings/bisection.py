"""alpha-entmax and normmax by bisection, and fusedmax (sparsemax after a 1-D total
variation prox)."""

from __future__ import annotations

import numbers

import torch

from ..kernels import sparse as _k
from ..kernels import tv1d as _tv
from .basic import check_scores, jvp_simplex, shift_scores, softmax, upcast
from .sparse import sparsemax_forward


# --------------------------------------------------------------------- alpha-entmax
class EntmaxBisectFunction(torch.autograd.Function):
    """alpha-entmax by bisection; gradients w.r.t. the scores *and* alpha.

    With ``s_j = p_j^(2-alpha)`` on the support and ``s_hat = s / sum(s)``:
    ``dp/dx = diag(s) - s s^T / sum(s)`` and, differentiating the closed form
    ``p = [(alpha-1) x - tau]_+^(1/(alpha-1))`` (Correia et al. 2019),
    ``dp/dalpha = (p - s_hat)/(alpha-1)^2 - (p log p - s_hat sum_j p_j log p_j)/(alpha-1)``.
    At ``alpha = 1`` exactly (softmax) that expression is 0/0; its limit,
    ``dp/dalpha = -(p (log p)^2 - p sum_j p_j (log p_j)^2) / 2``, is used there.
    """

    @staticmethod
    def forward(ctx, x, alpha, dim=-1, n_iter=None):
        z, live = shift_scores(x, dim, "entmax_bisect", floor=None)
        a = alpha.to(x.dtype).expand_as(z.narrow(dim, 0, 1))
        one = a == 1
        a_safe = torch.where(one, torch.full_like(a, 2.0), a)  # bisection off alpha=1
        p = _k.entmax_tau_bisect(z, a_safe, dim, n_iter)
        if bool(one.any()):
            p = torch.where(one, softmax(z, dim), p)  # the limit alpha -> 1
        p = torch.where(live, p, 0)
        ctx.dim = dim
        ctx.alpha_shape = alpha.shape
        ctx.save_for_backward(p, a)
        return p

    @staticmethod
    def backward(ctx, g):
        # differentiable in the saved output p (a double backward is right): the
        # powers are guarded at p = 0, where their derivative would be infinite
        p, a = ctx.saved_tensors
        dim = ctx.dim
        pos = p > 0
        s = torch.where(pos, torch.where(pos, p, 1).pow(2 - a), 0)
        dx = jvp_simplex(g, s, dim)
        da = None
        if ctx.needs_input_grad[1]:
            den = s.sum(dim=dim, keepdim=True)
            s_hat = s / torch.where(den > 0, den, 1)
            logp = torch.log(torch.where(pos, p, 1))
            plogp = torch.where(pos, p * logp, 0)
            ent = plogp.sum(dim=dim, keepdim=True)
            one = a == 1
            am1 = torch.where(one, torch.ones_like(a), a - 1)
            dp = (p - s_hat) / am1**2 - (plogp - s_hat * ent) / am1
            plog2 = plogp * logp
            dp1 = -(plog2 - p * plog2.sum(dim=dim, keepdim=True)) / 2
            dp = torch.where(one, dp1, dp)
            da = (g * dp).sum(dim=dim, keepdim=True).sum_to_size(ctx.alpha_shape)
        return dx, da, None, None


def _check_alpha(
    alpha, x: torch.Tensor, xf: torch.Tensor, dim: int, name: str, low
) -> torch.Tensor:
    """``alpha`` as a tensor that broadcasts against ``x`` with size 1 along ``dim``;
    every value finite and ``> low``."""
    if not isinstance(alpha, torch.Tensor):
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise TypeError(f"{name}: alpha must be a real number, got {alpha!r}")
        alpha = torch.tensor(float(alpha), dtype=xf.dtype, device=x.device)
    elif not (alpha.is_floating_point() or alpha.dtype in _INTS):
        raise TypeError(f"{name}: alpha must be a real number, got dtype {alpha.dtype}")
    bad = ~torch.isfinite(alpha) | ~(alpha > low)
    if bool(bad.any()):
        shown = alpha.detach().flatten()[:6].tolist()
        hint = ""
        if bool(torch.isposinf(alpha).any()):
            hint = " (the limit alpha -> inf is argmax: use attnlab.argmax)"
        raise ValueError(
            f"{name}: alpha must be finite and > {low:g}, got {shown}{hint}"
        )
    sizes = list(x.shape)
    sizes[dim] = 1
    row = torch.Size(sizes)
    try:
        ok = torch.broadcast_shapes(alpha.shape, row) == row
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name}: alpha of shape {tuple(alpha.shape)} must broadcast "
            f"against {tuple(x.shape)} with size 1 along dim={dim}"
        ) from None
    return alpha


def _check_n_iter(n_iter, name: str) -> int | None:
    if n_iter is None:
        return None
    if isinstance(n_iter, bool) or not isinstance(n_iter, int):
        raise TypeError(f"{name}: n_iter must be None or an int >= 1, got {n_iter!r}")
    if n_iter < 1:
        raise ValueError(f"{name}: n_iter must be None or an int >= 1, got {n_iter}")
    return n_iter


_INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def entmax_bisect(
    x: torch.Tensor,
    alpha: float | torch.Tensor = 1.5,
    dim: int = -1,
    n_iter: int | None = None,
) -> torch.Tensor:
    """alpha-entmax for any ``alpha > 0``: ``p = [(alpha-1) x - tau]_+^(1/(alpha-1))``.

    The solution of ``max_{p in simplex} p.x + H_alpha(p)`` (Tsallis entropy; Peters et
    al. 2019). ``alpha = 1`` is softmax (computed as such), ``alpha = 2`` sparsemax;
    ``alpha > 1`` gives sparse weights, ``0 < alpha < 1`` dense weights flatter than
    softmax's (as in the ``entmax`` package). ``tau`` is found by bisection
    (``n_iter >= 1`` halvings, default enough for the dtype). ``alpha`` is a finite
    float or a tensor that broadcasts against ``x`` with size 1 along ``dim`` (e.g.
    one alpha per head, ``(H, 1, 1)``); a tensor ``alpha`` that requires grad gets a
    gradient (Correia, Niculae & Martins 2019 learn it per head).

    Parameters
    ----------
    x : tensor of scores, floating point; ``-inf`` = masked.
    alpha : ``> 0``, a finite number or a tensor broadcastable against ``x`` with size 1
        along ``dim``.
    dim : the dimension to normalise over.
    n_iter : the number of bisection halvings (an int >= 1), or None for the dtype's.

    Returns
    -------
    tensor of the shape and dtype of ``x``: weights that sum to 1 along ``dim`` (0 on a
    fully ``-inf`` row).

    Raises
    ------
    TypeError
        ``x`` is not a floating-point tensor (a list, integer or boolean scores), or
        ``dim`` is not an int.
    ValueError
        ``dim`` is out of range for ``x``; under :func:`attnlab.debug`, ``x`` holds NaN
        or ``+inf``.
        ``alpha`` is not a finite number ``> 0`` or does not broadcast; ``n_iter`` is
        not None or an int >= 1 (TypeError for a non-number ``alpha`` or ``n_iter``).
    """
    empty = check_scores(x, dim, "entmax_bisect")
    xf = upcast(x)
    alpha = _check_alpha(alpha, x, xf, dim, "entmax_bisect", 0.0)
    n_iter = _check_n_iter(n_iter, "entmax_bisect")
    if empty:
        return x.clone()
    if not alpha.is_floating_point():
        alpha = alpha.to(xf.dtype)
    out = EntmaxBisectFunction.apply(xf, alpha, dim, n_iter)
    return out.to(x.dtype)


# -------------------------------------------------------------------------- normmax
def normmax_bisect(
    x: torch.Tensor,
    alpha: float | torch.Tensor = 2.0,
    dim: int = -1,
    n_iter: int | None = None,
) -> torch.Tensor:
    """alpha-normmax: ``argmax_{p in simplex} p.x - ||p||_alpha`` for ``alpha > 1``.

    The regulariser is the alpha-norm itself (not its power), so the weights saturate:
    a large ``alpha`` spreads the mass evenly over the top few scores instead of
    picking one (``entmax.normmax_bisect`` has the same definition). On the support,
    ``p ∝ [x - tau]_+^(1/(alpha-1))`` with ``tau`` the root of
    ``sum_j [x_j - tau]_+^(alpha/(alpha-1)) = 1``, found by bisection. The gradient
    with respect to ``x`` follows from ``dtau = p.dx`` (implicit differentiation of that
    equation); it is written as a straight-through ``tau`` so that autograd computes
    it. ``-inf`` scores get 0, a fully masked row all zeros.

    Parameters
    ----------
    x : tensor of scores, floating point; ``-inf`` = masked.
    alpha : ``> 1``, a finite number or a tensor broadcastable against ``x`` with size 1
        along ``dim``.
    dim : the dimension to normalise over.
    n_iter : the number of bisection halvings (an int >= 1), or None for the dtype's.

    Returns
    -------
    tensor of the shape and dtype of ``x``: weights that sum to 1 along ``dim`` (0 on a
    fully ``-inf`` row).

    Raises
    ------
    TypeError
        ``x`` is not a floating-point tensor (a list, integer or boolean scores), or
        ``dim`` is not an int.
    ValueError
        ``dim`` is out of range for ``x``; under :func:`attnlab.debug`, ``x`` holds NaN
        or ``+inf``.
        ``alpha`` is not a finite number ``> 1`` or does not broadcast; ``n_iter`` is
        not None or an int >= 1 (TypeError for a non-number ``alpha`` or ``n_iter``).
    """
    empty = check_scores(x, dim, "normmax_bisect")
    xf = upcast(x)
    alpha = _check_alpha(alpha, x, xf, dim, "normmax_bisect", 1.0)
    n_iter = _check_n_iter(n_iter, "normmax_bisect")
    if empty:
        return x.clone()
    if n_iter is None:
        n_iter = 60 if xf.dtype == torch.float64 else 32
    a = alpha.to(xf.dtype)
    # max of each row is 0
    z, live = shift_scores(xf, dim, "normmax_bisect", floor=None)
    ad = a.detach().expand_as(z.narrow(dim, 0, 1))
    tau = NormmaxTau.apply(z, ad, dim, n_iter)  # (..., 1, ...), differentiable in z
    u = z - tau
    pos = u > 0
    pt = torch.where(pos, torch.where(pos, u, 1.0) ** (1 / (ad - 1)), 0.0)
    total = pt.sum(dim=dim, keepdim=True)
    p = pt / torch.where(total > 0, total, 1)
    return torch.where(live, p, 0).to(x.dtype)


class NormmaxTau(torch.autograd.Function):
    """normmax's threshold ``tau`` (root of ``sum_j [z_j - tau]_+^gamma = 1``,
    ``gamma = alpha / (alpha - 1)``) by bisection, with its exact derivative.

    Implicit differentiation gives ``dtau/dz_j = p_j``, the weights themselves, which
    the backward recomputes *differentiably* from the input ``z`` and the saved output
    ``tau``: so a double backward differentiates through ``tau`` again and is right
    (a straight-through ``tau`` with a constant ``p`` was off by about 2/3 there). No
    gradient flows to ``alpha``."""

    @staticmethod
    def forward(ctx, z, ad, dim, n_iter):
        zd = z.detach()
        n = z.shape[dim]
        gamma = ad / (ad - 1)  # exponent of the constraint
        lo = torch.full_like(ad, -1.0)  # f(-1) >= 0: the top entry alone gives 1
        hi = -((1.0 / n) ** (1 / gamma))  # f(hi) <= 0: all n equal at most give 1
        for _ in range(n_iter):  # f(tau) = sum [z - tau]_+^gamma - 1 decreases in tau
            mid = (lo + hi) / 2
            u = torch.clamp(zd - mid, min=0)
            big = (u**gamma).sum(dim=dim, keepdim=True) >= 1
            lo = torch.where(big, mid, lo)
            hi = torch.where(big, hi, mid)
        tau = (lo + hi) / 2
        ctx.dim = dim
        ctx.save_for_backward(z, ad, tau)
        return tau

    @staticmethod
    def backward(ctx, g):
        z, ad, tau = ctx.saved_tensors
        u = z - tau
        pos = u > 0
        pt = torch.where(pos, torch.where(pos, u, 1.0) ** (1 / (ad - 1)), 0.0)
        total = pt.sum(dim=ctx.dim, keepdim=True)
        p = pt / torch.where(total > 0, total, 1)  # dtau/dz
        return g * p, None, None, None


# ------------------------------------------------------------------------- fusedmax
class FusedmaxFunction(torch.autograd.Function):
    """fusedmax = sparsemax(prox_TV(x)); Jacobian = J_sparsemax · J_TV (group means)."""

    @staticmethod
    def forward(ctx, x, lam=1.0, dim=-1):
        shift_scores(x, dim, "fusedmax")  # validates NaN / +inf
        y, ctx.groups = _tv.prox_tv1d_batch(x.detach(), lam, dim)
        p, _ = sparsemax_forward(y, dim)
        ctx.dim = dim
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        gy = jvp_simplex(g, (p > 0).to(g.dtype), ctx.dim)
        return _tv.group_mean(gy, ctx.groups, ctx.dim), None, None


def fusedmax(x: torch.Tensor, lam: float = 1.0, dim: int = -1) -> torch.Tensor:
    """fusedmax (Niculae & Blondel 2017): sparsemax after fusing neighbours.

    ``Omega(p) = 1/2 ||p||^2 + lam * sum_j |p_{j+1} - p_j|``; its solution is
    ``sparsemax(prox_{lam TV}(x))``. The 1-D TV prox is computed exactly by Condat's
    direct algorithm (sequential, on CPU in float64, then moved back), so fusedmax
    prefers contiguous spans of equal weight. ``-inf`` positions are dropped before the
    prox (their neighbours become adjacent) and get weight 0. ``lam = 0`` is sparsemax.

    Parameters
    ----------
    x : tensor of scores, floating point; ``-inf`` = masked (dropped before the prox).
    lam : the fused-lasso strength, a finite number ``>= 0``.
    dim : the dimension to normalise over (neighbours are adjacent along it).

    Returns
    -------
    tensor of the shape and dtype of ``x``: weights that sum to 1 along ``dim``, constant
    on fused spans, exact zeros outside the support.

    Raises
    ------
    TypeError
        ``x`` is not a floating-point tensor (a list, integer or boolean scores), or
        ``dim`` is not an int.
    ValueError
        ``dim`` is out of range for ``x``; under :func:`attnlab.debug`, ``x`` holds NaN
        or ``+inf``.
        ``lam`` is negative or not finite (TypeError for a non-number).
    """
    empty = check_scores(x, dim, "fusedmax")
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real):
        raise TypeError(f"fusedmax: lam must be a real number, got {lam!r}")
    lam_f = float(lam)
    if not 0 <= lam_f < float("inf"):
        raise ValueError(f"fusedmax: lam must be finite and >= 0, got {lam}")
    if empty:
        return x.clone()
    xf = upcast(x)
    return FusedmaxFunction.apply(xf, lam_f, dim).to(x.dtype)
