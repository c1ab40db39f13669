"""Property-based tests (hypothesis) over the public API.

Inputs: shapes with 0 and 1, float16/bfloat16/float32/float64, integer and boolean
tensors, NaN and ±inf, boolean, float and causal masks. Each call must either match its
reference (PyTorch, the ``entmax`` package, brute force) within a tolerance set by the
dtype, or raise a ValueError/TypeError whose message names the function or argument:
never a silent NaN, never an IndexError/RuntimeError from inside torch.

Bounded for ``make check``: the "attnlab" profile runs few examples per property, with
no deadline (the machine is shared) and a fixed seed (the same examples every run).
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import attnlab
from attnlab import mappings as M
from attnlab.structured import enumerate_linear_chain, linear_chain_marginals

settings.register_profile(
    "attnlab",
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,  # nothing written into the repository
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile("attnlab")

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
NOT_FLOATS = [torch.int64, torch.int32, torch.uint8, torch.bool]


def tol(dtype: torch.dtype) -> float:
    """Absolute tolerance for weights in [0, 1] computed from inputs of this dtype."""
    return {
        torch.float16: 2e-3,
        torch.bfloat16: 1.6e-2,
        torch.float32: 2e-5,
        torch.float64: 1e-9,
    }[dtype]


# -------------------------------------------------------------------- strategies
finite = st.floats(-20, 20, allow_nan=False, width=32)
score = st.one_of(finite, finite, finite, st.just(float("-inf")))


@st.composite
def scores(draw, max_rows=3, max_n=6, dtypes=FLOATS, values=score):
    """(rows, n) scores, rows and n possibly 0 or 1, some entries -inf."""
    rows = draw(st.integers(0, max_rows))
    n = draw(st.integers(0, max_n))
    vals = draw(st.lists(values, min_size=rows * n, max_size=rows * n))
    dtype = draw(st.sampled_from(dtypes))
    return torch.tensor(vals, dtype=torch.float64).view(rows, n).to(dtype)


def _entmax():
    return pytest.importorskip("entmax")


def _reference(name: str, x64: torch.Tensor, alpha=None) -> torch.Tensor:
    """The reference weights of each row, in float64; dead rows (all -inf) are 0."""
    out = torch.zeros_like(x64)
    live = (x64 > float("-inf")).any(-1)
    if not bool(live.any()):
        return out
    xl = x64[live]
    if name == "softmax":
        ref = torch.softmax(xl, -1)
    elif name == "argmax":
        ref = F.one_hot(xl.argmax(-1), xl.shape[-1]).to(xl.dtype)
    else:
        em = _entmax()
        ref = {
            "sparsemax": lambda: em.sparsemax(xl, -1),
            "entmax15": lambda: em.entmax15(xl, -1),
            "entmax_bisect": lambda: em.entmax_bisect(xl, alpha, -1, n_iter=200),
            "normmax_bisect": lambda: em.normmax_bisect(xl, alpha, -1, n_iter=200),
        }[name]()
    out[live] = ref
    return out


MAPPING_CALLS = {
    "softmax": lambda x, a: M.softmax(x),
    "sparsemax": lambda x, a: M.sparsemax(x),
    "entmax15": lambda x, a: M.entmax15(x),
    "entmax_bisect": lambda x, a: M.entmax_bisect(x, a),
    "normmax_bisect": lambda x, a: M.normmax_bisect(x, a),
    "argmax": lambda x, a: M.argmax(x),
}
ALPHAS = {
    "entmax_bisect": [0.5, 1.0, 1.25, 1.5, 2.0, 3.0],
    "normmax_bisect": [1.5, 2.0, 5.0],
}


# ---------------------------------------------------------------------- mappings
@PROFILE
@given(x=scores(), name=st.sampled_from(list(MAPPING_CALLS)), data=st.data())
def test_mappings_match_their_reference(x, name, data):
    alpha = data.draw(st.sampled_from(ALPHAS.get(name, [None])))
    p = MAPPING_CALLS[name](x, alpha)
    assert p.shape == x.shape and p.dtype == x.dtype
    assert not torch.isnan(p).any()
    if x.numel() == 0:
        return
    x64 = x.double()
    if name == "entmax_bisect" and alpha == 1.0:
        ref = _reference("softmax", x64)
    else:
        ref = _reference(name, x64, alpha)
    if name == "argmax":  # ties in low precision: any maximiser is right
        top = x64.amax(-1, keepdim=True)
        assert ((p.double() == 0) | (x64 == top)).all()
        return
    t = tol(x.dtype)
    if name in ("entmax_bisect", "normmax_bisect") and x.dtype == torch.float32:
        t = 1e-4  # 32 halvings of the bracket
    torch.testing.assert_close(p.double(), ref, atol=t, rtol=0)


@PROFILE
@given(x=scores(values=finite), lam=st.floats(0, 3))
def test_fusedmax_on_the_simplex_and_sparsemax_at_zero(x, lam):
    p = M.fusedmax(x, lam)
    assert p.shape == x.shape and not torch.isnan(p).any()
    if x.numel():
        one = torch.ones(x.shape[0], dtype=torch.float64)
        torch.testing.assert_close(p.double().sum(-1), one, atol=tol(x.dtype), rtol=0)
        torch.testing.assert_close(M.fusedmax(x, 0.0), M.sparsemax(x))


@PROFILE
@given(
    x=scores(max_rows=2, max_n=4, dtypes=[torch.float32, torch.float64]),
    bad=st.sampled_from([float("nan"), float("inf")]),
    name=st.sampled_from(["sigmoid", "fusedmax", *MAPPING_CALLS]),
    data=st.data(),
)
@pytest.mark.usefixtures("debug_mode")  # the value scans are on
def test_mappings_refuse_nan_and_plus_inf(x, bad, name, data):
    if x.numel() == 0:
        x = torch.zeros(1, 1, dtype=x.dtype)
    i = data.draw(st.integers(0, x.numel() - 1))
    x = x.flatten().clone()
    x[i] = bad
    x = x.view(-1, 1) if x.dim() == 1 else x
    fn = {"sigmoid": M.sigmoid, "fusedmax": M.fusedmax}.get(name)
    call = fn or (
        lambda t: MAPPING_CALLS[name](
            t, data.draw(st.sampled_from(ALPHAS.get(name, [None])))
        )
    )
    with pytest.raises(ValueError, match=f"{name}: x contains NaN or \\+inf"):
        call(x)


@PROFILE
@given(
    dtype=st.sampled_from(NOT_FLOATS),
    n=st.integers(0, 4),
    name=st.sampled_from(["sigmoid", "fusedmax", *MAPPING_CALLS]),
)
def test_mappings_refuse_integer_and_bool_scores(dtype, n, name):
    x = torch.zeros(2, n, dtype=dtype)
    fn = {"sigmoid": M.sigmoid, "fusedmax": M.fusedmax}.get(name)
    call = fn or (lambda t: MAPPING_CALLS[name](t, ALPHAS.get(name, [None])[-1]))
    with pytest.raises(TypeError, match=f"{name}: x must be a floating-point tensor"):
        call(x)


# --------------------------------------------------------------------- attention
@st.composite
def attention_inputs(draw, dtypes=(torch.float32, torch.float64)):
    B = draw(st.integers(0, 2))
    T = draw(st.integers(0, 3))
    S = draw(st.integers(0, 4))
    D = draw(st.sampled_from([1, 4]))
    dtype = draw(st.sampled_from(dtypes))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    q, k, v = (
        torch.randn(B, n, D, generator=g, dtype=torch.float64) for n in (T, S, S)
    )
    kind = draw(st.sampled_from(["none", "bool", "float", "causal", "bool1d"]))
    mask, causal = None, False
    if kind == "bool":
        mask = torch.rand(B, T, S, generator=g) > draw(
            st.sampled_from([0.0, 0.3, 0.7, 1.0])
        )
    elif kind == "bool1d":
        mask = torch.rand(S, generator=g) > 0.3
    elif kind == "float":
        mask = torch.randn(T, S, generator=g, dtype=torch.float64)
        mask[torch.rand(T, S, generator=g) > 0.6] = float("-inf")
    elif kind == "causal":
        causal = T > 0 and S > 0
    return q.to(dtype), k.to(dtype), v.to(dtype), mask, causal


def _torch_sdpa64(q, k, v, mask, causal):
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    if mask is not None and mask.dim() == 1:
        mask = mask[None]  # torch's own function wants (T, S)
    if causal:
        mask, causal = (
            torch.ones(q.shape[1], k.shape[1], dtype=torch.bool).tril(),
            False,
        )
    if 0 in q.shape or 0 in k.shape[:-1]:  # no query, no key or no batch
        return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=torch.float64)
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), mask)


@PROFILE
@given(inp=attention_inputs())
def test_sdpa_matches_torch(inp):
    q, k, v, mask, causal = inp
    out, w = attnlab.scaled_dot_product_attention(q, k, v, mask, is_causal=causal)
    assert out.shape == (*q.shape[:-1], v.shape[-1]) and w.shape == (
        *q.shape[:-1],
        k.shape[1],
    )
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    ref = _torch_sdpa64(q, k, v, mask, causal)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.usefixtures("debug_mode")  # the value scans are on
@PROFILE
@given(inp=attention_inputs(), data=st.data())
def test_attention_refuses_non_finite_and_integer_tensors(inp, data):
    q, k, v, _, _ = inp
    t = {"q": q, "k": k, "v": v}
    which = data.draw(st.sampled_from("qkv"))
    if data.draw(st.booleans()):
        t[which] = t[which].to(data.draw(st.sampled_from([torch.int64, torch.bool])))
        with pytest.raises(TypeError, match=f"scaled_dot_product_attention: {which}"):
            attnlab.scaled_dot_product_attention(t["q"], t["k"], t["v"])
        return
    if t[which].numel() == 0:
        return
    bad = t[which].clone().flatten()
    bad[data.draw(st.integers(0, bad.numel() - 1))] = data.draw(
        st.sampled_from([float("nan"), float("inf"), -float("inf")])
    )
    t[which] = bad.view(t[which].shape)
    with pytest.raises(
        ValueError, match=f"scaled_dot_product_attention: {which} contains"
    ):
        attnlab.scaled_dot_product_attention(t["q"], t["k"], t["v"])


@PROFILE
@given(
    B=st.integers(0, 2),
    T=st.integers(1, 3),
    S=st.integers(1, 4),
    H=st.sampled_from([1, 2]),
    kind=st.sampled_from(["none", "float", "bool_pad", "bool_attn", "causal"]),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    seed=st.integers(0, 2**16),
)
def test_multihead_matches_torch(B, T, S, H, kind, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    D = 4
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(D, H, batch_first=True).to(dtype).eval()
    mine = attnlab.MultiHeadAttention(D, H).to(dtype).load_torch(ref).eval()
    q = torch.randn(B, T, D, generator=g).to(dtype)
    kv = torch.randn(B, S, D, generator=g).to(dtype)
    ours, theirs = {}, {}
    if kind == "float":  # the same additive masks in both libraries
        am = torch.randn(T, S, generator=g).to(dtype)
        ours["attn_mask"] = theirs["attn_mask"] = am
    elif kind == "bool_pad":  # ours: True = real token; torch: True = pad
        keep = torch.rand(B, S, generator=g) > 0.4
        keep[:, 0] = True  # every sequence keeps a key (torch gives NaN otherwise)
        ours["key_padding_mask"], theirs["key_padding_mask"] = keep, ~keep
    elif kind == "bool_attn":
        keep = torch.rand(T, S, generator=g) > 0.4
        keep[:, 0] = True
        ours["attn_mask"], theirs["attn_mask"] = keep, ~keep
    elif kind == "causal":
        keep = attnlab.causal_mask(T, S)
        ours["is_causal"] = True
        theirs["attn_mask"] = ~keep
    with warnings.catch_warnings():
        warnings.simplefilter("error", attnlab.MaskConventionWarning)  # all legitimate
        out_m, w_m = mine(q, kv, kv, **ours)
    out_t, w_t = ref(q, kv, kv, **theirs)
    atol = 1e-5 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(out_m, out_t, atol=atol, rtol=1e-4)
    torch.testing.assert_close(w_m, w_t, atol=atol, rtol=1e-4)


@PROFILE
@given(
    B=st.integers(1, 3),
    S=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_padding_masks_warn_exactly_when_a_sequence_has_no_key(B, S, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, S + 1, (B,), generator=g)
    ours = attnlab.padding_mask(lengths, S)  # (B, S)
    left = ours.flip(-1)  # left padding, our convention too
    mha = attnlab.MultiHeadAttention(4, 2).eval()
    x = torch.randn(B, S, 4, generator=g)
    for mask in (ours, left, ~ours):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            out, _ = mha(x, x, x, key_padding_mask=mask)
        warned = any(issubclass(w.category, attnlab.MaskConventionWarning) for w in got)
        assert warned == bool((~mask.any(-1)).any())
        assert not torch.isnan(out).any()


# ------------------------------------------------------------------------ CRF
@PROFILE
@given(
    B=st.integers(0, 2),
    n=st.integers(1, 4),
    C=st.integers(1, 3),
    dtype=st.sampled_from(FLOATS),
    seed=st.integers(0, 2**16),
    holes=st.booleans(),
)
def test_crf_marginals_match_brute_force_or_raise(B, n, C, dtype, seed, holes):
    g = torch.Generator().manual_seed(seed)
    unary = (2 * torch.randn(B, n, C, generator=g)).to(dtype)
    transition = torch.randn(C, C, generator=g).to(dtype)
    if holes:
        unary[torch.rand(B, n, C, generator=g) > 0.7] = float("-inf")
        transition[torch.rand(C, C, generator=g) > 0.7] = float("-inf")
    u64, t64 = unary.double(), transition.double()
    logz = torch.logsumexp(_scores(u64, t64), -1)  # (B,)
    feasible = bool(torch.isfinite(logz).all())
    if not feasible:
        with pytest.raises(ValueError, match="no labelling has a finite score"):
            linear_chain_marginals(unary, transition)
        return
    marg = linear_chain_marginals(unary, transition)
    assert marg.dtype == dtype and not torch.isnan(marg).any()
    if B:
        configs, logp = enumerate_linear_chain(u64, t64)
        onehot = F.one_hot(configs, C).double()  # (K, n, C)
        ref = torch.einsum("bk,knc->bnc", logp.exp(), onehot)
        torch.testing.assert_close(marg.double(), ref, atol=tol(dtype), rtol=0)


def _scores(u64, t64):
    """Unnormalised log-scores (B, K) of every labelling, by brute force."""
    B, n, C = u64.shape
    configs = torch.tensor(list(itertools.product(range(C), repeat=n)))  # (K, n)
    s = u64[:, torch.arange(n), configs].sum(-1)  # (B, K)
    if n > 1:
        s = s + t64[configs[:, :-1], configs[:, 1:]].sum(-1)
    return s


# ---------------------------------------------------------------- masks, positions
@PROFILE
@given(
    T=st.integers(-1, 4), S=st.one_of(st.none(), st.integers(-1, 4), st.floats(0, 3))
)
def test_causal_mask_or_a_clear_error(T, S):
    try:
        m = attnlab.causal_mask(T, S)
    except (ValueError, TypeError) as e:
        assert "causal_mask" in str(e)
        return
    S_ = T if S is None else S
    assert torch.equal(m, torch.ones(T, S_, dtype=torch.bool).tril())


@PROFILE
@given(
    lengths=st.lists(st.one_of(st.integers(-1, 5), st.floats(0, 5)), max_size=4),
    S=st.one_of(st.none(), st.integers(0, 6)),
)
def test_padding_mask_or_a_clear_error(lengths, S):
    try:
        m = attnlab.padding_mask(lengths, S)
    except (ValueError, TypeError) as e:
        assert "length" in str(e) or "S" in str(e)
        return
    want = max(lengths, default=0) if S is None else S
    assert m.shape == (len(lengths), want)
    for row, n in zip(m, lengths, strict=True):
        assert int(row.sum()) == n and bool(row[:n].all())


@PROFILE
@given(offset=st.one_of(st.integers(-3, 6), st.floats(-1, 3)), T=st.integers(0, 4))
def test_positional_offset_or_a_clear_error(offset, T):
    enc = attnlab.SinusoidalPositionalEncoding(6, max_len=8)
    x = torch.zeros(1, T, 6)
    try:
        got = enc(x, offset=offset)
    except (ValueError, TypeError) as e:
        assert "offset" in str(e)
        return
    table = attnlab.sinusoidal_encoding(offset + T + 1, 6)
    torch.testing.assert_close(got[0], table[offset : offset + T])
