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

Shapes: ``(B, H, T, Dh)`` as everywhere in attnlab; a page holds ``(H_kv, page, Dh)``.
"""

from __future__ import annotations

import torch

from . import validation as V
from .masking import streaming_mask  # noqa: F401  (its home: masking)

__all__ = ["repeat_kv", "PagedKVCache", "streaming_mask"]


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
