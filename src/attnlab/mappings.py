"""Mappings from scores to weights: softmax and its sparse and structured cousins.

Every mapping here is a *regularised argmax* over the probability simplex

    pi_Omega(x) = argmax_{p in simplex}  p.x - Omega(p)

with ``Omega = 0`` (argmax), negative Shannon entropy (softmax), ``1/2 ||p||^2``
(sparsemax), the Tsallis entropy (alpha-entmax) or ``1/2 ||p||^2 + lam * TV(p)``
(fusedmax). Each takes scores ``(..., n, ...)`` and returns weights of the same shape,
on the simplex along ``dim``. Positions at ``-inf`` get exactly ``0``; a row whose every
entry is ``-inf`` (a fully masked row) gets all zeros, never NaN — in the forward pass
and in the backward pass. ``NaN`` or ``+inf`` scores raise ``ValueError``.
float16/bfloat16 inputs are computed in float32 and cast back.

Layering (as in deep-spin/entmax): private numerics in :mod:`attnlab.kernels` →
``torch.autograd.Function`` with a hand-written backward → lowercase function → thin
CamelCase ``nn.Module``.
"""

from __future__ import annotations

import torch
from torch import nn

from .kernels import sparse as _k
from .kernels import tv1d as _tv

__all__ = [
    "softmax",
    "sigmoid",
    "argmax",
    "sparsemax",
    "entmax15",
    "entmax_bisect",
    "fusedmax",
    "SparsemaxFunction",
    "Entmax15Function",
    "EntmaxBisectFunction",
    "FusedmaxFunction",
    "Softmax",
    "Sparsemax",
    "Entmax15",
    "EntmaxBisect",
    "Fusedmax",
]

_HALF = (torch.float16, torch.bfloat16)


def _check_dim(x: torch.Tensor, dim: int, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} expects a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError(f"{name} needs at least one dimension, got a scalar")
    if not -x.dim() <= dim < x.dim():
        raise ValueError(
            f"{name}: dim={dim} is out of range for shape {tuple(x.shape)}"
        )


def _check_float(x: torch.Tensor, name: str) -> None:
    if not x.is_floating_point():
        raise TypeError(f"{name} expects floating-point scores, got {x.dtype}")


def softmax(x: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """``softmax(x / temperature)`` along ``dim``; fully ``-inf`` rows give zeros.

    The solution of ``max_{p in simplex} p.x/t + H(p)`` (Shannon entropy H).
    float16/bfloat16 inputs are computed in float32 and cast back.
    """
    _check_dim(x, dim, "softmax")
    if not temperature > 0:
        raise ValueError(f"softmax: temperature must be > 0, got {temperature}")
    xf = x.float() if x.dtype in _HALF else x
    xf = xf / temperature
    # Subtract the row max so exp never overflows; a row that is all -inf has max -inf,
    # so we shift it by 0 instead and its exp is all zeros (not NaN).
    m = xf.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(xf - m)
    z = e.sum(dim=dim, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    return p.to(x.dtype)


def sigmoid(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Independent weights in (0, 1): *not* on the simplex (rows need not sum to 1)."""
    _check_dim(x, dim, "sigmoid")
    return torch.sigmoid(x)


def argmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """One-hot weights on the (first) largest score: ``Omega = 0``, a vertex of the simplex.

    Piecewise constant, so its gradient is zero almost everywhere: the result carries no
    gradient. A fully ``-inf`` row gives zeros.
    """
    _check_dim(x, dim, "argmax")
    _check_float(x, "argmax")
    idx = x.argmax(dim=dim, keepdim=True)
    out = torch.zeros_like(x).scatter_(dim, idx, 1.0)
    live = torch.isfinite(x.amax(dim=dim, keepdim=True))
    return torch.where(live, out, torch.zeros_like(out)).detach()


# ----------------------------------------------------------------- shared plumbing
def _shift(x: torch.Tensor, dim: int, name: str, floor: float | None = _k.FLOOR):
    """``z = x - max(x)`` clamped at ``floor``, and the mask of live (not -inf) rows."""
    m = x.amax(dim=dim, keepdim=True)
    if bool(torch.isnan(m).any() | (m == float("inf")).any()):
        raise ValueError(f"{name}: scores contain NaN or +inf (shape {tuple(x.shape)})")
    live = m > float("-inf")
    z = x - torch.where(live, m, torch.zeros_like(m))
    return (z if floor is None else torch.clamp(z, min=floor)), live


def _jvp_simplex(g: torch.Tensor, s: torch.Tensor, dim: int) -> torch.Tensor:
    """``J^T g`` for ``J = diag(s) - s s^T / sum(s)``; zero where ``s`` is all zero."""
    den = s.sum(dim=dim, keepdim=True)
    q = (g * s).sum(dim=dim, keepdim=True) / torch.where(den > 0, den, 1)
    return s * (g - q)


# ------------------------------------------------------------------------ sparsemax
_METHODS = ("topk", "iter", "sort")


def _method(method: str, name: str) -> str:
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    return method


def _sparsemax_forward(x, dim, method="topk"):
    """``(p, |S|)``: the weights and the support size of each row."""
    if method == "topk":
        m, tau, size = _k.threshold_topk(x, dim, "sparsemax", "sparsemax")
        return (x - m).sub_(tau).clamp_(min=0), size  # -inf -> 0; dead rows: m = 0
    z, live = _shift(x, dim, "sparsemax")
    tau_fn = _k.sparsemax_tau_iter if method == "iter" else _k.sparsemax_tau_sort
    p = torch.where(live, torch.clamp(z - tau_fn(z, dim), min=0), 0)
    return p, (p > 0).sum(dim=dim, keepdim=True).to(p.dtype)


class SparsemaxFunction(torch.autograd.Function):
    """sparsemax with its Jacobian ``diag(s) - s s^T / |S|`` (``s`` = support indicator).

    Backward: ``J^T g = s * (g - mean_S(g))``, two passes over the row.
    """

    @staticmethod
    def forward(ctx, x, dim=-1, method="topk"):
        p, size = _sparsemax_forward(x, dim, method)
        ctx.dim = dim
        ctx.save_for_backward(p, size)
        return p

    @staticmethod
    def backward(ctx, g):
        p, size = ctx.saved_tensors
        supp = p > 0
        gs = torch.where(supp, g, 0)
        mean = gs.sum(dim=ctx.dim, keepdim=True) / torch.clamp(size, min=1)
        return torch.where(supp, gs.sub_(mean), 0), None, None


def sparsemax(x: torch.Tensor, dim: int = -1, *, method: str = "topk") -> torch.Tensor:
    """Euclidean projection of the scores onto the simplex (Martins & Astudillo 2016).

    ``sparsemax(x) = argmin_{p in simplex} ||p - x||^2 = [x - tau]_+`` with ``tau`` the
    threshold that makes the weights sum to one, ``tau = (sum_S x - 1) / |S|`` on the
    support ``S``. How ``tau`` is found (all exact):

    * ``"topk"`` (default): sort only the top few scores of each row, check that the
      support found is shorter than the prefix, else retry with a longer one;
    * ``"iter"``: sort-free threshold iterations (Michelot) with an exact support check;
    * ``"sort"``: the textbook O(n log n) full sort.

    Parameters
    ----------
    x : tensor ``(..., n, ...)`` of scores (``-inf`` = masked).
    dim : the dimension to normalise over.
    """
    _check_dim(x, dim, "sparsemax")
    _check_float(x, "sparsemax")
    xf = x.float() if x.dtype in _HALF else x
    return SparsemaxFunction.apply(xf, dim, _method(method, "sparsemax")).to(x.dtype)


# ------------------------------------------------------------------------ 1.5-entmax
def _entmax15_forward(x, dim, method="topk"):
    """``(p, sum_S sqrt(p))`` for 1.5-entmax."""
    if method == "topk":
        m, tau, s_sum = _k.threshold_topk(x, dim, "entmax15", "entmax15")
        p = torch.add(-tau, x - m, alpha=0.5).clamp_(min=0).square_()  # [z/2 - tau]_+^2
        return p, s_sum
    z, live = _shift(x, dim, "entmax15")
    tau_fn = _k.entmax15_tau_iter if method == "iter" else _k.entmax15_tau_sort
    p = torch.where(live, torch.clamp(z / 2 - tau_fn(z, dim), min=0).square(), 0)
    return p, p.sqrt().sum(dim=dim, keepdim=True)


class Entmax15Function(torch.autograd.Function):
    """1.5-entmax with Jacobian ``diag(s) - s s^T / sum(s)``, ``s = sqrt(p)``."""

    @staticmethod
    def forward(ctx, x, dim=-1, method="topk"):
        p, s_sum = _entmax15_forward(x, dim, method)
        ctx.dim = dim
        ctx.save_for_backward(p, s_sum)
        return p

    @staticmethod
    def backward(ctx, g):
        p, s_sum = ctx.saved_tensors
        s = p.sqrt()
        gs = g * s
        den = torch.where(s_sum > 0, s_sum, 1)
        mean = gs.sum(dim=ctx.dim, keepdim=True) / den
        return torch.addcmul(gs, s, mean, value=-1), None, None


def entmax15(x: torch.Tensor, dim: int = -1, *, method: str = "topk") -> torch.Tensor:
    """1.5-entmax (Peters, Niculae & Martins 2019): ``p = [x/2 - tau]_+^2``.

    The solution of ``max_{p in simplex} p.x + H_1.5(p)`` with the Tsallis entropy
    ``H_a(p) = (1 - sum p_j^a) / (a (a - 1))``; sparse like sparsemax, smooth like
    softmax. On a known support ``tau`` solves a quadratic exactly; ``method`` picks how
    the support is found, as in :func:`sparsemax` (``"iter"`` uses Newton steps with an
    exact support check). All methods are exact.
    """
    _check_dim(x, dim, "entmax15")
    _check_float(x, "entmax15")
    xf = x.float() if x.dtype in _HALF else x
    return Entmax15Function.apply(xf, dim, _method(method, "entmax15")).to(x.dtype)


# --------------------------------------------------------------------- alpha-entmax
class EntmaxBisectFunction(torch.autograd.Function):
    """alpha-entmax by bisection; gradients w.r.t. the scores *and* alpha.

    With ``s_j = p_j^(2-alpha)`` on the support and ``s_hat = s / sum(s)``:
    ``dp/dx = diag(s) - s s^T / sum(s)`` and, differentiating the closed form
    ``p = [(alpha-1) x - tau]_+^(1/(alpha-1))`` (Correia et al. 2019),
    ``dp/dalpha = (p - s_hat)/(alpha-1)^2 - (p log p - s_hat sum_j p_j log p_j)/(alpha-1)``.
    """

    @staticmethod
    def forward(ctx, x, alpha, dim=-1, n_iter=None):
        z, live = _shift(x, dim, "entmax_bisect", floor=None)
        a = alpha.to(x.dtype).expand_as(z.narrow(dim, 0, 1))
        p = torch.where(live, _k.entmax_tau_bisect(z, a, dim, n_iter), 0)
        ctx.dim = dim
        ctx.alpha_shape = alpha.shape
        ctx.save_for_backward(p, a)
        return p

    @staticmethod
    def backward(ctx, g):
        p, a = ctx.saved_tensors
        dim = ctx.dim
        pos = p > 0
        s = torch.where(pos, p.pow(2 - a), 0)
        dx = _jvp_simplex(g, s, dim)
        da = None
        if ctx.needs_input_grad[1]:
            den = s.sum(dim=dim, keepdim=True)
            s_hat = s / torch.where(den > 0, den, 1)
            plogp = torch.where(pos, p * torch.log(torch.where(pos, p, 1)), 0)
            ent = plogp.sum(dim=dim, keepdim=True)
            dp = (p - s_hat) / (a - 1) ** 2 - (plogp - s_hat * ent) / (a - 1)
            da = (g * dp).sum(dim=dim, keepdim=True).sum_to_size(ctx.alpha_shape)
        return dx, da, None, None


def entmax_bisect(
    x: torch.Tensor,
    alpha: float | torch.Tensor = 1.5,
    dim: int = -1,
    n_iter: int | None = None,
) -> torch.Tensor:
    """alpha-entmax for any ``alpha > 1``: ``p = [(alpha-1) x - tau]_+^(1/(alpha-1))``.

    The solution of ``max_{p in simplex} p.x + H_alpha(p)`` (Tsallis entropy; Peters et
    al. 2019). ``alpha -> 1`` gives softmax, ``alpha = 2`` sparsemax. ``tau`` is found by
    bisection (``n_iter`` halvings, default enough for the dtype). ``alpha`` is a float
    or a tensor that broadcasts against ``x`` with size 1 along ``dim`` (e.g. one alpha
    per head, ``(H, 1, 1)``); a tensor ``alpha`` that requires grad gets a gradient
    (Correia, Niculae & Martins 2019 learn it per head).
    """
    _check_dim(x, dim, "entmax_bisect")
    _check_float(x, "entmax_bisect")
    xf = x.float() if x.dtype in _HALF else x
    if not isinstance(alpha, torch.Tensor):
        alpha = torch.tensor(float(alpha), dtype=xf.dtype, device=x.device)
    if not bool((alpha > 1).all()):
        raise ValueError(f"entmax_bisect: alpha must be > 1, got {alpha}")
    row = x.narrow(dim, 0, 1).shape
    try:
        ok = torch.broadcast_shapes(alpha.shape, row) == row
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"entmax_bisect: alpha of shape {tuple(alpha.shape)} must broadcast "
            f"against {tuple(x.shape)} with size 1 along dim={dim}"
        ) from None
    out = EntmaxBisectFunction.apply(xf, alpha, dim, n_iter)
    return out.to(x.dtype)


# ------------------------------------------------------------------------- fusedmax
class FusedmaxFunction(torch.autograd.Function):
    """fusedmax = sparsemax(prox_TV(x)); Jacobian = J_sparsemax · J_TV (group means)."""

    @staticmethod
    def forward(ctx, x, lam=1.0, dim=-1):
        _shift(x, dim, "fusedmax")  # validates NaN / +inf
        y, ctx.groups = _tv.prox_tv1d_batch(x.detach(), lam, dim)
        p, _ = _sparsemax_forward(y, dim)
        ctx.dim = dim
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        gy = _jvp_simplex(g, (p > 0).to(g.dtype), ctx.dim)
        return _tv.group_mean(gy, ctx.groups, ctx.dim), None, None


def fusedmax(x: torch.Tensor, lam: float = 1.0, dim: int = -1) -> torch.Tensor:
    """fusedmax (Niculae & Blondel 2017): sparsemax after fusing neighbours.

    ``Omega(p) = 1/2 ||p||^2 + lam * sum_j |p_{j+1} - p_j|``; its solution is
    ``sparsemax(prox_{lam TV}(x))``. The 1-D TV prox is computed exactly by Condat's
    direct algorithm (sequential, on CPU in float64, then moved back), so fusedmax
    prefers contiguous spans of equal weight. ``-inf`` positions are dropped before the
    prox (their neighbours become adjacent) and get weight 0. ``lam = 0`` is sparsemax.
    """
    _check_dim(x, dim, "fusedmax")
    _check_float(x, "fusedmax")
    if not lam >= 0:
        raise ValueError(f"fusedmax: lam must be >= 0, got {lam}")
    xf = x.float() if x.dtype in _HALF else x
    return FusedmaxFunction.apply(xf, float(lam), dim).to(x.dtype)


# ---------------------------------------------------------------------- nn.Modules
class _Mapping(nn.Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_Mapping):
    """Module form of :func:`softmax` (with a fixed ``temperature``)."""

    def __init__(self, dim: int = -1, temperature: float = 1.0):
        super().__init__(dim)
        self.temperature = temperature

    def forward(self, x):
        return softmax(x, self.dim, self.temperature)


class Sparsemax(_Mapping):
    """Module form of :func:`sparsemax`."""

    def forward(self, x):
        return sparsemax(x, self.dim)


class Entmax15(_Mapping):
    """Module form of :func:`entmax15`."""

    def forward(self, x):
        return entmax15(x, self.dim)


class EntmaxBisect(_Mapping):
    """Module form of :func:`entmax_bisect`; pass an ``nn.Parameter`` alpha to learn it."""

    def __init__(self, alpha: float | torch.Tensor = 1.5, dim: int = -1):
        super().__init__(dim)
        self.alpha = alpha

    def forward(self, x):
        return entmax_bisect(x, self.alpha, self.dim)


class Fusedmax(_Mapping):
    """Module form of :func:`fusedmax`."""

    def __init__(self, lam: float = 1.0, dim: int = -1):
        super().__init__(dim)
        self.lam = lam

    def forward(self, x):
        return fusedmax(x, self.lam, self.dim)
