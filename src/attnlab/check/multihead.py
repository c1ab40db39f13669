"""Checks for chapter 6 (multi-head attention).

* :func:`split_heads` — ``fn(x, n_heads) -> (B, H, T, Dh)``: head ``h`` gets the
  columns ``h*Dh .. (h+1)*Dh - 1`` of every position.
* :func:`multi_head_attention` — ``fn(x, W_q, W_k, W_v, W_o, n_heads, mask=None)``
  ``-> (out (B, T, D), weights (B, H, T, T))``: multi-head self-attention with
  matrices applied on the right (``q = x @ W_q``), no biases, boolean ``mask``
  ``True`` = may attend.
* :func:`fixed_slides_mha` — ``fn`` is a *class* ``cls(d_size, num_heads)`` with
  ``linear_q, linear_k, linear_v, linear_o`` (the slides' names) whose
  ``forward(queries, keys, values=None)`` is multi-head attention.

The expected answers come from :class:`attnlab.MultiHeadAttention`.
"""

from __future__ import annotations

import torch

from ._core import Case, run_check

__all__ = ["split_heads", "multi_head_attention", "fixed_slides_mha"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _reference_split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, Dh)


def _library_mha(D, H, W_q, W_k, W_v, W_o, b=None):
    """attnlab.MultiHeadAttention with the given (right-multiplied) matrices."""
    from ..multihead import MultiHeadAttention  # late import: no cycle with attnlab

    m = MultiHeadAttention(D, H, bias=b is not None).to(W_q.dtype)
    with torch.no_grad():
        for i, (lin, W) in enumerate(
            zip((m.w_q, m.w_k, m.w_v, m.w_o), (W_q, W_k, W_v, W_o))
        ):
            lin.weight.copy_(W.T)  # nn.Linear computes x @ weight.T
            if b is not None:
                lin.bias.copy_(b[i])
    return m


def split_heads(fn):
    """Check ``fn(x (B, T, D), n_heads) -> (B, H, T, Dh)``."""
    specs = [
        (
            "B=2, T=5, D=6, H=3",
            (2, 5, 6),
            3,
            "view as (B, T, H, Dh), then swap T and H",
        ),
        (
            "T == H: the shape alone cannot tell",
            (1, 3, 6),
            3,
            "x.view(B, H, T, Dh) has the right shape but mixes positions into heads; "
            "split the last dimension: view(B, T, H, Dh).transpose(1, 2)",
        ),
        ("length 1", (2, 1, 8), 4, "T = 1 still gives (B, H, 1, Dh)"),
        ("one head", (1, 4, 5), 1, "H = 1: just a new axis (B, 1, T, D)"),
        ("D heads of width 1", (1, 3, 4), 4, "Dh = 1 is allowed"),
    ]
    cases = []
    for i, (label, shape, H, hint) in enumerate(specs):
        x = torch.randn(*shape, generator=_gen(600 + i))
        cases.append(Case(label, (x, H), _reference_split(x, H), hint))
    return run_check("split_heads", fn, cases)


def multi_head_attention(fn):
    """Check ``fn(x, W_q, W_k, W_v, W_o, n_heads, mask=None) -> (out, weights)``."""
    specs = [
        (
            "B=2, T=4, D=6, H=2",
            (2, 4, 6, 2),
            None,
            1.0,
            "split, attend per head, concat, W_o",
        ),
        ("one head", (1, 3, 4, 1), None, 1.0, "H = 1 is ordinary self-attention"),
        ("length 1", (2, 1, 8, 4), None, 1.0, "a single token attends to itself"),
        (
            "√Dh, not √D",
            (1, 5, 16, 4),
            None,
            1.0,
            "each head scales its scores by 1/√Dh with Dh = D / H",
        ),
        ("causal mask", (2, 5, 6, 3), "causal", 1.0, "mask (T, T), True = may attend"),
        (
            "a query with no allowed key",
            (1, 4, 6, 2),
            "dead",
            1.0,
            "a fully masked row must give zero weights and a zero output, not NaN "
            "(attnlab.scaled_dot_product_attention does this)",
        ),
        ("large inputs: x × 100", (1, 4, 6, 3), None, 100.0, "use a stable softmax"),
    ]
    cases = []
    for i, (label, (B, T, D, H), mask_kind, mult, hint) in enumerate(specs):
        g = _gen(610 + i)
        x = torch.randn(B, T, D, generator=g, dtype=torch.float64) * mult
        Ws = [
            torch.randn(D, D, generator=g, dtype=torch.float64) / D**0.5 for _ in "qkvo"
        ]
        mask = None
        if mask_kind == "causal":
            mask = torch.ones(T, T, dtype=torch.bool).tril()
        elif mask_kind == "dead":
            mask = torch.ones(T, T, dtype=torch.bool)
            mask[1] = False  # query 1 may attend nothing
        m = _library_mha(D, H, *Ws)
        with torch.no_grad():
            expected = m(x, x, x, attn_mask=mask)
        cases.append(Case(label, (x, *Ws, H), expected, hint, kwargs={"mask": mask}))
    return run_check("multi_head_attention", fn, cases)


def _run_slides_class(cls, d, h, queries, keys, values, params):
    """Build the student's module, load ``params`` into its four layers, run it."""
    m = cls(d, h)
    with torch.no_grad():
        for name, W, b in zip(
            ("linear_q", "linear_k", "linear_v", "linear_o"), *params
        ):
            lin = getattr(m, name)
            if tuple(lin.weight.shape) != tuple(W.T.shape):
                raise ValueError(
                    f"{name}.weight has shape {tuple(lin.weight.shape)}, expected "
                    f"{tuple(W.T.shape)}: every projection maps d_size -> d_size"
                )
            lin.weight.copy_(W.T)
            lin.bias.copy_(b)
    m.eval()
    with torch.no_grad():
        return m(queries, keys, values)


def fixed_slides_mha(cls):
    """Check a fixed version of the slides' ``MultiHeadAttention`` class."""
    if isinstance(cls, type):

        def fn(*args):
            return _run_slides_class(cls, *args)

    else:
        fn = cls  # not a class: let run_check report it
    specs = [
        ("self-attention B=2, T=6, D=12, H=3", (2, 6, 6, 12, 3), False),
        ("T = 5 not divisible by H = 2", (2, 5, 5, 8, 2), False),
        ("cross-attention T=3, S=7", (1, 3, 7, 8, 4), True),
        ("one head", (1, 4, 4, 6, 1), False),
        ("length 1", (1, 1, 1, 8, 4), False),
    ]
    cases = []
    for i, (label, (B, T, S, D, H), cross) in enumerate(specs):
        g = _gen(630 + i)
        Ws = [torch.randn(D, D, generator=g) / D**0.5 for _ in "qkvo"]
        bs = [torch.randn(D, generator=g) * 0.1 for _ in "qkvo"]
        q = torch.randn(B, T, D, generator=g)
        kv = torch.randn(B, S, D, generator=g) if cross else q
        m = _library_mha(D, H, *Ws, b=bs)
        with torch.no_grad():
            expected = m(q, kv, kv)[0]
        hint = (
            "linear_q/k/v must map d_size -> d_size (all heads at once), and the "
            "output must keep the sequence length (B, T, d_size)"
        )
        cases.append(Case(label, (D, H, q, kv, kv, (Ws, bs)), expected, hint))
    return run_check("fixed_slides_mha", fn, cases)


# ------------------------------------------------------------------ chapter 6 (2)
__all__ += ["grouped_query_attention", "finds_head_bugs", "torch_mha_with_our_masks"]


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


def grouped_query_attention(fn) -> bool:
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
        g = _gen(40 + i)
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
            0: "with G = H every query head has its own key/value head",
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
    return run_check("grouped_query_attention", fn, cases)


class _NoTransposeSplit(torch.nn.Module):
    """A split written ``reshape(B, H, T, Dh)``: right shapes, scrambled heads."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        from ..multihead import MultiHeadAttention

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


def finds_head_bugs(fn) -> bool:
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

    return run_check("finds_head_bugs", fn, cases, compare)


def _reference_torch_like_ours(torch_mha, x, attn_mask=None, key_padding_mask=None):
    from ..multihead import MultiHeadAttention

    D, H = torch_mha.embed_dim, torch_mha.num_heads
    ours = MultiHeadAttention(D, H).to(x.dtype).load_torch(torch_mha)
    with torch.no_grad():
        return ours(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)[0]


def torch_mha_with_our_masks(fn) -> bool:
    """Check ``fn(torch_mha, x, attn_mask=None, key_padding_mask=None) -> (B, T, D)``.

    Masks in attnlab's convention (``True`` = may attend); the answer must equal
    :class:`attnlab.MultiHeadAttention` with ``torch_mha``'s weights, including a
    query with no key left (PyTorch returns NaN there when it also computes the
    weights; attnlab attends to nothing, so that row's output is ``out_proj.bias``).
    """
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).double().eval()
    g = _gen(60)
    x = torch.randn(2, 4, 8, generator=g, dtype=torch.float64)
    keep = torch.tensor([[True, True, True, False], [True, True, False, False]])
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    strict = torch.ones(4, 4, dtype=torch.bool).tril(-1)  # row 0 attends nothing
    specs = [
        ("no mask", {}, "no mask: call torch_mha(x, x, x, need_weights=False)[0]"),
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
            "flip both masks",
        ),
        (
            "row 0 may attend nothing",
            {"attn_mask": strict},
            "with need_weights=True PyTorch gives NaN for a query with no key; "
            "attnlab gives that query no attention, so its output is out_proj.bias",
        ),
    ]
    cases = [
        Case(label, (mha, x), _reference_torch_like_ours(mha, x, **kw), hint, kw)
        for label, kw, hint in specs
    ]
    return run_check("torch_mha_with_our_masks", fn, cases)
