"""Beyond one device: ring attention (Liu et al. 2023) on ``torch.distributed``.

The sequence is cut into ``world_size`` equal blocks. Rank ``r`` holds query block
``r`` and starts with key/value block ``r``; at each of ``world_size`` steps it attends
its queries to the key/value block it holds, merges the partial result into a running
one with the online softmax (chapter 8: each partial output comes with its rows'
log-sum-exp, and two partials combine exactly), then passes the block it holds to rank
``r + 1`` and receives one from rank ``r - 1`` (point-to-point ``isend``/``irecv``,
posted before the computation so that the transfer can overlap it). After
``world_size - 1`` passes every rank has seen every block. Each rank is given only its
own query, key and value blocks (one file per rank; it never reads the others') and holds
at most two key/value blocks at a time (the one it computes with and the one arriving),
so the memory per device is that of a ``T / world_size`` sequence.

It has no backward: the output comes back from the processes without a graph, so inputs
that require grad are refused (ring attention's backward is a second ring pass, each
rank recomputing its blocks from the saved log-sum-exp, which this module does not
implement).

With ``causal``, a block wholly in a query block's future is skipped (no work, but it
still travels round the ring: the ranks with early queries idle, which striped or
zig-zag layouts of the sequence fix).

:func:`ring_attention` spawns the processes itself (``torch.multiprocessing.spawn``:
the worker is this module's function, which the child processes import; a function
defined in a notebook could not be pickled), rendezvous through a ``file://`` in a
fresh temporary folder (no fixed port: two runs at once do not collide) with a timeout.
``backend="gloo"`` runs on the CPU; ``"nccl"`` would put each rank on its own GPU
(its blocks would be moved there), which this course does not run (untested here). MPI
cannot be started by ``spawn`` with a ``file://`` rendezvous, so it is not offered.

Each rank sends ``world_size - 1`` key/value blocks, i.e.
``(world_size - 1) · (numel(k) + numel(v)) / world_size · element_size`` bytes.
"""

from __future__ import annotations

import datetime
import math
import os
import tempfile

import torch

from . import validation as _v
from .attention import check_qkv
from .efficient.flash import flash_forward_tiles

__all__ = ["ring_attention", "ring_bytes_per_rank", "BACKENDS"]

BACKENDS = ("gloo", "nccl")


def _merge(out_a, lse_a, out_b, lse_b):
    """Two partial softmax attentions over disjoint key sets -> the one over both.

    ``out (N, T, Dv)`` normalised within its keys, ``lse (N, T)`` the log-sum-exp of
    its scores (``-inf``: no key yet)."""
    m = torch.maximum(lse_a, lse_b)  # (N, T)
    m_safe = m.masked_fill(m == -math.inf, 0.0)
    wa, wb = torch.exp(lse_a - m_safe), torch.exp(lse_b - m_safe)  # (N, T)
    den = wa + wb
    out = (out_a * wa[..., None] + out_b * wb[..., None]) / den.clamp_min(
        torch.finfo(den.dtype).tiny
    )[..., None]  # (N, T, Dv)
    return out, m_safe + torch.log(den)


def _ring_worker(rank, world, init_file, backend, timeout_s, in_path, causal, scale):
    import torch.distributed as dist

    dist.init_process_group(
        backend,
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    try:
        # only this rank's blocks: (N, n, Dh) queries, (N, n, Dh) keys, (N, n, Dv)
        data = torch.load(in_path.format(rank=rank))
        qb, kb, vb = data["q"], data["k"], data["v"]
        del data
        if backend == "nccl":
            dev = torch.device("cuda", rank)
            torch.cuda.set_device(dev)
            qb, kb, vb = qb.to(dev), kb.to(dev), vb.to(dev)
        N, n = qb.shape[:2]
        f = torch.promote_types(qb.dtype, torch.float32)
        out = qb.new_zeros(N, n, vb.shape[-1], dtype=f)  # (N, n, Dv)
        lse = qb.new_full((N, n), -math.inf, dtype=f)  # (N, n)
        sent = 0
        for step in range(world):
            src = (rank - step) % world  # whose key/value block is held now
            reqs = []
            if step < world - 1:  # pass it on while computing
                nk, nv = torch.empty_like(kb), torch.empty_like(vb)
                reqs = [
                    dist.isend(kb, (rank + 1) % world),
                    dist.isend(vb, (rank + 1) % world),
                    dist.irecv(nk, (rank - 1) % world),
                    dist.irecv(nv, (rank - 1) % world),
                ]
                sent += (kb.numel() + vb.numel()) * kb.element_size()
            if not (causal and src > rank):  # a wholly future block: skipped
                diag = causal and src == rank
                o, s = flash_forward_tiles(qb, kb, vb, scale, diag, None, n, n)
                out, lse = _merge(
                    out, lse, o.to(f), s.masked_fill(s == math.inf, -math.inf)
                )
            for r in reqs:
                if r is not None:
                    r.wait()
            if reqs:
                kb, vb = nk, nv
        torch.save(
            {"out": out.to(qb.dtype).cpu(), "sent": sent},
            os.path.join(os.path.dirname(in_path), f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


def ring_bytes_per_rank(k: torch.Tensor, v: torch.Tensor, world_size: int) -> int:
    """What each rank sends: ``world_size - 1`` blocks of keys and values."""
    w = _v.integer(world_size, "world_size", "ring_bytes_per_rank", low=1)
    k = _v.tensor(k, "k", "ring_bytes_per_rank")
    v = _v.tensor(v, "v", "ring_bytes_per_rank")
    return (w - 1) * (k.numel() + v.numel()) // w * k.element_size()


def ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    world_size: int = 2,
    causal: bool = False,
    backend: str = "gloo",
    timeout: float = 60.0,
    scale: float | None = None,
) -> tuple[torch.Tensor, list[int]]:
    """Attention of ``q (..., T, Dh)`` over ``k (..., T, Dh)``, ``v (..., T, Dv)`` by
    ``world_size`` processes passing key/value blocks round a ring.

    ``T`` must be a multiple of ``world_size``. Returns the output ``(..., T, Dv)``
    (the ranks' query blocks, concatenated) and the bytes each rank sent. Each rank
    receives only its own blocks. No backward: ``q``, ``k`` or ``v`` requiring grad
    (with grad mode on) raises ``ValueError``."""
    fn = "ring_attention"
    check_qkv(q, k, v, fn)
    if not (q.shape[:-1] == k.shape[:-1] == v.shape[:-1]):
        raise ValueError(
            f"{fn}: self-attention: q, k, v must share (..., T), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    w = _v.integer(world_size, "world_size", fn, low=1)
    T = q.shape[-2]
    if T % w:
        raise ValueError(f"{fn}: T = {T} must be a multiple of world_size = {w}")
    _v.flag(causal, "causal", fn)
    if backend not in BACKENDS:
        raise ValueError(f"{fn}: backend must be one of {BACKENDS}, got {backend!r}")
    t_s = _v.real(timeout, "timeout", fn, low=0.0, open_low=True)
    sc = (
        q.shape[-1] ** -0.5
        if scale is None
        else _v.real(scale, "scale", fn, low=0.0, open_low=True)
    )
    for name, x in (("q", q), ("k", k), ("v", v)):
        _v.finite(x, name, fn)
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
        raise ValueError(
            f"{fn}: q, k or v requires grad, but ring attention here has no backward "
            "(the output comes back from other processes without a graph, so the "
            "gradients would be silently lost); call it under torch.no_grad() or on "
            "detached tensors"
        )
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not dist.is_available():
        raise RuntimeError(f"{fn}: this torch build has no torch.distributed")
    lead = q.shape[:-2]
    flat = [x.reshape(-1, T, x.shape[-1]).detach().cpu() for x in (q, k, v)]
    n = T // w
    with tempfile.TemporaryDirectory(prefix="attnlab_ring_") as tmp:
        in_path = os.path.join(tmp, "in{rank}.pt")
        for r in range(w):  # one file per rank: its own blocks only
            q_r, k_r, v_r = (x[:, r * n : (r + 1) * n].clone() for x in flat)
            torch.save(dict(q=q_r, k=k_r, v=v_r), in_path.format(rank=r))
        mp.spawn(
            _ring_worker,
            args=(
                w,
                os.path.join(tmp, "rendezvous"),
                backend,
                t_s,
                in_path,
                causal,
                sc,
            ),
            nprocs=w,
            join=True,
        )
        parts = [torch.load(os.path.join(tmp, f"rank{r}.pt")) for r in range(w)]
    out = torch.cat([p["out"] for p in parts], 1)  # (N, T, Dv)
    out = out.reshape(*lead, T, v.shape[-1]).to(q.device)
    return out, [int(p["sent"]) for p in parts]
