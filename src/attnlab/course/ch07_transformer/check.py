"""Checks for chapter 7 (the Transformer; chapters 7a and 7b).

* :func:`prefix_lm_mask` — ``fn(prefix_lengths (B,), lengths (B,), T) -> (B, T, T)``
  boolean, ``True`` = may attend: a prefix language model's mask (the prefix sees
  itself in both directions, later tokens see the prefix and their past; padding
  never).

The expected answers come from :mod:`attnlab.masking` and attnlab's Transformer layers
themselves.
"""

from __future__ import annotations

import warnings

import torch

from .. import check_core
from ..check_core import Case, CheckResult, close, run_check, seeded

__all__ = ["prefix_lm_mask"]

# (not in __all__: every check module has one.)
# check -> the library functions and classes its exercise asks the student to do
# without (shared with the grader). The pre-LN exercise also may not call the layer it
# is given: the check's layer refuses its own forward (see pre_ln_decoder_layer).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "prefix_lm_mask": (
        "attnlab.masking.causal_mask",
        "attnlab.masking.padding_mask",
        "attnlab.masking.combine_masks",
    ),
    "label_smoothing_optimum": (),  # nothing in attnlab computes the optimum
    "pre_ln_decoder_layer": ("torch.nn.TransformerDecoderLayer",),
    "noam_schedule": ("attnlab.train.noam_lr", "attnlab.train.noam_scheduler"),
}


def prefix_lm_mask(fn):
    """Check ``fn(prefix_lengths (B,), lengths (B,), T) -> (B, T, T)`` bool, True =
    may attend: key j is visible to query i when j is a real token (j < length) and
    either j is in the prefix (j < prefix_length) or j <= i."""

    def ref(prefix, lengths, T):
        i = torch.arange(T)[:, None]  # (T, 1) queries
        j = torch.arange(T)[None, :]  # (1, T) keys
        seen = (j <= i)[None] | (j[None] < prefix[:, None, None])  # (B, T, T)
        return seen & (j[None] < lengths[:, None, None])

    specs = [
        ("no prefix", [0], [4], 4,
         "with prefix length 0 it is a decoder: query t (row) sees keys 0..t "
         "(columns), itself included, as a bool tensor (B, T, T)"),
        ("all prefix", [3], [3], 3,
         "when every token is prefix, every token sees every token (both directions)"),
        ("prefix and target", [2], [5], 5,
         "prefix tokens see the whole prefix but no later token; a later token sees "
         "the prefix and its own past, itself included"),
        ("padding", [2, 1, 3], [4, 2, 3], 5,
         "keys at or after each example's length are padding: no query sees them "
         "(mask the columns; broadcast (B, 1, T)); padding query rows follow the same "
         "rule as real ones, do not blank them (an all-False row is NaN in a "
         "textbook softmax)"),
        ("length 1", [1], [1], 1, "a single token sees itself: [[[True]]]"),
    ]  # fmt: skip
    cases = []
    for label, prefix, lengths, T, hint in specs:
        args = (torch.tensor(prefix), torch.tensor(lengths), T)
        cases.append(Case(label, args, ref(*args), hint))

    def compare(got, expected):
        return (
            isinstance(got, torch.Tensor)
            and got.dtype == torch.bool
            and close(got, expected)
        )

    return run_check(
        "prefix_lm_mask", fn, cases, compare, forbid=FORBIDDEN["prefix_lm_mask"]
    )


# ------------------------------------------------------------------ chapter 7 (2)
__all__ += ["label_smoothing_optimum", "pre_ln_decoder_layer", "noam_schedule"]

assert set(FORBIDDEN) == set(__all__)  # one entry per check


def label_smoothing_optimum(fn) -> CheckResult:
    """Check ``fn(eps, V) -> (p_gold, min_loss)`` for label-smoothed cross-entropy.

    The loss ``(1 - eps)(-log p_y) + eps · mean_c(-log p_c)`` over V classes is
    smallest at ``p_y = 1 - eps + eps / V`` (the rest ``eps / V`` each); its minimum
    is the entropy of that smoothed target. Reference: the closed form, and the loss
    itself evaluated at the optimum in float64.
    """
    cases = []
    for eps, V in ((0.1, 15), (0.1, 2), (0.0, 15), (0.3, 100), (0.1, 37000)):
        p_gold = 1 - eps + eps / V
        rest = eps / V
        min_loss = -(p_gold * torch.tensor(p_gold, dtype=torch.float64).log()).item()
        if rest > 0:
            min_loss -= (
                (V - 1) * rest * torch.tensor(rest, dtype=torch.float64).log().item()
            )
        hint = (
            "with eps = 0 the best model puts probability 1 on the gold token: loss 0"
            if eps == 0
            else "the loss is the cross-entropy against the smoothed target q, which "
            "gives every class eps/V, the gold one included (so gold gets "
            "1 - eps + eps/V); it is smallest at p = q, where it equals the entropy "
            "of q, not 0"
        )
        cases.append(Case(f"eps={eps}, V={V}", (eps, V), (p_gold, min_loss), hint))

    def compare(got, expected):
        try:
            p, loss = (float(v) for v in got)
        except (TypeError, ValueError):
            return False
        return abs(p - expected[0]) < 1e-6 and abs(loss - expected[1]) < 1e-5

    return run_check(
        "label_smoothing_optimum",
        fn,
        cases,
        compare,
        forbid=FORBIDDEN["label_smoothing_optimum"],
    )


def pre_ln_decoder_layer(fn) -> CheckResult:
    """Check ``fn(layer, y (B, T, D), memory (B, S, D), memory_mask (B, S))``, pre-LN.

    Causal self-attention over ``y``, cross-attention to ``memory`` (padding keys
    ``False`` in ``memory_mask``), FFN; each sub-block normalised at its input, with a
    residual around it. Compared with ``attnlab.TransformerDecoderLayer(norm_first=True)``
    (no final LayerNorm: that belongs to the stack).
    """
    with torch.random.fork_rng():  # fixed weights, the caller's RNG left alone
        torch.manual_seed(11)
        layer = _decoder_layer(activation="relu")
        gelu = _decoder_layer(activation="gelu")
    order = (
        "normalise *before* each sub-block and add its output to the raw stream: "
        "y = y + self_attn(norm1(y)), y = y + cross_attn(norm2(y), memory), "
        "y = y + FFN(norm3(y)); no LayerNorm after the additions (that is post-LN)"
    )
    specs = [  # label, layer, B, T, S, source lengths, input scale, hint
        ("T=1, no padding", layer, 1, 1, 3, [3], 1.0, order),
        (
            "T=4, no padding",
            layer,
            2,
            4,
            3,
            [3, 3],
            1.0,
            "the self-attention is causal: target position t sees positions 0..t "
            "only (attn_mask = lower-triangular (T, T), True = may attend)",
        ),
        (
            "B=2, T=3, S=4, source padding",
            layer,
            2,
            3,
            4,
            [4, 2],
            1.0,
            "memory_mask (B, S) is True on real source tokens: pass it to cross_attn "
            "as key_padding_mask (attnlab's convention, no flip); the keys and "
            "values of cross_attn are memory",
        ),
        ("inputs x 1000", layer, 2, 4, 3, [3, 1], 1000.0, order),
        ("GELU", gelu, 2, 5, 4, [4, 4], 1.0, "use layer.activation, not F.relu"),
    ]
    cases, flipped = [], {}  # flipped: id(y) -> (case, the flipped-mask answer)
    for i, (label, lay, B, T, S, lengths, scale, hint) in enumerate(specs):
        g = seeded(800 + i)
        y = torch.randn(B, T, 8, generator=g) * scale
        memory = torch.randn(B, S, 8, generator=g)
        mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the flipped mask warns, as it should
            expected = lay(
                tgt=y, memory=memory, tgt_mask=causal, memory_key_padding_mask=mask
            )
            wrong = lay(
                tgt=y, memory=memory, tgt_mask=causal, memory_key_padding_mask=~mask
            )
        cases.append(Case(label, (lay, y, memory, mask), expected, hint))
        flipped[id(y)] = (cases[-1], wrong)
    flip_hint = (
        "memory_mask is True on real source tokens, and attnlab's key_padding_mask "
        "means the same: pass it as it is; ~memory_mask (PyTorch's nn.Transformer* "
        "convention) blocks every real source token"
    )

    def compare(got, expected):
        return close(got, expected, atol=1e-4 * float(expected.abs().max()), rtol=1e-4)

    def answer(lay, y, memory, memory_mask):  # names the flipped mask when it is one
        got = fn(lay, y, memory, memory_mask)
        case, wrong = flipped.get(id(y), (None, None))
        if case is not None and wrong is not None and isinstance(got, torch.Tensor):
            try:
                if got.shape == wrong.shape and compare(got, wrong):
                    case.hint = flip_hint
            except Exception:  # an answer the comparison cannot handle: no diagnosis
                pass
        return got

    def no_forward(*args, **kwargs):
        raise RuntimeError(
            "you called layer(...) itself: write its forward from the sub-modules"
        )

    for lay in (layer, gelu):  # the answer gets layers whose own forward refuses
        lay.forward = no_forward
    try:
        return run_check(
            "pre_ln_decoder_layer",
            fn if check_core._GRADING or not callable(fn) else answer,
            cases,
            compare,
            forbid=FORBIDDEN["pre_ln_decoder_layer"],
        )
    finally:
        for lay in (layer, gelu):
            del lay.forward


def _decoder_layer(activation):
    from ...transformer import TransformerDecoderLayer

    return TransformerDecoderLayer(
        d_model=8,
        n_heads=2,
        d_ff=16,
        dropout=0.0,
        activation=activation,
        norm_first=True,
    ).eval()


def noam_schedule(fn) -> CheckResult:
    """Check ``fn(step, d_model, warmup) -> float``, the learning rate of Vaswani et al.
    (2017), section 5.3: ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``, steps
    counted from 1. Reference: the formula in float64."""

    def ref(step, d, w):
        return d**-0.5 * min(step**-0.5, step * w**-1.5)

    warm = (
        "during the warm-up the rate grows linearly with the step: "
        "step * warmup^-1.5 (times d_model^-0.5), the smaller of the two terms"
    )
    specs = [
        ("step 1", (1, 1, 30), warm + "; steps are counted from 1, not 0"),
        ("during warm-up, D = 1", (10, 1, 30), warm),
        (
            "after warm-up, D = 1",
            (120, 1, 30),
            "after the warm-up the rate decays as step^-0.5: take min(step^-0.5, "
            "step * warmup^-1.5), not the max",
        ),
        (
            "D = 64",
            (30, 64, 30),
            "multiply by d_model^-0.5: a wider model gets a smaller rate",
        ),
        ("the paper's base model at its peak", (4000, 512, 4000), warm),
        ("step 100000", (100_000, 512, 4000), "the decay: d_model^-0.5 * step^-0.5"),
    ]
    cases = [Case(label, args, ref(*args), hint) for label, args, hint in specs]

    def compare(got, expected):
        try:
            value = float(got)
        except (TypeError, ValueError):
            return False
        return abs(value - expected) <= 1e-9 * expected

    return run_check(
        "noam_schedule", fn, cases, compare, forbid=FORBIDDEN["noam_schedule"]
    )
