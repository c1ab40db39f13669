"""A faithfulness panel for MiniLM's token readings (chapter 11): ERASER's
comprehensiveness and sufficiency, a norm-based rollout, and a randomised top layer.

The output explained is the sentence embedding ``e`` (:meth:`MiniLM.pool`); a change is
``1 - cos``. For a ranking of a sentence's word tokens (every position but ``[CLS]`` and
``[SEP]``), DeYoung et al. (2020, ERASER):

* **comprehensiveness** at k: ``1 - cos(e(x), e(x without its top k))``, how far the
  output moves without what the ranking calls important (higher is better);
* **sufficiency** at k: ``1 - cos(e(x), e(only the top k))`` (``[CLS]`` and ``[SEP]``
  kept), how far it moves with nothing else (lower is better);
* their **AOPC**: the mean over the k of the panel.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from ..pretrained.model import MiniLM
from ..seeding import manual_seed
from .rollout import attention_rollout, value_norm_attention

__all__ = ["STOP_WORDS", "eraser_scores", "norm_rollout", "randomised_top_layer"]

# function words of English and punctuation, written for any text (a trivial baseline)
STOP_WORDS = frozenset(
    "the a an this that these those his her its their our my your he she it they we i "
    "you him them us of to in on at for by with from over after before into about and "
    "or but as is was were be been are . , ;".split()
)


@torch.no_grad()
def eraser_scores(model: MiniLM, text: str, scores: torch.Tensor, ks=(1, 2, 3)) -> dict:
    """Comprehensiveness and sufficiency of one ranking of ``text``'s word tokens.

    ``scores`` (n,): one score per word token (higher = more important), ties broken by
    position. Returns ``{"comprehensiveness": [..], "sufficiency": [..]}``, one value per
    k of ``ks`` (each k at most n).
    """
    ids, mask = model.encode([text])  # (1, T)
    n = ids.shape[1] - 2
    if scores.shape != (n,) or max(ks) > n or min(ks) < 1:
        raise ValueError(
            f"need scores of shape ({n},) and 1 <= k <= {n}, got {tuple(scores.shape)} "
            f"and ks {tuple(ks)}"
        )
    base = model.pool(model(ids, mask)[0][-1], mask)[0]  # (D,)
    order = torch.argsort(scores, descending=True, stable=True) + 1  # word positions
    out: dict = {"comprehensiveness": [], "sufficiency": []}
    for k in ks:
        top = torch.zeros(ids.shape[1], dtype=torch.bool)
        top[order[:k]] = True
        special = torch.zeros_like(top)
        special[[0, -1]] = True
        for key, keep in (("comprehensiveness", ~top), ("sufficiency", top | special)):
            x = ids[0, keep][None]  # (1, T') the kept tokens, in order
            m = torch.ones_like(x, dtype=torch.bool)  # (1, T')
            e = model.pool(model(x, m)[0][-1], m)  # (1, D)
            out[key].append(1 - float(e[0] @ base))
    return out


@torch.no_grad()
def norm_rollout(model: MiniLM, text: str) -> torch.Tensor:
    """Rollout of the norm-weighted maps (Kobayashi et al., 2020) instead of the raw
    weights: per layer the map ``|| sum_h alpha^h_ij f_h(x_j) ||``, rows normalised,
    then rollout's ``0.5 A + 0.5 I`` and the product over layers. (n,): the mean of
    the rows (the output row of a mean-pooled model), on the word tokens."""
    ids, mask = model.encode([text])
    hidden, att = model(ids, mask)  # 7 x (1, T, D), 6 x (1, H, T, T)
    maps = []
    for layer, x, a in zip(model.layers, hidden[:-1], att):
        sa: Any = layer.self_attn
        N = value_norm_attention(x, a, sa.w_v, sa.w_o)[1]  # (1, T, S)
        maps.append((N / N.sum(-1, keepdim=True))[:, None])  # (1, 1, T, S)
    return attention_rollout(maps)[0].mean(0)[1:-1].double()  # (n,)


def randomised_top_layer(model: MiniLM, seed: int = 0) -> MiniLM:
    """A copy of ``model`` whose last encoder layer is re-initialised (Adebayo et al.,
    2018's model-randomisation test: a reading that does not change with the model
    cannot explain it)."""
    rand = copy.deepcopy(model)
    manual_seed(seed)
    mod: Any
    for mod in rand.layers[-1].modules():
        if hasattr(mod, "reset_parameters") and mod is not rand.layers[-1]:
            mod.reset_parameters()
    return rand.eval()
