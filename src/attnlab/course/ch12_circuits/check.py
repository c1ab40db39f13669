"""Checks for chapter 12 (circuits: induction heads).

* :func:`ablation_effect` — ``fn(model, ids, n, head) -> float``: how much the loss on
  the second copy rises when head ``(layer, head)`` of an
  :class:`attnlab.circuits.AttentionOnly` model is switched off (its output set to 0).
* :func:`patched_loss` — ``fn(model, clean_ids, corrupt_ids, n, head) -> float``: the
  second copy's loss of the corrupted run with head ``(layer, head)``'s output, at
  every position, taken from the clean run (activation patching).
* :func:`duplicate_token_scores` — ``fn(weights (L, B, H, T, T), ids (B, T)) -> (L, H)``:
  the share of each head's attention on *earlier* positions holding the same token,
  mean over sequences (the head detector's "duplicate token" pattern).
"""

from __future__ import annotations

import torch

from ...circuits import AttentionOnly, InductionConfig, copy_losses, repeated_tokens
from ...explain import ablate_heads, attention_modules, cache_heads, patch_heads
from ..check_core import Case, close, run_check, seeded

__all__ = ["ablation_effect", "patched_loss", "duplicate_token_scores"]

# check name -> the library calls an answer may not make (the grader reads this too)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # switching the head off is what the exercise asks to write
    "ablation_effect": (
        "attnlab.explain.ablate_heads",
        "attnlab.explain.interventions.ablate_heads",
        "attnlab.explain.patch_heads",
    ),
    # the hooks are what the exercise asks to write
    "patched_loss": (
        "attnlab.explain.patch_heads",
        "attnlab.explain.cache_heads",
        "attnlab.explain.patch_outputs",
        "attnlab.explain.interventions.patch_heads",
        "attnlab.explain.interventions.cache_heads",
    ),
    # the library's detector computes the other two patterns the same way
    "duplicate_token_scores": (
        "attnlab.circuits.head_scores",
        "attnlab.circuits.pattern_mask",
    ),
}


# ------------------------------------------------------------------ ablation effect
def _model(seed: int, n_layers: int = 2) -> AttentionOnly:
    torch.manual_seed(seed)
    cfg = InductionConfig(
        vocab_size=12, half=5, d_model=16, n_heads=4, n_layers=n_layers
    )
    m = AttentionOnly(cfg).eval()
    with torch.no_grad():  # larger weights than at initialisation: heads that matter
        for p in m.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    return m


def _ablation_reference(model, ids, n, head) -> float:
    with torch.no_grad():
        base = copy_losses(model(ids), ids, n)[1]
        with ablate_heads(attention_modules(model), [head]):
            off = copy_losses(model(ids), ids, n)[1]
    return off - base


def ablation_effect(fn):
    """Check ``fn(model, ids, n, head) -> float`` (second-copy loss, ablated - not)."""
    ids, n = repeated_tokens(16, 5, 12, seeded(1200))
    cases = []
    first = _model(0)
    for seed, head in ((0, (1, 2)), (1, (0, 3)), (2, (1, 0))):
        model = first if seed == 0 else _model(seed)
        cases.append(
            Case(
                f"model {seed}, head {head}",
                (model, ids, n, head),
                _ablation_reference(model, ids, n, head),
                "zero the head's Dh columns of w_o (its slice of the concatenated "
                "heads, head * Dh to (head + 1) * Dh), score the second copy only "
                "(copy_losses(...)[1]), return ablated minus intact, and put the "
                "weights back afterwards",
            )
        )
    model = _model(3, n_layers=1)
    cases.append(
        Case(
            "a 1-layer model, head (0, 1)",
            (model, ids, n, (0, 1)),
            _ablation_reference(model, ids, n, (0, 1)),
            "the layer index picks the attention module: model.blocks[layer].attn",
        )
    )
    # the first model object again: an answer that left it ablated fails here
    cases.append(
        Case(
            "model 0 again, head (0, 0)",
            (first, ids, n, (0, 0)),
            _ablation_reference(first, ids, n, (0, 0)),
            "leave the model as you found it (copy w_o's weight and restore it, or "
            "use a hook and remove it)",
        )
    )

    def compare(got, expected):
        return isinstance(got, (float, int, torch.Tensor)) and close(
            float(got), expected, atol=1e-5, rtol=1e-4
        )

    return run_check(
        "ablation_effect", fn, cases, compare=compare,
        forbid=FORBIDDEN["ablation_effect"],
    )  # fmt: skip


# ------------------------------------------------------------------ patched loss
def _patched_reference(model, clean, corrupt, n, head) -> float:
    mhas = attention_modules(model)
    with torch.no_grad():
        with cache_heads(mhas) as cache:
            model(clean)
        with patch_heads(mhas, cache, [head]):
            return copy_losses(model(corrupt), corrupt, n)[1]


def patched_loss(fn):
    """Check ``fn(model, clean_ids, corrupt_ids, n, head) -> float``."""
    clean, n = repeated_tokens(16, 5, 12, seeded(1202))
    corrupt = clean.clone()
    pos = torch.arange(clean.shape[1])[None]
    first = (pos >= 1) & (pos <= n[:, None])  # the first copy gets other tokens
    corrupt[first] = torch.randint(1, 12, (int(first.sum()),), generator=seeded(1203))
    cases = []
    for seed, head in ((0, (1, 1)), (1, (0, 2)), (2, (1, 3))):
        model = _model(seed)
        cases.append(
            Case(
                f"model {seed}, head {head}",
                (model, clean, corrupt, n, head),
                _patched_reference(model, clean, corrupt, n, head),
                "record the head's slice of w_o's input (head * Dh to (head + 1) * Dh) "
                "in the clean run, put it in that slice in the corrupted run, only "
                "for that head, and return the corrupted run's second-copy loss",
            )
        )

    def compare(got, expected):
        return isinstance(got, (float, int, torch.Tensor)) and close(
            float(got), expected, atol=1e-5, rtol=1e-4
        )

    return run_check(
        "patched_loss", fn, cases, compare=compare, forbid=FORBIDDEN["patched_loss"]
    )


# ------------------------------------------------------------- duplicate-token heads
def _duplicate_reference(weights, ids):
    L, B, H, T, _ = weights.shape
    out = torch.zeros(L, H, dtype=torch.float64)
    for b in range(B):  # one sequence at a time, as the detector does
        same = (ids[b][:, None] == ids[b][None, :]) & torch.ones(T, T).tril(-1).bool()
        for layer in range(L):
            for h in range(H):
                a = weights[layer, b, h].double()
                out[layer, h] += (a * same).sum() / a.sum() / B
    return out


def _causal_weights(L, B, H, T, g, sharp=1.0):
    s = sharp * torch.randn(L, B, H, T, T, generator=g)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1)


def duplicate_token_scores(fn):
    """Check ``fn(weights (L, B, H, T, T), ids (B, T)) -> (L, H)``."""
    g = seeded(1201)
    ids = torch.tensor([[0, 4, 6, 4, 6, 4], [0, 2, 2, 3, 1, 3]])
    w = _causal_weights(2, 2, 3, 6, g)
    ids2 = torch.randint(1, 4, (3, 9), generator=g)
    w2 = _causal_weights(1, 3, 2, 9, g, sharp=4.0)
    exact = torch.zeros(1, 1, 1, 6, 6)  # attends to the last earlier copy, else itself
    for i, t in enumerate(ids[0].tolist()):
        earlier = [j for j in range(i) if ids[0, j] == t]
        exact[0, 0, 0, i, earlier[-1] if earlier else i] = 1.0
    cases = [
        Case("2 layers, 3 heads, 2 sequences", (w, ids), _duplicate_reference(w, ids),
             "earlier positions only (j < i): the current token is not its own "
             "duplicate"),
        Case("sharp weights, many repeats", (w2, ids2), _duplicate_reference(w2, ids2),
             "divide by the head's total attention (T rows of 1), not by the "
             "number of duplicate pairs, and average the sequences"),
        Case("an exact duplicate-token head", (exact, ids[:1]),
             _duplicate_reference(exact, ids[:1]),
             "rows with no earlier copy still count in the denominator"),
    ]  # fmt: skip
    return run_check(
        "duplicate_token_scores", fn, cases,
        compare=lambda got, exp: isinstance(got, torch.Tensor)
        and close(got.double(), exp, atol=1e-5, rtol=1e-4),
        forbid=FORBIDDEN["duplicate_token_scores"],
    )  # fmt: skip
