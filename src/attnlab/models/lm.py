"""The shipped LMs: :class:`CausalLM` (a :class:`~attnlab.modern.lab.TinyLM` with a
cached forward), :class:`KVCache` (per-layer keys and values a caller may read, edit,
evict and roll back) and :func:`load_lm`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from ..modern.attention import Cache
from ..modern.lab import TinyLM
from ..validation import flag, integer, tensor, token_ids

__all__ = [
    "MODEL_NAMES",
    "CausalLM",
    "KVCache",
    "load_lm",
    "model_path",
    "per_token_loss",
]

MODEL_NAMES = ("target", "draft")
_HERE = Path(__file__).resolve().parent


class KVCache:
    """Keys and values of every layer of a :class:`CausalLM`, for batch ``B``.

    Layer ``l`` holds ``keys(l)`` (B, G, S_l, Dh) (RoPE already applied at each
    token's own position), ``values(l)`` (B, G, S_l, Dh) and ``positions(l)`` (S_l,),
    the absolute positions of the cached tokens. ``seen`` counts the tokens fed so
    far: the next token is at position ``seen``, whatever was evicted. Edit a layer
    with :meth:`replace` or :meth:`keep` (eviction, quantisation), forget the last
    tokens with :meth:`rollback`.
    """

    def __init__(self, n_layers: int) -> None:
        n_layers = integer(n_layers, "n_layers", "KVCache", low=1)
        self.layers = [Cache() for _ in range(n_layers)]
        self.seen = 0

    @classmethod
    def for_model(cls, model: CausalLM) -> KVCache:
        """An empty cache with one layer per block of ``model``."""
        return cls(len(model.blocks))

    def __len__(self) -> int:
        return len(self.layers)

    def _layer(self, layer: int) -> Cache:
        layer = integer(layer, "layer", "KVCache", low=0, high=len(self.layers) - 1)
        return self.layers[layer]

    def keys(self, layer: int) -> torch.Tensor:
        """(B, G, S, Dh) cached keys of ``layer`` (S = 0 when empty: None)."""
        return self._layer(layer).first  # type: ignore[return-value]

    def values(self, layer: int) -> torch.Tensor:
        """(B, G, S, Dh) cached values of ``layer``."""
        return self._layer(layer).second  # type: ignore[return-value]

    def positions(self, layer: int) -> torch.Tensor:
        """(S,) absolute positions of ``layer``'s cached tokens."""
        return self._layer(layer).positions  # type: ignore[return-value]

    def length(self, layer: int = 0) -> int:
        """S: how many tokens ``layer`` holds."""
        return self._layer(layer).length

    def replace(
        self,
        layer: int,
        keys: torch.Tensor,
        values: torch.Tensor,
        positions: torch.Tensor,
    ) -> None:
        """Put new ``keys``/``values`` (B, G, S', Dh) at ``positions`` (S',) into
        ``layer`` (e.g. dequantised ones, or a subset)."""
        c = self._layer(layer)
        fn = "KVCache.replace"
        keys = tensor(keys, "keys", fn, dim=4)
        values = tensor(values, "values", fn, dim=4)
        positions = tensor(positions, "positions", fn, dim=1)
        if keys.shape != values.shape:
            raise ValueError(
                f"{fn}: keys {tuple(keys.shape)} and values {tuple(values.shape)} "
                "must have one shape (B, G, S, Dh)"
            )
        if positions.shape[0] != keys.shape[-2]:
            raise ValueError(
                f"{fn}: positions has {positions.shape[0]} entries, keys hold "
                f"{keys.shape[-2]} tokens"
            )
        if positions.is_floating_point() or positions.dtype == torch.bool:
            raise TypeError(f"{fn}: positions must be integers, got {positions.dtype}")
        if positions.numel() and (
            int(positions.min()) < 0 or int(positions.max()) >= self.seen
        ):
            raise ValueError(
                f"{fn}: positions must lie in [0, seen = {self.seen}), got "
                f"{int(positions.min())}..{int(positions.max())}"
            )
        if c.first is not None and keys.shape[:2] + keys.shape[3:] != (
            c.first.shape[:2] + c.first.shape[3:]
        ):
            raise ValueError(
                f"{fn}: keys must be (B, G, S, Dh) = ({c.first.shape[0]}, "
                f"{c.first.shape[1]}, S, {c.first.shape[3]}), got {tuple(keys.shape)}"
            )
        c.first, c.second, c.positions = keys, values, positions

    def keep(self, layer: int, index: torch.Tensor) -> None:
        """Keep only the cached entries ``index`` (S',) (integer indices into the
        layer's S entries, kept in the order given) of ``layer``: eviction."""
        c = self._layer(layer)
        index = tensor(index, "index", "KVCache.keep", dim=1)
        index = token_ids(index, c.length, "index", "KVCache.keep")
        c.first = c.first.index_select(-2, index)  # type: ignore[union-attr]
        c.second = c.second.index_select(-2, index)  # type: ignore[union-attr]
        c.positions = c.positions.index_select(0, index)  # type: ignore[union-attr]

    def rollback(self, n: int) -> None:
        """Forget the last ``n`` tokens fed (those at positions >= seen - n) in every
        layer; ``seen`` drops by ``n``."""
        n = integer(n, "n", "KVCache.rollback", low=0, high=self.seen)
        if n == 0:
            return
        limit = self.seen - n
        for c in self.layers:
            if c.positions is None:
                continue
            idx = (c.positions < limit).nonzero().flatten()  # (S',)
            c.first = c.first.index_select(-2, idx)  # type: ignore[union-attr]
            c.second = c.second.index_select(-2, idx)  # type: ignore[union-attr]
            c.positions = c.positions.index_select(0, idx)
        self.seen = limit

    def clone(self) -> KVCache:
        """An independent copy (tensors cloned)."""
        out = KVCache(len(self.layers))
        out.seen = self.seen
        for src, dst in zip(self.layers, out.layers):
            if src.first is not None:
                dst.first = src.first.clone()
                dst.second = src.second.clone()  # type: ignore[union-attr]
                dst.positions = src.positions.clone()  # type: ignore[union-attr]
        return out

    def nbytes(self) -> int:
        """Bytes held by all layers' keys and values."""
        return sum(
            t.numel() * t.element_size()
            for c in self.layers
            for t in (c.first, c.second)
            if t is not None
        )


class CausalLM(TinyLM):
    """A :class:`TinyLM` (RoPE, GQA) whose forward takes a :class:`KVCache`.

    ``forward(ids (B, T), cache=None, *, return_weights=False)`` -> logits
    (B, T, V), and with ``return_weights`` also a list, per layer, of the attention
    weights (B, H, T, S) of these T queries over the S keys attended (the cached ones,
    in the cache's order, then the new ones). With a cache, the T tokens sit at
    positions ``cache.seen ..  cache.seen + T - 1`` and attend causally to every
    cached token and to each other (chapter 8's bottom-right causal block); the
    cache then holds them too.
    """

    def __init__(self, vocab: int, **config) -> None:
        super().__init__(vocab, positional="rope", **config)
        self.vocab_size = vocab
        self.config = {"vocab": vocab, **config}

    def forward(
        self,
        ids: torch.Tensor,
        cache: KVCache | None = None,
        *,
        return_weights: bool = False,
    ):
        fn = "CausalLM.forward"
        ids = tensor(ids, "ids", fn, dim=2)
        ids = token_ids(ids, self.vocab_size, "ids", fn)
        return_weights = flag(return_weights, "return_weights", fn)
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(
                f"{fn}: cache must be a KVCache, got {type(cache).__name__}"
            )
        if cache is not None and len(cache) != len(self.blocks):
            raise ValueError(
                f"{fn}: cache has {len(cache)} layers, the model {len(self.blocks)}"
            )
        B, T = ids.shape
        if T == 0:
            raise ValueError(f"{fn}: ids must hold at least one token per row (B, T)")
        x = self.embed(ids)  # (B, T, D)
        pos = None
        if cache is not None:
            pos = torch.arange(cache.seen, cache.seen + T, device=ids.device)  # (T,)
        weights = []
        block: Any
        for i, block in enumerate(self.blocks):
            out = block.attn(
                block.n1(x),
                position_ids=pos,
                cache=None if cache is None else cache.layers[i],
                return_weights=return_weights,
            )
            if return_weights:
                out, w = out  # (B, T, D), (B, H, T, S)
                weights.append(w)
            x = x + out  # (B, T, D)
            x = x + block.mlp(block.n2(x))  # (B, T, D)
        if cache is not None:
            cache.seen += T
        logits = self.head(self.norm(x))  # (B, T, V)
        return (logits, weights) if return_weights else logits


def model_path(name: str) -> Path:
    """The safetensors file of a shipped model (``"target"`` or ``"draft"``)."""
    if name not in MODEL_NAMES:
        raise ValueError(f"load_lm: name must be one of {MODEL_NAMES}, got {name!r}")
    return _HERE / f"{name}.safetensors"


def load_lm(name: str = "target") -> CausalLM:
    """The shipped ``"target"`` or ``"draft"`` model, in eval mode on the CPU."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = model_path(name)
    if not path.exists():
        raise FileNotFoundError(f"load_lm: {path} is missing (package data)")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    config = json.loads(meta["config"])
    vocab = config.pop("vocab")
    model = CausalLM(vocab, **config)
    model.load_state_dict(load_file(str(path)))
    return model.eval()


@torch.no_grad()
def per_token_loss(model: CausalLM, ids: torch.Tensor) -> torch.Tensor:
    """(B, T - 1) cross-entropy (nats) of each next token ``ids[:, 1:]`` under a full
    causal forward of ``ids`` (B, T)."""
    ids = tensor(ids, "ids", "per_token_loss", dim=2)
    if ids.shape[1] < 2:
        raise ValueError("per_token_loss: ids needs at least 2 tokens (B, T >= 2)")
    logits = model(ids)  # (B, T, V)
    return F.cross_entropy(
        logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none"
    )  # (B, T - 1)
