"""sparsemax (Martins & Astudillo, 2016) and 1.5-entmax (Peters et al., 2019), each with
its exact forward (top-k, iterative or sort) and closed-form backward."""

from __future__ import annotations

import torch

from ..kernels import sparse as _k
from .basic import check_k, check_scores, shift_scores, upcast

# ------------------------------------------------------------------------ sparsemax
_METHODS = ("iter", "topk", "sort")


def _method(method: str, name: str) -> str:
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    return method


SMALL_ROW, SMALL_NUMEL = 8, 4096


def _small(x: torch.Tensor, dim: int) -> bool:
    """Inputs where the (partial) sort beats the passes of the iteration on the CPU:
    rows of <= 8 scores (PyTorch sorts them without a general sort) or <= 4096 scores
    in all (the passes' per-call overhead dominates); measured with one thread."""
    return x.shape[dim] <= SMALL_ROW or x.numel() <= SMALL_NUMEL


def _sparsemax_parts(x, dim, method="iter", k=None):
    """``(p, |S|, s)``: the weights, the support size of each row and the support
    indicator ``s`` (floats) where the method has it at no cost, else ``None``."""
    if method == "iter":
        out = (
            None
            if k is not None or _small(x, dim)
            else _k.sparsemax_iter(x, dim, "sparsemax")
        )
        if out is not None:
            return out
        method = "topk"  # some row still moving: finish by the partial sort
    if method == "topk":
        m, tau, size = _k.threshold_topk(x, dim, "sparsemax", "sparsemax", k)
        p = (x - m).sub_(tau).clamp_(min=0)  # -inf -> 0; dead rows: m = 0
        return p, size, None
    z, live = shift_scores(x, dim, "sparsemax")
    p = torch.where(live, torch.clamp(z - _k.sparsemax_tau_sort(z, dim), min=0), 0)
    return p, (p > 0).sum(dim=dim, keepdim=True).to(p.dtype), None


def sparsemax_forward(x, dim, method="iter", k=None):
    """``(p, |S|)``: the weights and the support size of each row."""
    p, size, _ = _sparsemax_parts(x, dim, method, k)
    return p, size


class SparsemaxFunction(torch.autograd.Function):
    """sparsemax with its Jacobian ``diag(s) - s s^T / |S|`` (``s`` = support indicator).

    Backward: ``J^T g = s * (g - mean_S(g))``, two passes over the row.
    """

    @staticmethod
    def forward(ctx, x, dim=-1, method="topk", k=None):
        p, size, s = _sparsemax_parts(x, dim, method, k)
        ctx.dim = dim
        ctx.save_for_backward(p, size, torch.sign(p) if s is None else s)
        return p

    @staticmethod
    def backward(ctx, g):
        p, size, s = ctx.saved_tensors  # s: the support indicator, floats
        if not torch.is_grad_enabled():  # first order only: 3 passes, no booleans
            gs = g * s
            mean = gs.sum(dim=ctx.dim, keepdim=True) / torch.clamp(size, min=1)
            return gs.addcmul_(s, mean, value=-1), None, None, None
        supp = p > 0
        gs = torch.where(supp, g, 0)
        mean = gs.sum(dim=ctx.dim, keepdim=True) / torch.clamp(size, min=1)
        return torch.where(supp, gs.sub_(mean), 0), None, None, None


def sparsemax(
    x: torch.Tensor, dim: int = -1, k: int | None = None, *, method: str = "iter"
) -> torch.Tensor:
    """Euclidean projection of the scores onto the simplex (Martins & Astudillo 2016).

    ``sparsemax(x) = argmin_{p in simplex} ||p - x||^2 = [x - tau]_+`` with ``tau`` the
    threshold that makes the weights sum to one, ``tau = (sum_S x - 1) / |S|`` on the
    support ``S``. How ``tau`` is found (all exact):

    * ``"iter"`` (default): sort-free threshold iterations (Michelot), a few passes over
      the whole tensor, exact once no support size changes; rows still moving after 16
      passes are finished by ``"topk"``, which also serves small inputs (rows of <= 8
      scores or <= 4096 scores in all), where sorting is cheaper;
    * ``"topk"``: sort only the top few scores of each row, check that the
      support found is shorter than the prefix, else retry with a longer one;
    * ``"sort"``: the textbook O(n log n) full sort.

    Parameters
    ----------
    x : tensor ``(..., n, ...)`` of scores (``-inf`` = masked).
    dim : the dimension to normalise over.
    k : the size of the first partial sort of ``"topk"`` (as the ``k`` of
        ``entmax.sparsemax``; given, it selects ``"topk"`` for ``"iter"``): rows whose support fills it are redone with ``4k``, so
        any ``k >= 1`` gives the exact answer. ``None``: a default that fits typical
        supports.

    Returns
    -------
    tensor of the shape and dtype of ``x``: weights that sum to 1 along ``dim``, with
    exact zeros below the threshold (0 on a fully ``-inf`` row).

    Raises
    ------
    TypeError
        ``x`` is not a floating-point tensor (a list, integer or boolean scores), or
        ``dim`` is not an int.
    ValueError
        ``dim`` is out of range for ``x``; under :func:`attnlab.debug`, ``x`` holds NaN
        or ``+inf``.
        ``method`` is not ``"iter"``, ``"topk"`` or ``"sort"``; ``k`` is not None or an
        int >= 1 (TypeError for a non-int).
    """
    empty = check_scores(x, dim, "sparsemax")
    k = check_k(k, "sparsemax")
    method = _method(method, "sparsemax")
    if empty:
        return x.clone()
    xf = upcast(x)
    return SparsemaxFunction.apply(xf, dim, method, k).to(x.dtype)


# ------------------------------------------------------------------------ 1.5-entmax
def _entmax15_parts(x, dim, method="iter", k=None):
    """``(sqrt(p), sum_S sqrt(p))`` for 1.5-entmax (``p`` is the square of the first)."""
    if method == "iter":
        out = (
            None
            if k is not None or _small(x, dim)
            else _k.entmax15_iter(x, dim, "entmax15")
        )
        if out is not None:
            return out
        method = "topk"  # some row still moving: finish by the partial sort
    if method == "topk":
        m, tau, s_sum = _k.threshold_topk(x, dim, "entmax15", "entmax15", k)
        return torch.add(-tau, x - m, alpha=0.5).clamp_(min=0), s_sum  # [z/2 - tau]_+
    z, live = shift_scores(x, dim, "entmax15")
    sp = torch.where(live, torch.clamp(z / 2 - _k.entmax15_tau_sort(z, dim), min=0), 0)
    return sp, sp.sum(dim=dim, keepdim=True)


def _entmax15_forward(x, dim, method="iter", k=None):
    """``(p, sum_S sqrt(p))`` for 1.5-entmax."""
    sp, s_sum = _entmax15_parts(x, dim, method, k)
    return sp.square(), s_sum


class Entmax15Function(torch.autograd.Function):
    """1.5-entmax with Jacobian ``diag(s) - s s^T / sum(s)``, ``s = sqrt(p)``."""

    @staticmethod
    def forward(ctx, x, dim=-1, method="topk", k=None):
        sp, s_sum = _entmax15_parts(x, dim, method, k)
        p = sp.square()
        ctx.dim = dim
        ctx.save_for_backward(p, s_sum, sp)
        return p

    @staticmethod
    def backward(ctx, g):
        # differentiable in the saved output p (so a double backward is right):
        # sqrt guarded at p = 0, and sum(s) recomputed here rather than saved
        p, s_sum, s = ctx.saved_tensors  # s = sqrt(p), saved: sqrt is slow on CPUs
        if not torch.is_grad_enabled():  # first order only: 3 passes, no booleans
            gs = g * s
            mean = gs.sum(dim=ctx.dim, keepdim=True) / torch.where(s_sum > 0, s_sum, 1)
            return gs.addcmul_(s, mean, value=-1), None, None, None
        pos = p > 0
        s = torch.where(pos, torch.where(pos, p, 1).sqrt(), 0)
        gs = g * s
        s_sum = s.sum(dim=ctx.dim, keepdim=True)
        den = torch.where(s_sum > 0, s_sum, 1)
        mean = gs.sum(dim=ctx.dim, keepdim=True) / den
        return torch.addcmul(gs, s, mean, value=-1), None, None, None


def entmax15(
    x: torch.Tensor, dim: int = -1, k: int | None = None, *, method: str = "iter"
) -> torch.Tensor:
    """1.5-entmax (Peters, Niculae & Martins 2019): ``p = [x/2 - tau]_+^2``.

    The solution of ``max_{p in simplex} p.x + H_1.5(p)`` with the Tsallis entropy
    ``H_a(p) = (1 - sum p_j^a) / (a (a - 1))``; sparse like sparsemax, smooth like
    softmax. On a known support ``tau`` solves a quadratic exactly; ``method`` picks how
    the support is found, as in :func:`sparsemax` (``"iter"`` uses Newton steps with an
    exact support check). All methods are exact. ``k`` is the size of the first
    partial sort, as in :func:`sparsemax`.

    Parameters
    ----------
    x : tensor of scores, floating point; ``-inf`` = masked.
    dim : the dimension to normalise over.
    k : the size of the first partial sort (``"topk"``), as in :func:`sparsemax`.
    method : keyword only; ``"iter"`` (default), ``"topk"`` or ``"sort"``.

    Returns
    -------
    tensor of the shape and dtype of ``x``: weights that sum to 1 along ``dim``, sparse
    (exact zeros), 0 on a fully ``-inf`` row.

    Raises
    ------
    TypeError
        ``x`` is not a floating-point tensor (a list, integer or boolean scores), or
        ``dim`` is not an int.
    ValueError
        ``dim`` is out of range for ``x``; under :func:`attnlab.debug`, ``x`` holds NaN
        or ``+inf``.
        ``method`` or ``k`` is not one of the above (TypeError for a non-int ``k``).
    """
    empty = check_scores(x, dim, "entmax15")
    k = check_k(k, "entmax15")
    method = _method(method, "entmax15")
    if empty:
        return x.clone()
    xf = upcast(x)
    return Entmax15Function.apply(xf, dim, method, k).to(x.dtype)
