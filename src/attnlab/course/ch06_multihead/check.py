"""Checks for chapter 6 (multi-head attention).

* :func:`grouped_query_attention` — grouped-query attention of ``(B, H, T, Dh)`` queries
  with ``G`` key/value groups.
* :func:`finds_head_bugs` — a test that tells a correct head split/concat from two
  buggy ones.
* :func:`torch_mha_with_our_masks` — ``torch.nn.MultiheadAttention`` called with
  attnlab's masks (``True`` = may attend).
"""

from __future__ import annotations

import warnings

import torch

from ..check_core import Case, CheckResult, run_check, seeded

__all__ = [
    "grouped_query_attention",
    "finds_head_bugs",
    "torch_mha_with_our_masks",
]

# (not in __all__: every check module has one.)
# check -> the library functions and classes its exercise asks the student to do
# without (shared with the grader): PyTorch's own grouped-query path, a reference layer
# in a test meant to need none, and attnlab's layer that the adapter must reproduce.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "grouped_query_attention": ("torch.nn.functional.scaled_dot_product_attention",),
    "finds_head_bugs": ("torch.nn.MultiheadAttention",),
    "torch_mha_with_our_masks": ("attnlab.multihead.MultiHeadAttention",),
}


def _reference_gqa(q, k, v, attn_mask=None):
    """Plain loops: head h reads key/value group h // (H // G)."""
    B, H, T, Dh = q.shape
    G = k.shape[1]
    outs, weights = [], []
    for h in range(H):
        g = h // (H // G)
        s = q[:, h] @ k[:, g].transpose(-2, -1) / Dh**0.5  # (B, T, S)
        if attn_mask is not None:
            m = torch.broadcast_to(attn_mask, (B, H, T, s.shape[-1]))[:, h]
            s = s.masked_fill(~m, float("-inf"))
        p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)  # empty rows -> 0
        outs.append(p @ v[:, g])
        weights.append(p)
    return torch.stack(outs, 1), torch.stack(weights, 1)


def grouped_query_attention(fn) -> CheckResult:
    """Check ``fn(q (B,H,T,Dh), k (B,G,S,Dh), v (B,G,S,Dh), attn_mask=None)``.

    Returns ``(out (B, H, T, Dh), weights (B, H, T, S))``; query head ``h`` uses key
    and value head ``h // (H // G)``; boolean ``attn_mask`` broadcastable to
    ``(B, H, T, S)``, ``True`` = may attend; a query with no key gets zeros.
    """
    cases = []
    specs = [
        ("H = G = 4 (ordinary multi-head)", 4, 4, 3, 3, None),
        ("H = 4, G = 1 (multi-query)", 4, 1, 3, 5, None),
        ("H = 6, G = 2, T != S", 6, 2, 2, 4, None),
        ("H = 4, G = 2, causal mask", 4, 2, 4, 4, "causal"),
        ("H = 4, G = 2, a query with no key", 4, 2, 3, 3, "empty"),
    ]
    for i, (label, H, G, T, S, mask_kind) in enumerate(specs):
        g = seeded(40 + i)
        q = torch.randn(2, H, T, 4, generator=g, dtype=torch.float64)
        k = torch.randn(2, G, S, 4, generator=g, dtype=torch.float64)
        v = torch.randn(2, G, S, 4, generator=g, dtype=torch.float64)
        mask = None
        if mask_kind == "causal":
            mask = torch.ones(T, S, dtype=torch.bool).tril()
        elif mask_kind == "empty":
            mask = torch.ones(2, 1, T, S, dtype=torch.bool)
            mask[0, 0, 1] = False  # query 1 of sequence 0 may attend nothing
        hint = {
            0: "with G = H every query head has its own key/value head; scores "
            "q @ kᵀ / √Dh of shape (B, H, T, S), softmax over the keys (dim=-1)",
            1: "query head h reads key/value head h // (H // G) — with G = 1 all "
            "heads share one (repeat_interleave k and v along dim 1)",
            2: "repeat k and v H // G times along the head axis "
            "(repeat_interleave, not repeat: heads 0..2 share group 0)",
            3: "apply the boolean mask (True = may attend) before the softmax",
            4: "a query that may attend nothing gets zero weights and a zero "
            "output, not NaN",
        }[i]
        kwargs = {} if mask is None else {"attn_mask": mask}
        cases.append(
            Case(label, (q, k, v), _reference_gqa(q, k, v, mask), hint, kwargs)
        )
    return run_check(
        "grouped_query_attention",
        fn,
        cases,
        forbid=FORBIDDEN["grouped_query_attention"],
    )


class _NoTransposeSplit(torch.nn.Module):
    """A split written ``reshape(B, H, T, Dh)``: right shapes, scrambled heads."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        from ...multihead import MultiHeadAttention

        self.inner = MultiHeadAttention(d_model, n_heads)

    def forward(self, query, key, value):
        m, (B, T, D), H = self.inner, query.shape, self.inner.n_heads
        S = key.shape[1]
        q = m.w_q(query).reshape(B, H, T, D // H)
        k = m.w_k(key).reshape(B, H, S, D // H)
        v = m.w_v(value).reshape(B, H, S, D // H)
        p = torch.softmax(q @ k.transpose(-2, -1) / (D // H) ** 0.5, dim=-1)
        return m.w_o((p @ v).reshape(B, T, D))


class _NoTransposeConcat(_NoTransposeSplit):
    """A correct split, but the heads concatenated without the transpose back."""

    def forward(self, query, key, value):
        m, (B, T, D), H = self.inner, query.shape, self.inner.n_heads
        S = key.shape[1]
        q = m.w_q(query).view(B, T, H, D // H).transpose(1, 2)
        k = m.w_k(key).view(B, S, H, D // H).transpose(1, 2)
        v = m.w_v(value).view(B, S, H, D // H).transpose(1, 2)
        p = torch.softmax(q @ k.transpose(-2, -1) / (D // H) ** 0.5, dim=-1)
        return m.w_o((p @ v).reshape(B, T, D))  # (B, H, T, Dh) read as (B, T, D)


class _Correct(_NoTransposeSplit):
    def forward(self, query, key, value):
        return self.inner(query, key, value)[0]


def finds_head_bugs(fn) -> CheckResult:
    """Check ``fn(make_layer) -> bool``: a property test with no reference to copy.

    ``make_layer(d_model, n_heads)`` builds a layer with ``forward(query, key, value)
    -> (B, T, D)``. ``fn`` returns True when the layer passes the student's test
    (looks correct) and False when it finds a bug. It must pass a correct layer and
    catch two bugs whose shapes are all right.
    """
    cases = [
        Case(
            "a correct layer",
            (_Correct,),
            True,
            "your test must not fail a correct multi-head layer: compare outputs "
            "with a tolerance (torch.allclose(..., atol=1e-5))",
        ),
        Case(
            "split without the transpose",
            (_NoTransposeSplit,),
            False,
            "a property every correct layer has: permute the positions of the input "
            "and the output is permuted the same way",
        ),
        Case(
            "concatenation without the transpose",
            (_NoTransposeConcat,),
            False,
            "test with T != H and several positions; permuting the input must "
            "permute the output",
        ),
    ]

    def compare(got, expected):
        return isinstance(got, (bool, torch.Tensor)) and bool(got) == expected

    return run_check(
        "finds_head_bugs", fn, cases, compare, forbid=FORBIDDEN["finds_head_bugs"]
    )


def _reference_torch_like_ours(torch_mha, x, attn_mask=None, key_padding_mask=None):
    from ...masking import derived_masks
    from ...multihead import MultiHeadAttention

    D, H = torch_mha.embed_dim, torch_mha.num_heads
    ours = MultiHeadAttention(D, H).to(x.dtype).load_torch(torch_mha)
    # The case with a query that may attend nothing is deliberate: no warning for it.
    with torch.no_grad(), derived_masks():
        return ours(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)[0]


def torch_mha_with_our_masks(fn) -> CheckResult:
    """Check ``fn(torch_mha, x, attn_mask=None, key_padding_mask=None) -> (B, T, D)``.

    Masks in attnlab's convention: ``key_padding_mask`` boolean (``True`` on real
    tokens), ``attn_mask`` boolean (``True`` = may attend) or float (added to the
    scores). The answer must equal :class:`attnlab.MultiHeadAttention` with
    ``torch_mha``'s weights, including a query with no key left (PyTorch returns NaN
    there when it also computes the weights; attnlab attends to nothing, so that row's
    output is ``out_proj.bias``), and PyTorch must not warn about the masks: the
    check turns such a warning (a float ``attn_mask`` beside a boolean
    ``key_padding_mask`` is deprecated) into an error.
    """
    with torch.random.fork_rng():  # fixed weights, the caller's RNG left alone
        torch.manual_seed(0)
        mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).double().eval()
        with torch.no_grad():  # PyTorch starts both biases at 0; an answer that
            torch.nn.init.normal_(mha.in_proj_bias)  # returns 0 for the empty query
            torch.nn.init.normal_(mha.out_proj.bias)  # must not pass by luck
    g = seeded(60)
    x = torch.randn(2, 4, 8, generator=g, dtype=torch.float64)
    keep = torch.tensor([[True, True, True, False], [True, True, False, False]])
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    strict = torch.ones(4, 4, dtype=torch.bool).tril(-1)  # row 0 attends nothing
    bias = torch.randn(4, 4, generator=g, dtype=torch.float64)  # an additive mask:
    bias = bias.masked_fill(~causal, float("-inf"))  # finite scores and -inf blocks
    specs = [
        (
            "no mask",
            {},
            "no mask: self-attention is torch_mha(x, x, x)[0]: query, key and value "
            "are all x",
        ),
        (
            "padding (True = real token)",
            {"key_padding_mask": keep},
            "PyTorch's key_padding_mask means True = IGNORE: pass ~key_padding_mask",
        ),
        (
            "causal attn_mask (True = may attend)",
            {"attn_mask": causal},
            "PyTorch's boolean attn_mask means True = BLOCKED: pass ~attn_mask",
        ),
        (
            "causal + padding",
            {"attn_mask": causal, "key_padding_mask": keep},
            "both masks at once: flip each of them (~attn_mask, ~key_padding_mask)",
        ),
        (
            "row 0 may attend nothing",
            {"attn_mask": strict},
            "row 0 of every sequence may attend nothing: attnlab gives it zero "
            "weights, so its output is out_proj.bias (not 0: the bias is not zero "
            "here); PyTorch returns NaN there on some paths and 0 before out_proj on "
            "others",
        ),
        (
            "float attn_mask (added to the scores)",
            {"attn_mask": bias},
            "a float mask is added to the scores in both libraries: pass it to "
            "PyTorch unchanged (~ is only for boolean masks)",
        ),
        (
            "float attn_mask + boolean padding",
            {"attn_mask": bias, "key_padding_mask": keep},
            "PyTorch warns when a float attn_mask meets a boolean key_padding_mask "
            "(deprecated): give it masks of one type, e.g. the padding mask as a "
            "float one, 0 on real tokens and -inf on the padding",
        ),
    ]
    with torch.random.fork_rng():  # building the reference layer draws weights
        cases = [
            Case(label, (mha, x), _reference_torch_like_ours(mha, x, **kw), hint, kw)
            for label, kw, hint in specs
        ]
    with warnings.catch_warnings():  # a warning about the masks fails the case
        warnings.filterwarnings("error", message=r".*mask")
        return run_check(
            "torch_mha_with_our_masks",
            fn,
            cases,
            forbid=FORBIDDEN["torch_mha_with_our_masks"],
        )
