"""Interventions: change one part of a running model and watch the output.

Attention weights say where a head looks; an intervention says what the model needs.
Every function here is a context manager that installs PyTorch hooks on attnlab's
modules (nothing in the layers is edited) and removes them on exit:

* :func:`cache_heads` — record each head's output, the input of ``w_o`` split into
  heads, (B, T, H, Dh) per attention module.
* :func:`ablate_heads` — replace chosen heads' outputs by zero or by their mean over a
  reference run (head ablation, as in Olsson et al., 2022).
* :func:`patch_heads` — activation patching (Meng et al., 2022; Wang et al., 2022):
  run a corrupted input with chosen heads, at chosen positions, set to their values
  from a clean run.
* :func:`patch_outputs` — the same for whole modules (e.g. a layer's output, the
  residual stream).
* :func:`knockout` — attention knockout: forbid chosen query→key edges in chosen heads
  (the weights renormalise over the keys left).
* :func:`logit_lens` — read the residual stream after each layer with the model's own
  final readout (nostalgebraist, 2020).

Heads are named ``(layer, head)``; ``mhas`` is the list of the model's
:class:`attnlab.MultiHeadAttention` modules, layer by layer (:func:`attention_modules`).
Why the input of ``w_o``: ``MultiHeadAttention`` concatenates its H heads, (B, T, H·Dh),
before ``w_o`` mixes them, so head h is the slice ``[h·Dh, (h+1)·Dh)`` of that input and
a forward *pre-hook* on ``w_o`` can read or replace it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from .. import validation as V
from ..masking import causal_mask
from ..multihead import MultiHeadAttention

__all__ = [
    "attention_modules",
    "cache_heads",
    "ablate_heads",
    "patch_heads",
    "patch_outputs",
    "knockout",
    "logit_lens",
]


def attention_modules(model: nn.Module) -> list[MultiHeadAttention]:
    """Every :class:`attnlab.MultiHeadAttention` inside ``model``, in module order."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    found = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not found:
        raise ValueError(f"{type(model).__name__} has no attnlab MultiHeadAttention")
    return found


def _check_mhas(mhas) -> list[MultiHeadAttention]:
    mhas = list(mhas) if isinstance(mhas, (list, tuple)) else mhas
    if not isinstance(mhas, list) or not mhas:
        raise TypeError(
            "mhas must be a non-empty list of attnlab MultiHeadAttention modules "
            f"(attention_modules(model)), got {type(mhas).__name__}"
        )
    for i, m in enumerate(mhas):
        if not isinstance(m, MultiHeadAttention):
            raise TypeError(
                f"mhas[{i}] is a {type(m).__name__}, not an attnlab MultiHeadAttention"
            )
    return mhas


def _check_heads(mhas, heads) -> dict[int, list[int]]:
    """``[(layer, head), ...]`` -> ``{layer: [heads]}``, every pair checked."""
    if isinstance(heads, tuple) and len(heads) == 2 and not isinstance(heads[0], tuple):
        heads = [heads]  # a single (layer, head)
    out: dict[int, list[int]] = {}
    for pair in heads:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"heads must be (layer, head) pairs of ints, got {pair!r}")
        layer = V.integer(pair[0], "a head's layer", "heads")
        head = V.integer(pair[1], "a head's index", "heads")
        if not 0 <= layer < len(mhas):
            raise ValueError(f"layer {layer} out of range: the model has {len(mhas)}")
        if not 0 <= head < mhas[layer].n_heads:
            raise ValueError(
                f"head {head} out of range: layer {layer} has {mhas[layer].n_heads}"
            )
        out.setdefault(layer, []).append(head)
    if not out:
        raise ValueError("heads is empty: name at least one (layer, head)")
    return out


@contextmanager
def _hooks(handles: list):
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _split(x: torch.Tensor, mha: MultiHeadAttention) -> torch.Tensor:
    B, T, _ = x.shape
    return x.view(B, T, mha.n_heads, mha.d_head)  # (B, T, H·Dh) -> (B, T, H, Dh)


@contextmanager
def cache_heads(mhas: Sequence[MultiHeadAttention]):
    """Yield a dict ``{layer: (B, T, H, Dh)}`` filled by the next forward pass."""
    mhas = _check_mhas(mhas)
    cache: dict[int, torch.Tensor] = {}

    def hook_for(layer, mha):
        def hook(_mod, args):
            cache[layer] = _split(args[0], mha).detach().clone()  # (B, T, H, Dh)

        return hook

    handles = [
        m.w_o.register_forward_pre_hook(hook_for(i, m)) for i, m in enumerate(mhas)
    ]
    with _hooks(handles):
        yield cache


def _replace_heads(mhas, by_layer, value_for, positions=None):
    """Pre-hooks on ``w_o`` that overwrite heads (at ``positions``) with value_for()."""

    def hook_for(layer, mha, heads):
        def hook(_mod, args):
            x = _split(args[0], mha).clone()  # (B, T, H, Dh)
            new = value_for(layer, x)  # broadcastable to (B, T, H, Dh)
            new = torch.broadcast_to(new.to(x.dtype), x.shape)
            T = x.shape[1]
            pos = slice(None) if positions is None else _positions(positions, T)
            for h in heads:
                x[:, pos, h] = new[:, pos, h]
            return (x.flatten(2),) + tuple(args[1:])  # (B, T, H·Dh)

        return hook

    return [
        mhas[layer].w_o.register_forward_pre_hook(hook_for(layer, mhas[layer], heads))
        for layer, heads in by_layer.items()
    ]


def _positions(positions, T: int) -> torch.Tensor:
    pos = torch.as_tensor(positions, dtype=torch.long).reshape(-1)
    if pos.numel() == 0 or int(pos.min()) < 0 or int(pos.max()) >= T:
        raise ValueError(f"positions must lie in 0 .. {T - 1}, got {pos.tolist()}")
    return pos


@contextmanager
def ablate_heads(
    mhas: Sequence[MultiHeadAttention],
    heads: Iterable,
    mode: str = "zero",
    means: dict | None = None,
):
    """Switch heads off: their outputs become 0 (``"zero"``) or their mean output
    (``"mean"``: pass ``means = {layer: (H, Dh) or (T, H, Dh)}``, e.g. the mean of a
    :func:`cache_heads` run over the batch, ``cache[l].mean(0)``)."""
    mhas = _check_mhas(mhas)
    by_layer = _check_heads(mhas, heads)
    if mode == "zero":

        def value_for(layer, x):
            return torch.zeros((), dtype=x.dtype)

    elif mode == "mean":
        if not isinstance(means, dict):
            raise TypeError("mode='mean' needs means={layer: (H, Dh) or (T, H, Dh)}")
        for layer in by_layer:
            m, want = means.get(layer), (mhas[layer].n_heads, mhas[layer].d_head)
            if not isinstance(m, torch.Tensor) or tuple(m.shape[-2:]) != want:
                raise ValueError(
                    f"means[{layer}] must be a tensor (..., H, Dh) = (..., {want}), got "
                    f"{getattr(m, 'shape', m)}"
                )

        def value_for(layer, x):
            m = means[layer]
            if m.dim() == 3 and m.shape[0] != x.shape[1]:
                raise ValueError(
                    f"means[{layer}] has {m.shape[0]} positions, input {x.shape[1]}"
                )
            return m
    else:
        raise ValueError(f"mode must be 'zero' or 'mean', got {mode!r}")
    with _hooks(_replace_heads(mhas, by_layer, value_for)):
        yield


@contextmanager
def patch_heads(
    mhas: Sequence[MultiHeadAttention],
    clean: dict,
    heads: Iterable,
    positions=None,
):
    """Activation patching: during the next runs, chosen heads (at ``positions``, all by
    default) output what they output in the clean run, ``clean = {layer: (B, T, H, Dh)}``
    from :func:`cache_heads`. The corrupted input must have the clean run's shape."""
    mhas = _check_mhas(mhas)
    by_layer = _check_heads(mhas, heads)
    for layer in by_layer:
        if not isinstance(clean, dict) or layer not in clean:
            raise ValueError(f"clean has no cached heads for layer {layer}")

    def value_for(layer, x):
        if clean[layer].shape != x.shape:
            raise ValueError(
                f"layer {layer}: the clean run's heads are {tuple(clean[layer].shape)}, "
                f"this run's {tuple(x.shape)}: patch inputs of the same shape"
            )
        return clean[layer]

    with _hooks(_replace_heads(mhas, by_layer, value_for, positions)):
        yield


@contextmanager
def patch_outputs(modules: Sequence[nn.Module], clean: Sequence, positions=None):
    """Replace each module's output (B, T, D) at ``positions`` by ``clean[i]``, its
    output in the clean run (e.g. a layer: the residual stream after it)."""
    if len(modules) != len(clean):
        raise ValueError(f"{len(modules)} modules but {len(clean)} clean outputs")

    def hook_for(c):
        def hook(_mod, _args, out):
            if not isinstance(out, torch.Tensor) or out.shape != c.shape:
                raise ValueError(
                    f"output {getattr(out, 'shape', type(out))} does not match the clean "
                    f"{tuple(c.shape)}"
                )
            pos = (
                slice(None)
                if positions is None
                else _positions(positions, out.shape[1])
            )
            out = out.clone()
            out[:, pos] = c[:, pos].to(out.dtype)
            return out

        return hook

    with _hooks([m.register_forward_hook(hook_for(c)) for m, c in zip(modules, clean)]):
        yield


@contextmanager
def knockout(
    mhas: Sequence[MultiHeadAttention],
    heads: Iterable,
    edges: Sequence[tuple[int, int]],
):
    """Attention knockout: in the chosen heads, query ``i`` may not attend to key ``j``
    for each ``(i, j)`` in ``edges``. Added to the module's own masks (``attn_mask``,
    padding, causal); a query left with no key raises ValueError."""
    mhas = _check_mhas(mhas)
    by_layer = _check_heads(mhas, heads)
    if not edges or any(len(e) != 2 for e in edges):
        raise ValueError(
            f"edges must be a non-empty list of (query, key), got {edges!r}"
        )

    def hook_for(mha, hs):
        def hook(_mod, args, kwargs):
            if len(args) > 5:
                raise ValueError("knockout needs attn_mask passed by keyword")
            q, k = args[0], args[1]
            T, S, H = q.shape[1], k.shape[1], mha.n_heads
            if max(i for i, _ in edges) >= T or max(j for _, j in edges) >= S:
                raise ValueError(f"an edge in {edges} is outside (T, S) = {(T, S)}")
            keep = torch.ones(1, H, T, S, dtype=torch.bool, device=q.device)
            for i, j in edges:
                keep[0, hs, i, j] = False
            old = kwargs.get("attn_mask")
            if old is None:
                new = keep
            else:
                if old.dim() == 3 and old.shape[0] == q.shape[0]:
                    old = old[:, None]  # (B, T, S) -> (B, 1, T, S)
                elif old.dim() not in (2, 4):
                    raise ValueError(
                        f"knockout cannot combine attn_mask {tuple(old.shape)}"
                    )
                if old.dtype == torch.bool:
                    new = old & keep
                else:
                    new = old.masked_fill(~keep, float("-inf"))
            allowed = new if new.dtype == torch.bool else torch.isfinite(new)
            if kwargs.get("is_causal"):  # MHA's own rule: top-left, on q's device
                allowed = allowed & causal_mask(T, S, device=q.device)  # (T, S)
            kpm = kwargs.get("key_padding_mask", args[3] if len(args) > 3 else None)
            if kpm is not None:  # (B, S): True = may attend, or float (added)
                keys = kpm if kpm.dtype == torch.bool else torch.isfinite(kpm)
                allowed = allowed & keys[:, None, None, :]  # (B, H, T, S)
            if not bool(allowed.any(-1).all()):
                raise ValueError(f"knockout of {edges} leaves a query with no key")
            return args, {**kwargs, "attn_mask": new}

        return hook

    handles = [
        mhas[layer].register_forward_pre_hook(
            hook_for(mhas[layer], hs), with_kwargs=True
        )
        for layer, hs in by_layer.items()
    ]
    with _hooks(handles):
        yield


def logit_lens(
    model: nn.Module,
    layers: Sequence[nn.Module],
    readout: Callable[[torch.Tensor], torch.Tensor],
    *inputs,
) -> list[torch.Tensor]:
    """Run ``model(*inputs)`` and apply ``readout`` (the model's final norm and
    unembedding) to the output of each of ``layers``: one tensor per layer, e.g.
    (B, T, V) logits as if the model stopped there."""
    if not callable(readout):
        raise TypeError(f"readout must be callable, got {type(readout).__name__}")
    if not layers:
        raise ValueError("layers is empty: name the modules whose outputs to read")
    seen: dict[int, torch.Tensor] = {}

    def hook_for(i):
        def hook(_mod, _args, out):
            seen[i] = out if isinstance(out, torch.Tensor) else out[0]

        return hook

    with _hooks([m.register_forward_hook(hook_for(i)) for i, m in enumerate(layers)]):
        with torch.no_grad():
            model(*inputs)
            missing = [i for i in range(len(layers)) if i not in seen]
            if missing:
                raise ValueError(f"layers {missing} did not run in model(*inputs)")
            return [readout(seen[i]) for i in range(len(layers))]
