"""Exact proximal operator of the 1-D total variation (private numerics).

``prox_tv1d(y, lam)`` solves

    x* = argmin_x  1/2 ||x - y||^2 + lam * sum_i |x_{i+1} - x_i|

with Condat's direct algorithm (Condat 2013, "A direct algorithm for 1-D total
variation denoising"): one left-to-right sweep that keeps the range ``[vmin, vmax]`` the
current segment's value may still take and the running residuals ``umin, umax``; when a
residual leaves ``[-lam, lam]`` the segment is closed with a jump down or up. Worst case
O(n^2), linear in practice. The solution is piecewise constant; we also return the id of
the segment ("group") each position belongs to, which the Jacobian needs: the prox
averages the incoming gradient over each group.
"""

from __future__ import annotations

import numpy as np
import torch


def prox_tv1d(y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(x, groups)`` for one 1-D float array ``y`` (see module docstring)."""
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    x = np.empty(n)
    groups = np.empty(n, dtype=np.int64)
    if n == 0:
        return x, groups
    if lam <= 0 or n == 1:
        return y.copy(), np.arange(n)
    g = 0  # id of the next segment to be written

    def close(a, b, value):  # write the segment y[a..b] (inclusive)
        nonlocal g
        x[a : b + 1] = value
        groups[a : b + 1] = g
        g += 1

    k = k0 = km = kp = 0
    vmin, vmax = y[0] - lam, y[0] + lam
    umin, umax = lam, -lam
    while True:
        if k == n - 1:  # reached the end: settle the open segment
            if umin < 0:
                close(k0, km, vmin)
                k = k0 = km = km + 1
                vmin = y[k]
                umin = lam
                umax = y[k] + lam - vmax
                continue
            if umax > 0:
                close(k0, kp, vmax)
                k = k0 = kp = kp + 1
                vmax = y[k]
                umax = -lam
                umin = y[k] - lam - vmin
                continue
            close(k0, n - 1, vmin + umin / (k - k0 + 1))
            return x, groups
        umin += y[k + 1] - vmin
        umax += y[k + 1] - vmax
        if umin < -lam:  # the segment must end with a jump down
            close(k0, km, vmin)
            k = k0 = km = kp = km + 1
            vmin, vmax = y[k], y[k] + 2 * lam
            umin, umax = lam, -lam
        elif umax > lam:  # the segment must end with a jump up
            close(k0, kp, vmax)
            k = k0 = km = kp = kp + 1
            vmin, vmax = y[k] - 2 * lam, y[k]
            umin, umax = lam, -lam
        else:  # extend the segment; tighten the range of its value
            k += 1
            if umin >= lam:
                vmin += (umin - lam) / (k - k0 + 1)
                umin = lam
                km = k
            if umax <= -lam:
                vmax += (umax + lam) / (k - k0 + 1)
                umax = -lam
                kp = k


def tv1d_optimality_gap(x: np.ndarray, y: np.ndarray, lam: float) -> float:
    """How far ``x`` is from satisfying the optimality conditions (0 when optimal).

    ``x`` is optimal iff the dual ``u = -cumsum(y - x)`` ends at 0, stays in
    ``[-lam, lam]``, and equals ``lam * sign(x_{i+1} - x_i)`` wherever ``x`` jumps.
    """
    u = -np.cumsum(np.asarray(y, float) - np.asarray(x, float))
    gap = abs(u[-1])
    u = u[:-1]
    gap = max(gap, float(np.max(np.abs(u) - lam, initial=0.0)))
    d = np.diff(x)
    jump = np.abs(d) > 1e-12
    if jump.any():
        gap = max(gap, float(np.max(np.abs(u[jump] - lam * np.sign(d[jump])))))
    return gap


def prox_tv1d_batch(x: torch.Tensor, lam: float, dim: int):
    """:func:`prox_tv1d` on every row of ``x`` along ``dim`` (on CPU, in float64).

    ``-inf`` entries are dropped before the prox (their neighbours become adjacent) and
    stay ``-inf``. Returns ``(y, groups)``: ``y`` like ``x`` (same device and dtype) and
    ``groups`` (``x`` moved to ``dim = -1``, long): the segment id of each position,
    ``-1`` where masked.
    """
    xt = x.movedim(dim, -1)
    rows = xt.reshape(-1, xt.shape[-1]).cpu().double().numpy()
    y = np.full(rows.shape, -np.inf)
    groups = np.full(rows.shape, -1, dtype=np.int64)
    for i, row in enumerate(rows):
        keep = np.isfinite(row)
        if keep.any():
            y[i, keep], groups[i, keep] = prox_tv1d(row[keep], lam)
    out = torch.from_numpy(y).to(x.device, x.dtype).view(xt.shape).movedim(-1, dim)
    return out, torch.from_numpy(groups).to(x.device).view(xt.shape)


def group_mean(g: torch.Tensor, groups: torch.Tensor, dim: int) -> torch.Tensor:
    """Average ``g`` over each segment of ``groups`` (the Jacobian of the TV prox, which
    is symmetric); positions with group ``-1`` (masked) get 0."""
    gt = g.movedim(dim, -1)
    n = groups.shape[-1]
    idx = torch.where(groups >= 0, groups, n).reshape(-1, n)  # masked: a spare bin
    flat = gt.reshape(-1, n)
    sums = torch.zeros(flat.shape[0], n + 1, dtype=g.dtype, device=g.device)
    counts = torch.zeros_like(sums)
    sums.scatter_add_(1, idx, flat)
    counts.scatter_add_(1, idx, torch.ones_like(flat))
    mean = (sums / counts.clamp_min(1)).gather(1, idx)
    mean = torch.where(idx < n, mean, 0).view(gt.shape)
    return mean.movedim(-1, dim)
