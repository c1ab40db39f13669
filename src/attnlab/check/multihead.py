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
