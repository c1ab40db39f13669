"""Attention against attribution on MiniLM: token attributions by gradient x input,
deletion and the attention maps, for one text (chapter 10; its 0.2 home was
``attnlab.pretrained.attribution``, now a deprecated alias)."""

from __future__ import annotations

from typing import Any

import torch

from ..pretrained.model import MiniLM
from .rollout import attention_flow, attention_rollout, value_norm_attention

__all__ = ["ATTRIBUTION_METHODS", "token_attributions"]

# ------------------------------------------------------------- attention vs attribution
ATTRIBUTION_METHODS = (
    "raw",
    "raw [CLS]",
    "rollout",
    "rollout [CLS]",
    "flow",
    "flow [CLS]",
    "value norm",
    "gradient x input",
)


def _jvp_tokens(model: MiniLM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``||J_t x_t||`` for every position t of one input ``x (1, T, D)``: how far the
    sentence embedding moves, to first order, if token t's input vector went to 0.

    A batch of T copies, copy t to be moved along ``x_t`` on position t only; the T
    Jacobian-vector products come from two reverse passes (the gradient of
    ``<e(X), u>`` is linear in ``u``, so differentiating ``<grad, V>`` with respect to
    ``u`` gives ``J V``).
    """
    T = x.shape[1]
    X = x.detach().expand(T, -1, -1).clone().requires_grad_(True)  # (T, T, D)
    M = mask.expand(T, -1).clone()  # (T, T)
    with torch.enable_grad():
        emb = model.pool(model.run_layers(X, M)[0][-1], M)  # (T, D)
        u = torch.zeros_like(emb, requires_grad=True)  # (T, D)
        (g,) = torch.autograd.grad((emb * u).sum(), X, create_graph=True)  # (T, T, D)
        V = torch.zeros_like(X)
        idx = torch.arange(T)
        V[idx, idx] = x.detach()[0]  # copy t moves only token t, along x_t
        (jv,) = torch.autograd.grad((g * V).sum(), u)  # (T, D): J_t x_t
    return jv.norm(dim=-1)  # (T,)


@torch.no_grad()
def _deletion(model: MiniLM, ids, mask, replace_with: int | None) -> torch.Tensor:
    """``1 - cos(e(x), e(x'))`` for every word token, x' = x without it (or with it
    replaced by ``replace_with``), (n,) over positions 1..T-2."""
    T = ids.shape[1]
    base = model.pool(model(ids, mask)[0][-1], mask)  # (1, D)
    variants = []
    for t in range(1, T - 1):
        if replace_with is None:
            variants.append(torch.cat([ids[0, :t], ids[0, t + 1 :]]))  # (T-1,)
        else:
            v = ids[0].clone()
            v[t] = replace_with
            variants.append(v)
    X = torch.stack(variants)  # (n, T - 1) or (n, T)
    M = torch.ones_like(X, dtype=torch.bool)
    emb = model.pool(model(X, M)[0][-1], M)  # (n, D)
    return 1 - emb @ base[0]  # (n,)


def token_attributions(model: MiniLM, text: str) -> dict:
    """Eight readings of one sentence's word tokens, and two ways of deleting them.

    For the word tokens (every position but ``[CLS]`` and ``[SEP]``), (n,) each:

    * ``"raw"``: last layer, heads averaged, the mean of all rows (the sentence
      embedding is the mean over every position, so every row is an output row);
      ``"raw [CLS]"``: the ``[CLS]`` row alone (A&Z read it: their classifier does);
    * ``"rollout"``, ``"rollout [CLS]"``, ``"flow"``, ``"flow [CLS]"``: the same two
      rows of :func:`attnlab.explain.attention_rollout` / ``attention_flow``;
    * ``"value norm"``: the last layer's :func:`attnlab.explain.value_norm_attention`
      layer map (norm of the sum over heads), mean of all rows;
    * ``"gradient x input"``: ``||J_t x_t||``, the first-order change of the (unit)
      sentence embedding when token t's input vector is set to zero;
    * ``"deletion"``: ``1 - cos(e(x), e(x without t))`` of the real embedding
      ``e`` (mean-pooled and normalised, :meth:`MiniLM.pool`); ``"[MASK]"``: the same
      with the token replaced by ``[MASK]``, an input closer to what BERT-style models
      saw in pre-training.

    Returns a dict of (n,) float64 tensors and ``"tokens"`` (the n word tokens).
    """
    ids, mask = model.encode([text])  # (1, T)
    with torch.no_grad():
        hidden, att = model(ids, mask)  # 7 x (1, T, D), 6 x (1, H, T, T)
        roll = attention_rollout(att)[0]  # (T, T)
        flow = attention_flow(att, mask)[0]  # (T, T)
        last: Any = model.layers[-1].self_attn  # a MultiHeadAttention
        _, vnorm = value_norm_attention(hidden[-2], att[-1], last.w_v, last.w_o)
    raw = att[-1][0].mean(0)  # (T, T): heads averaged
    x = model.embed(ids, mask=mask)  # (1, T, D): the input of the first layer
    words = slice(1, ids.shape[1] - 1)
    out = {
        "raw": raw.mean(0),
        "raw [CLS]": raw[0],
        "rollout": roll.mean(0),
        "rollout [CLS]": roll[0],
        "flow": flow.mean(0),
        "flow [CLS]": flow[0],
        "value norm": vnorm[0].mean(0),
        "gradient x input": _jvp_tokens(model, x, mask),
    }
    out = {k: v[words].detach().double() for k, v in out.items()}
    tok = model.tokenizer.token_to_id("[MASK]")
    out["deletion"] = _deletion(model, ids, mask, None).double()
    out["[MASK]"] = _deletion(model, ids, mask, tok).double()
    out["tokens"] = model.tokens(text)[words]
    return out
