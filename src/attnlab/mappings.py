"""Mappings from scores to weights: softmax and its sparse and structured cousins.

Every mapping here is a *regularised argmax* over the probability simplex

    pi_Omega(x) = argmax_{p in simplex}  p.x - Omega(p)

with ``Omega = 0`` (argmax), negative Shannon entropy (softmax), ``1/2 ||p||^2``
(sparsemax), the Tsallis entropy (alpha-entmax) or ``1/2 ||p||^2 + lam * TV(p)``
(fusedmax). Each takes scores ``(..., n, ...)`` and returns weights of the same shape,
on the simplex along ``dim``. Positions at ``-inf`` get exactly ``0``; a row whose every
entry is ``-inf`` (a fully masked row) gets all zeros, never NaN — in the forward pass
and in the backward pass. ``NaN`` or ``+inf`` scores raise ``ValueError``; integer or
boolean scores raise ``TypeError``. An empty input (a last dimension of size 0, or an
empty batch) gives an empty output of the same shape, as ``torch.softmax`` does.
float16/bfloat16 inputs are computed in float32 and cast back.

Layering (as in deep-spin/entmax): private numerics in :mod:`attnlab.kernels` →
``torch.autograd.Function`` with a hand-written backward → lowercase function → thin
CamelCase ``nn.Module``.
"""

from __future__ import annotations

import numbers

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
    "normmax_bisect",
    "SparsemaxFunction",
    "Entmax15Function",
    "EntmaxBisectFunction",
    "FusedmaxFunction",
    "Softmax",
    "Sparsemax",
    "Entmax15",
    "EntmaxBisect",
    "Fusedmax",
    "NormmaxBisect",
]

_HALF = (torch.float16, torch.bfloat16)


def _check_dim(x: torch.Tensor, dim: int, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} expects a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError(f"{name} needs at least one dimension, got a scalar")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name}: dim must be an int, got {dim!r}")
    if not -x.dim() <= dim < x.dim():
        raise ValueError(
            f"{name}: dim={dim} is out of range for shape {tuple(x.shape)}"
        )


def _check_float(x: torch.Tensor, name: str) -> None:
    if not x.is_floating_point():
        raise TypeError(f"{name} expects floating-point scores, got {x.dtype}")


def _check_scores(x: torch.Tensor, dim: int, name: str) -> bool:
    """Validate ``x`` and ``dim`` (TypeError / ValueError naming ``name``); NaN or
    ``+inf`` raise ValueError. Returns whether ``x`` is empty (nothing to compute)."""
    _check_dim(x, dim, name)
    _check_float(x, name)
    if x.numel() == 0:
        return True
    if bool((torch.isnan(x) | torch.isposinf(x)).any()):
        raise ValueError(f"{name}: scores contain NaN or +inf (shape {tuple(x.shape)})")
    return False


def _check_number(value, name: str, what: str) -> float:
    """A real number (Python, NumPy or a one-element tensor; not a bool) as a float."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: {what} must be a real number, got {value!r}")
    return float(value)


def _check_k(k, name: str) -> int | None:
    """The partial-sort size ``k`` of the sparse mappings: None or an int >= 1."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"{name}: k must be None or an int >= 1, got {k!r}")
    if k < 1:
        raise ValueError(f"{name}: k must be None or an int >= 1, got {k}")
    return k


def softmax(x: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """``softmax(x / temperature)`` along ``dim``; fully ``-inf`` rows give zeros.

    The solution of ``max_{p in simplex} p.x/t + H(p)`` (Shannon entropy H).
    float16/bfloat16 inputs are computed in float32 and cast back. NaN or ``+inf``
    scores raise ValueError, integer scores TypeError; ``temperature = inf`` gives the
    uniform weights over the keys that are not ``-inf``.
    """
    empty = _check_scores(x, dim, "softmax")
    t = _check_number(temperature, "softmax", "temperature")
    if not t > 0:
        raise ValueError(f"softmax: temperature must be > 0, got {temperature}")
    if empty:
        return x.clone()
    xf = x.float() if x.dtype in _HALF else x
    if t != 1.0:
        # -inf / inf would be NaN: a masked key stays masked at any temperature
        xf = torch.where(torch.isneginf(xf), xf, xf / t)
    # Subtract the row max so exp never overflows; a row that is all -inf has max -inf,
    # so we shift it by 0 instead and its exp is all zeros (not NaN).
    m = xf.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(xf - m)
    z = e.sum(dim=dim, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    return p.to(x.dtype)


def sigmoid(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Independent weights in (0, 1): *not* on the simplex (rows need not sum to 1).

    ``dim`` is only validated (each score is mapped on its own); NaN or ``+inf`` raise
    ValueError as for the other mappings."""
    if _check_scores(x, dim, "sigmoid"):
        return x.clone()
    return torch.sigmoid(x)


def argmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """One-hot weights on the (first) largest score: ``Omega = 0``, a vertex of the simplex.

    Piecewise constant, so its gradient is zero almost everywhere: the result carries no
    gradient. A fully ``-inf`` row gives zeros; NaN or ``+inf`` raise ValueError.
    """
    if _check_scores(x, dim, "argmax"):
        return x.detach().clone()
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


def _sparsemax_forward(x, dim, method="topk", k=None):
    """``(p, |S|)``: the weights and the support size of each row."""
    if method == "topk":
        m, tau, size = _k.threshold_topk(x, dim, "sparsemax", "sparsemax", k)
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
    def forward(ctx, x, dim=-1, method="topk", k=None):
        p, size = _sparsemax_forward(x, dim, method, k)
        ctx.dim = dim
        ctx.save_for_backward(p, size)
        return p

    @staticmethod
    def backward(ctx, g):
        p, size = ctx.saved_tensors
        supp = p > 0
        gs = torch.where(supp, g, 0)
        mean = gs.sum(dim=ctx.dim, keepdim=True) / torch.clamp(size, min=1)
        return torch.where(supp, gs.sub_(mean), 0), None, None, None


def sparsemax(
    x: torch.Tensor, dim: int = -1, k: int | None = None, *, method: str = "topk"
) -> torch.Tensor:
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
    k : the size of the first partial sort of ``"topk"`` (as the ``k`` of
        ``entmax.sparsemax``): rows whose support fills it are redone with ``4k``, so
        any ``k >= 1`` gives the exact answer. ``None``: a default that fits typical
        supports.
    """
    empty = _check_scores(x, dim, "sparsemax")
    k = _check_k(k, "sparsemax")
    method = _method(method, "sparsemax")
    if empty:
        return x.clone()
    xf = x.float() if x.dtype in _HALF else x
    return SparsemaxFunction.apply(xf, dim, method, k).to(x.dtype)


# ------------------------------------------------------------------------ 1.5-entmax
def _entmax15_forward(x, dim, method="topk", k=None):
    """``(p, sum_S sqrt(p))`` for 1.5-entmax."""
    if method == "topk":
        m, tau, s_sum = _k.threshold_topk(x, dim, "entmax15", "entmax15", k)
        p = torch.add(-tau, x - m, alpha=0.5).clamp_(min=0).square_()  # [z/2 - tau]_+^2
        return p, s_sum
    z, live = _shift(x, dim, "entmax15")
    tau_fn = _k.entmax15_tau_iter if method == "iter" else _k.entmax15_tau_sort
    p = torch.where(live, torch.clamp(z / 2 - tau_fn(z, dim), min=0).square(), 0)
    return p, p.sqrt().sum(dim=dim, keepdim=True)


class Entmax15Function(torch.autograd.Function):
    """1.5-entmax with Jacobian ``diag(s) - s s^T / sum(s)``, ``s = sqrt(p)``."""

    @staticmethod
    def forward(ctx, x, dim=-1, method="topk", k=None):
        p, s_sum = _entmax15_forward(x, dim, method, k)
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
        return torch.addcmul(gs, s, mean, value=-1), None, None, None


def entmax15(
    x: torch.Tensor, dim: int = -1, k: int | None = None, *, method: str = "topk"
) -> torch.Tensor:
    """1.5-entmax (Peters, Niculae & Martins 2019): ``p = [x/2 - tau]_+^2``.

    The solution of ``max_{p in simplex} p.x + H_1.5(p)`` with the Tsallis entropy
    ``H_a(p) = (1 - sum p_j^a) / (a (a - 1))``; sparse like sparsemax, smooth like
    softmax. On a known support ``tau`` solves a quadratic exactly; ``method`` picks how
    the support is found, as in :func:`sparsemax` (``"iter"`` uses Newton steps with an
    exact support check). All methods are exact. ``k`` is the size of the first
    partial sort, as in :func:`sparsemax`.
    """
    empty = _check_scores(x, dim, "entmax15")
    k = _check_k(k, "entmax15")
    method = _method(method, "entmax15")
    if empty:
        return x.clone()
    xf = x.float() if x.dtype in _HALF else x
    return Entmax15Function.apply(xf, dim, method, k).to(x.dtype)


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
        z, live = _shift(x, dim, "entmax_bisect", floor=None)
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
        p, a = ctx.saved_tensors
        dim = ctx.dim
        pos = p > 0
        s = torch.where(pos, p.pow(2 - a), 0)
        dx = _jvp_simplex(g, s, dim)
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


def _check_alpha(alpha, x: torch.Tensor, xf: torch.Tensor, dim: int, name: str, low):
    """``alpha`` as a tensor that broadcasts against ``x`` with size 1 along ``dim``;
    every value finite and ``> low``."""
    if not isinstance(alpha, torch.Tensor):
        alpha = _check_number(alpha, name, "alpha")
        alpha = torch.tensor(alpha, dtype=xf.dtype, device=x.device)
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
    row = list(x.shape)
    row[dim] = 1
    row = torch.Size(row)
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
    """
    empty = _check_scores(x, dim, "entmax_bisect")
    xf = x.float() if x.dtype in _HALF else x
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
    """
    empty = _check_scores(x, dim, "normmax_bisect")
    xf = x.float() if x.dtype in _HALF else x
    alpha = _check_alpha(alpha, x, xf, dim, "normmax_bisect", 1.0)
    n_iter = _check_n_iter(n_iter, "normmax_bisect")
    if empty:
        return x.clone()
    if n_iter is None:
        n_iter = 60 if xf.dtype == torch.float64 else 32
    a = alpha.to(xf.dtype)
    z, live = _shift(xf, dim, "normmax_bisect", floor=None)  # max of each row is 0
    zd = z.detach()
    n = z.shape[dim]
    ad = a.detach().expand_as(zd.narrow(dim, 0, 1))
    gamma = ad / (ad - 1)  # exponent of the constraint
    with torch.no_grad():  # f(tau) = sum [z - tau]_+^gamma - 1 decreases in tau
        lo = torch.full_like(ad, -1.0)  # f(-1) >= 0: the top entry alone gives 1
        hi = -((1.0 / n) ** (1 / gamma))  # f(hi) <= 0: all n equal at most give 1
        for _ in range(n_iter):
            mid = (lo + hi) / 2
            u = torch.clamp(zd - mid, min=0)
            big = (u**gamma).sum(dim=dim, keepdim=True) >= 1
            lo = torch.where(big, mid, lo)
            hi = torch.where(big, hi, mid)
        tau = (lo + hi) / 2
        u = torch.clamp(zd - tau, min=0)
        pt = u ** (1 / (ad - 1))
        total = pt.sum(dim=dim, keepdim=True)
        p0 = pt / torch.where(total > 0, total, 1)
    # straight-through tau: value tau, derivative dtau = p . dz (implicit function)
    zl = torch.where(torch.isneginf(z), torch.zeros_like(z), z)
    tau_g = tau + (p0 * (zl - zl.detach())).sum(dim=dim, keepdim=True)
    u = z - tau_g
    pos = u > 0
    pt = torch.where(pos, torch.where(pos, u, 1.0) ** (1 / (ad - 1)), 0.0)
    total = pt.sum(dim=dim, keepdim=True)
    p = pt / torch.where(total > 0, total, 1)
    return torch.where(live, p, 0).to(x.dtype)


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
    empty = _check_scores(x, dim, "fusedmax")
    lam_f = _check_number(lam, "fusedmax", "lam")
    if not 0 <= lam_f < float("inf"):
        raise ValueError(f"fusedmax: lam must be finite and >= 0, got {lam}")
    if empty:
        return x.clone()
    xf = x.float() if x.dtype in _HALF else x
    return FusedmaxFunction.apply(xf, lam_f, dim).to(x.dtype)


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
    """Module form of :func:`sparsemax` (``k``: size of the first partial sort)."""

    def __init__(self, dim: int = -1, k: int | None = None):
        super().__init__(dim)
        self.k = k

    def forward(self, x):
        return sparsemax(x, self.dim, self.k)


class Entmax15(_Mapping):
    """Module form of :func:`entmax15` (``k``: size of the first partial sort)."""

    def __init__(self, dim: int = -1, k: int | None = None):
        super().__init__(dim)
        self.k = k

    def forward(self, x):
        return entmax15(x, self.dim, self.k)


class EntmaxBisect(_Mapping):
    """Module form of :func:`entmax_bisect`; pass an ``nn.Parameter`` alpha to learn it."""

    def __init__(
        self,
        alpha: float | torch.Tensor = 1.5,
        dim: int = -1,
        n_iter: int | None = None,
    ):
        super().__init__(dim)
        self.alpha = alpha
        self.n_iter = n_iter

    def forward(self, x):
        return entmax_bisect(x, self.alpha, self.dim, self.n_iter)


class NormmaxBisect(_Mapping):
    """Module form of :func:`normmax_bisect`."""

    def __init__(
        self,
        alpha: float | torch.Tensor = 2.0,
        dim: int = -1,
        n_iter: int | None = None,
    ):
        super().__init__(dim)
        self.alpha = alpha
        self.n_iter = n_iter

    def forward(self, x):
        return normmax_bisect(x, self.alpha, self.dim, self.n_iter)


class Fusedmax(_Mapping):
    """Module form of :func:`fusedmax`."""

    def __init__(self, lam: float = 1.0, dim: int = -1):
        super().__init__(dim)
        self.lam = lam

    def forward(self, x):
        return fusedmax(x, self.lam, self.dim)
