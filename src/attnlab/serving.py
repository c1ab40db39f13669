"""The KV cache at scale: grouped-query heads, pages, and a rolling window with sinks.

* :func:`repeat_kv` — grouped-query attention (GQA, Ainslie et al. 2023; multi-query
  attention, Shazeer 2019, is one key/value head): ``H_kv`` key/value heads shared by
  groups of ``H / H_kv`` query heads. The cache stores ``H_kv`` heads, so it shrinks by
  ``H / H_kv``.
* :class:`PagedKVCache` — the cache cut into fixed-size pages from one shared pool, with
  a page table per sequence (PagedAttention, Kwon et al. 2023): a sequence grows by
  taking a free page, never by copying what it holds, and no memory is reserved for
  tokens a sequence may never produce.
* :func:`streaming_mask` — what a decoder with a rolling cache attends to: the last
  ``window`` tokens plus the first ``n_sink`` ("attention sinks", StreamingLLM, Xiao et
  al. 2024).
* :class:`RollingKVCache` — that rolling cache itself: a ring buffer of a fixed
  ``n_sink + window`` slots per layer, the sinks kept and the window overwritten in
  place, so its memory never grows with the length of the text.

Shapes: ``(B, H, T, Dh)`` as everywhere in attnlab; a page holds ``(H_kv, page, Dh)``.
"""

from __future__ import annotations

import torch

from . import validation as V
from .masking import streaming_mask  # noqa: F401  (its home: masking)

__all__ = ["repeat_kv", "PagedKVCache", "RollingKVCache", "streaming_mask"]


def repeat_kv(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``x (B, H_kv, S, Dh)`` -> ``(B, n_heads, S, Dh)``: each key/value head serves
    ``n_heads / H_kv`` consecutive query heads (as SDPA's ``enable_gqa=True``)."""
    V.tensor(x, "x", "repeat_kv")
    if x.dim() != 4:
        raise ValueError(f"repeat_kv: x must be (B, H_kv, S, Dh), got {tuple(x.shape)}")
    h_kv = x.shape[1]
    if h_kv < 1 or n_heads % h_kv:
        raise ValueError(
            f"n_heads = {n_heads} must be a multiple of the key/value heads {h_kv}"
        )
    return x.repeat_interleave(n_heads // h_kv, dim=1)  # (B, n_heads, S, Dh)


class PagedKVCache:
    """Keys and values of several sequences in pages of ``page_size`` positions.

    One pool ``k_pool, v_pool (n_pages, H_kv, page_size, Dh)`` serves every sequence;
    ``page_table[seq]`` lists the pages a sequence owns, in order. Appending fills the
    last page and takes a free one when it is full; :meth:`gather` returns a sequence's
    keys and values as contiguous ``(H_kv, length, Dh)`` tensors (a real kernel reads
    the pages in place through the table instead)."""

    def __init__(
        self,
        n_pages: int,
        page_size: int,
        n_kv_heads: int,
        d_head: int,
        dtype=torch.float32,
    ):
        if min(n_pages, page_size, n_kv_heads, d_head) < 1:
            raise ValueError("n_pages, page_size, n_kv_heads and d_head must be >= 1")
        shape = (n_pages, n_kv_heads, page_size, d_head)
        self.k_pool = torch.zeros(shape, dtype=dtype)  # (P, H_kv, page, Dh)
        self.v_pool = torch.zeros(shape, dtype=dtype)
        self.page_size = page_size
        self.free = list(range(n_pages))  # pages nobody owns
        self.page_table: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}

    def append(self, seq: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Add positions ``k, v (H_kv, t, Dh)`` at the end of sequence ``seq``."""
        if (
            k.shape != v.shape
            or k.dim() != 3
            or k.shape[0] != self.k_pool.shape[1]
            or k.shape[2] != self.k_pool.shape[3]
        ):
            raise ValueError(
                f"k, v must be (H_kv, t, Dh) = ({self.k_pool.shape[1]}, t, "
                f"{self.k_pool.shape[3]}), got {tuple(k.shape)} and {tuple(v.shape)}"
            )
        table = self.page_table.setdefault(seq, [])
        n = self.lengths.get(seq, 0)
        for t in range(k.shape[1]):
            slot = n % self.page_size
            if slot == 0:  # the last page is full (or there is none): take a free one
                if not self.free:
                    raise RuntimeError("PagedKVCache is out of pages")
                table.append(self.free.pop(0))
            page = table[-1]
            self.k_pool[page, :, slot] = k[:, t]
            self.v_pool[page, :, slot] = v[:, t]
            n += 1
        self.lengths[seq] = n

    def release(self, seq: int) -> None:
        """A finished sequence gives its pages back to the pool."""
        self.free.extend(self.page_table.pop(seq, []))
        self.lengths.pop(seq, None)

    def gather(self, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``seq`` as ``(H_kv, length, Dh)`` each."""
        pages = torch.tensor(self.page_table.get(seq, []), dtype=torch.long)
        n = self.lengths.get(seq, 0)
        k = self.k_pool[pages].transpose(0, 1).flatten(1, 2)[:, :n]  # (H_kv, n, Dh)
        v = self.v_pool[pages].transpose(0, 1).flatten(1, 2)[:, :n]
        return k, v

    def bytes_used(self) -> int:
        """Bytes of the pages in use (a sequence wastes at most one partial page)."""
        per_page = 2 * self.k_pool[0].numel() * self.k_pool.element_size()
        return per_page * sum(len(t) for t in self.page_table.values())


class RollingKVCache:
    """One layer's keys and values in a ring buffer of ``n_sink + window`` slots.

    Position ``p`` is stored in slot ``p`` if it is a sink (``p < n_sink``), else in
    slot ``n_sink + (p - n_sink) % window``: once the buffer is full, each new position
    overwrites the oldest non-sink one in place. After position ``t`` is appended the
    cache holds exactly the keys that :func:`streaming_mask` lets query ``t`` see (the
    first ``n_sink`` positions and the last ``window``, ``t`` included), so attention of
    the new query over :meth:`ordered` equals full attention under that mask. Storage
    ``k, v (B, H_kv, n_sink + window, Dh)`` is allocated once; ``positions
    (n_sink + window,)`` holds each slot's position (-1: empty). A model keeps one cache
    per attention layer. Without position encodings, or with keys stored already
    rotated (RoPE), nothing has to be re-numbered when a slot is overwritten.
    """

    def __init__(
        self,
        window: int,
        n_sink: int = 0,
        *,
        batch: int,
        n_kv_heads: int,
        d_head: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ):
        fn = "RollingKVCache"
        self.window = V.integer(window, "window", fn, low=1)
        self.n_sink = V.integer(n_sink, "n_sink", fn, low=0)
        B = V.integer(batch, "batch", fn, low=1)
        H_kv = V.integer(n_kv_heads, "n_kv_heads", fn, low=1)
        Dh = V.integer(d_head, "d_head", fn, low=1)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(
                f"{fn}: dtype must be a floating torch.dtype, got {dtype!r}"
            )
        shape = (B, H_kv, self.capacity, Dh)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # (B, H_kv, C, Dh)
        self.v = torch.zeros(shape, dtype=dtype, device=device)  # (B, H_kv, C, Dh)
        self.positions = torch.full(
            (self.capacity,), -1, dtype=torch.long, device=device
        )
        self.seen = 0  # positions appended so far (the next one is `seen`)

    @property
    def capacity(self) -> int:
        """Slots per layer: ``n_sink + window``, whatever the length of the text."""
        return self.n_sink + self.window

    def __len__(self) -> int:
        """Positions held now: ``min(seen, capacity)``."""
        return min(self.seen, self.capacity)

    def slot(self, pos: torch.Tensor) -> torch.Tensor:
        """The slot of each position ``pos (t,)``: sinks in place, the rest modulo."""
        ring = self.n_sink + (pos - self.n_sink) % self.window
        return torch.where(pos < self.n_sink, pos, ring)  # (t,)

    def append(
        self, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Write the next ``t`` positions ``k, v (B, H_kv, t, Dh)`` into their slots;
        return :meth:`ordered` (what the last of them may attend to). Of ``t > window``
        new non-sink positions only the last ``window`` stay, as in a ring."""
        fn = "RollingKVCache.append"
        for name, x in (("k", k), ("v", v)):
            V.tensor(x, name, fn, dim=4)
            want = (*self.k.shape[:2], self.k.shape[3])
            if (*x.shape[:2], x.shape[3]) != want or x.shape[2] < 1:
                raise ValueError(
                    f"{fn}: {name} must be (B, H_kv, t, Dh) = ({want[0]}, {want[1]}, "
                    f"t >= 1, {want[2]}), got {tuple(x.shape)}"
                )
            if x.dtype != self.k.dtype:
                raise TypeError(
                    f"{fn}: {name} has dtype {x.dtype}, the cache holds {self.k.dtype}"
                )
        if k.shape[2] != v.shape[2]:
            raise ValueError(
                f"{fn}: k and v must hold the same positions, got {tuple(k.shape)} "
                f"and {tuple(v.shape)}"
            )
        t = k.shape[2]
        pos = torch.arange(self.seen, self.seen + t, device=self.k.device)  # (t,)
        last = self.seen + t - 1
        keep = (pos < self.n_sink) | (pos > last - self.window)  # survivors: one each
        slots = self.slot(pos[keep])  # (t',) distinct slots
        self.k[:, :, slots] = k[:, :, keep.to(k.device)]  # (B, H_kv, t', Dh), in place
        self.v[:, :, slots] = v[:, :, keep.to(v.device)]
        self.positions[slots] = pos[keep]
        self.seen += t
        return self.ordered()

    def ordered(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The held keys and values in position order, ``(B, H_kv, n, Dh)`` each with
        ``n = len(self)``, and their positions ``(n,)`` (a gather; a decoding kernel
        reads the slots in place, since softmax attention does not care about order)."""
        held = (self.positions >= 0).nonzero().squeeze(1)  # (n,) occupied slots
        order = held[self.positions[held].argsort()]  # (n,) slots by position
        return self.k[:, :, order], self.v[:, :, order], self.positions[order]

    def nbytes(self) -> int:
        """Bytes of the key and value storage: fixed at construction."""
        return 2 * self.k.numel() * self.k.element_size()
