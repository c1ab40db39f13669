"""Regression tests for the bad-input probe (reviews, 2026-11-25): one test per case.

Each test is named after what it checks; the probe's case number is in the comment
above it. A case either gives the result
PyTorch (or the entmax package, or brute force) gives, or a ValueError/TypeError whose
message names the argument that was wrong; never a silent NaN, never an error from deep
inside torch.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlab
from attnlab import mappings as M
from attnlab.structured import linear_chain_marginals, segmentation_marginals

MAPPINGS = {
    "softmax": M.softmax,
    "sparsemax": M.sparsemax,
    "sparsemax-iter": lambda x: M.sparsemax(x, method="iter"),
    "sparsemax-sort": lambda x: M.sparsemax(x, method="sort"),
    "entmax15": M.entmax15,
    "entmax15-iter": lambda x: M.entmax15(x, method="iter"),
    "entmax15-sort": lambda x: M.entmax15(x, method="sort"),
    "entmax_bisect": M.entmax_bisect,
    "entmax_bisect-0.5": lambda x: M.entmax_bisect(x, 0.5),
    "normmax_bisect": M.normmax_bisect,
    "fusedmax": M.fusedmax,
    "argmax": M.argmax,
    "sigmoid": M.sigmoid,
}


@pytest.fixture
def quiet():
    """Turn every warning into an error inside the test (a silent case stays silent)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ------------------------------------------------------------------ mappings (1-40)
# probe cases 1, 2
@pytest.mark.parametrize("shape", [(2, 0), (0, 5), (0, 0), (3, 0, 4)])
@pytest.mark.parametrize("name", list(MAPPINGS))
def test_mappings_on_empty_inputs_give_empty_outputs(name, shape):
    x = torch.empty(shape)
    out = MAPPINGS[name](x)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert torch.softmax(x, -1).shape == out.shape  # what torch gives


# probe case 2
def test_sdpa_sparsemax_on_an_empty_batch():
    q, k, v = torch.randn(0, 2, 4, 6), torch.randn(0, 2, 5, 6), torch.randn(0, 2, 5, 6)
    out, w = attnlab.scaled_dot_product_attention(q, k, v, mapping=attnlab.sparsemax)
    assert out.shape == (0, 2, 4, 6) and w.shape == (0, 2, 4, 5)


# probe case 9
def test_entmax_bisect_alpha_inf_raises():
    with pytest.raises(ValueError, match="alpha.*argmax"):
        attnlab.entmax_bisect(torch.randn(1, 4), alpha=float("inf"))
    with pytest.raises(ValueError, match="alpha"):
        attnlab.entmax_bisect(torch.randn(1, 4), alpha=torch.tensor([float("inf")]))


# probe case 12
def test_entmax_bisect_alpha_none_names_alpha():
    with pytest.raises(TypeError, match="entmax_bisect: alpha"):
        attnlab.entmax_bisect(torch.randn(1, 4), None)
    with pytest.raises(TypeError, match="entmax_bisect: alpha"):
        attnlab.entmax_bisect(torch.randn(1, 4), "2")


# probe case 13
@pytest.mark.parametrize("n_iter", [0, -3])
def test_entmax_bisect_n_iter_below_one_raises(n_iter):
    with pytest.raises(ValueError, match="n_iter"):
        attnlab.entmax_bisect(torch.randn(1, 4), 1.5, n_iter=n_iter)
    with pytest.raises(TypeError, match="n_iter"):
        attnlab.entmax_bisect(torch.randn(1, 4), 1.5, n_iter=2.5)


# probe cases 19, 22
@pytest.mark.usefixtures("debug_mode")  # the value scans are on
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("name", ["softmax", "argmax", "sigmoid", "fusedmax"])
def test_mappings_refuse_nan_and_plus_inf_under_debug(name, bad):
    x = torch.tensor([[1.0, bad, 0.0]])
    with pytest.raises(ValueError, match=f"{name}: x contains NaN or \\+inf"):
        MAPPINGS[name](x)


# probe case 19
@pytest.mark.usefixtures("debug_mode")  # the value scans are on
def test_softmax_nan_deep_in_a_batch_raises_under_debug():
    x = torch.randn(4, 3, 7)
    x[2, 1, 5] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        attnlab.softmax(x, dim=1)


# probe case 31
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
@pytest.mark.parametrize("name", list(MAPPINGS))
def test_mappings_refuse_integer_or_bool_scores(name, dtype):
    x = torch.arange(4).to(dtype)
    with pytest.raises(TypeError, match="floating-point"):
        MAPPINGS[name](x)


# probe case 40
def test_fusedmax_lam_inf_names_lam():
    with pytest.raises(ValueError, match="fusedmax: lam must be finite"):
        attnlab.fusedmax(torch.randn(1, 3), lam=float("inf"))
    with pytest.raises(TypeError, match="lam"):
        attnlab.fusedmax(torch.randn(1, 3), lam="1")


# ------------------------------------------------------------------ attention (49-84)
# probe case 49
def test_sdpa_with_no_keys_returns_what_torch_returns():
    q, k, v = torch.randn(2, 3, 4, 6), torch.randn(2, 3, 0, 6), torch.randn(2, 3, 0, 5)
    out, w = attnlab.scaled_dot_product_attention(q, k, v)
    ref = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == ref.shape == (2, 3, 4, 5) and w.shape == (2, 3, 4, 0)
    torch.testing.assert_close(out, ref)
    out_c, _ = attnlab.scaled_dot_product_attention(q, k, v, is_causal=False)
    torch.testing.assert_close(out_c, ref)


# probe case 50
def test_attend_with_no_keys_gives_zeros():
    q, k, v = torch.randn(2, 4, 6), torch.randn(2, 0, 6), torch.randn(2, 0, 5)
    out, w = attnlab.attend(q, k, v)
    assert w.shape == (2, 4, 0)
    torch.testing.assert_close(out, torch.zeros(2, 4, 5))


# probe case 55
def test_sdpa_batch_mismatch_names_q_and_k():
    q, kv = torch.randn(2, 4, 6), torch.randn(3, 5, 6)
    with pytest.raises(ValueError, match="leading .* of q .* and k"):
        attnlab.scaled_dot_product_attention(q, kv, kv)
    with pytest.raises(ValueError, match="attend: the leading"):
        attnlab.attend(q, kv, kv)


# probe case 59
def test_sdpa_on_integer_tensors_names_the_tensor():
    q = torch.randint(0, 3, (2, 4, 6))
    with pytest.raises(TypeError, match="scaled_dot_product_attention: q must be"):
        attnlab.scaled_dot_product_attention(q, q, q)
    with pytest.raises(TypeError, match="attend: q must be"):
        attnlab.attend(q, q, q)


# probe case 72
def test_a_finite_stand_in_on_a_whole_row_gives_the_unmasked_weights():
    doc = attnlab.fully_masked_rows.__doc__
    assert "uniformly" not in doc and "unmasked" in doc
    scores = torch.randn(1, 5, dtype=torch.float64)
    masked = attnlab.softmax(scores + torch.full((1, 5), -1e4, dtype=torch.float64))
    torch.testing.assert_close(masked, attnlab.softmax(scores))


# probe case 80
@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -float("inf")])
def test_sdpa_non_finite_scale_raises(scale):
    q = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match="scale must be finite"):
        attnlab.scaled_dot_product_attention(q, q, q, scale=scale)


# probe case 81
def test_sdpa_string_scale_names_scale():
    q = torch.randn(1, 3, 4)
    with pytest.raises(TypeError, match="scale must be a real number"):
        attnlab.scaled_dot_product_attention(q, q, q, scale="0.5")
    with pytest.raises(TypeError, match="dropout_p"):
        attnlab.scaled_dot_product_attention(q, q, q, dropout_p="0.1")


# probe case 84
@pytest.mark.usefixtures("debug_mode")  # the value scans are on
@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_in_q_k_v_names_the_tensor(where, bad):
    t = {n: torch.randn(1, 3, 4) for n in "qkv"}
    t[where][0, 1, 2] = bad
    with pytest.raises(ValueError, match=f"scaled_dot_product_attention: {where} "):
        attnlab.scaled_dot_product_attention(t["q"], t["k"], t["v"])
    with pytest.raises(ValueError, match=f"attend: {where} "):
        attnlab.attend(t["q"], t["k"], t["v"])


# probe case 222
def test_fully_masked_row_is_zero_as_in_torch_sdpa():
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 5, 4), torch.randn(1, 5, 2)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    ours, _ = attnlab.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, mask))
    doc = attnlab.scaled_dot_product_attention.__doc__
    assert "(PyTorch gives NaN)" not in doc and "nn.MultiheadAttention" in doc


# ------------------------------------------------------------ MultiHeadAttention (90-114)
def _pair(D=8, H=2, seed=0):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(D, H, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    return ref, attnlab.MultiHeadAttention(D, H).load_torch(ref).eval()


# probe case 90
def test_mha_float_sizes_raise_type_error():
    with pytest.raises(TypeError, match="d_model must be an int"):
        attnlab.MultiHeadAttention(8.0, 2)
    with pytest.raises(TypeError, match="n_heads must be an int"):
        attnlab.MultiHeadAttention(8, 2.0)


# probe case 91
@pytest.mark.parametrize("kw", [{"kdim": 0}, {"kdim": -3}, {"vdim": 0}])
def test_mha_kdim_vdim_below_one_raise(kw):
    with pytest.raises(ValueError, match=f"{next(iter(kw))} must be >= 1"):
        attnlab.MultiHeadAttention(8, 2, **kw)
    with pytest.raises(TypeError, match="kdim"):
        attnlab.MultiHeadAttention(8, 2, kdim=3.0)


# probe case 100
def test_float_key_padding_mask_0_1_is_refused():
    _, mine = _pair()
    x = torch.randn(2, 5, 8)
    kpm = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]])  # 1 = real, 0 = pad
    with pytest.raises(
        ValueError, match="key_padding_mask is a float mask of 0s and 1s"
    ):
        mine(x, x, x, key_padding_mask=kpm)
    with pytest.raises(ValueError, match="attn_mask is a float mask of 0s and 1s"):
        mine(x, x, x, attn_mask=torch.ones(5, 5).triu(1))


# probe case 100
def test_float_key_padding_mask_is_added_as_in_torch():
    ref, mine = _pair()
    x = torch.randn(2, 5, 8)
    bool_kpm = torch.tensor([[True, True, True, False, False], [True] * 5])
    additive = torch.zeros(2, 5).masked_fill(~bool_kpm, float("-inf"))
    out_b, w_b = mine(x, x, x, key_padding_mask=bool_kpm)
    out_f, w_f = mine(x, x, x, key_padding_mask=additive)
    torch.testing.assert_close(out_f, out_b)
    torch.testing.assert_close(w_f, w_b)
    bias = torch.randn(2, 5)  # any additive float mask: the same sum as PyTorch's
    out_t, w_t = ref(x, x, x, key_padding_mask=bias)
    out_m, w_m = mine(x, x, x, key_padding_mask=bias)
    torch.testing.assert_close(out_m, out_t)
    torch.testing.assert_close(w_m, w_t)


# probe case 103
def test_mask_as_a_list_names_the_argument():
    _, mine = _pair()
    x = torch.randn(2, 5, 8)
    with pytest.raises(TypeError, match="key_padding_mask must be a torch.Tensor"):
        mine(x, x, x, key_padding_mask=[[True] * 5] * 2)
    with pytest.raises(TypeError, match="attn_mask must be a torch.Tensor"):
        mine(x, x, x, attn_mask=[[True] * 5] * 5)
    with pytest.raises(TypeError, match="key_padding_mask must be bool"):
        mine(x, x, x, key_padding_mask=torch.ones(2, 5, dtype=torch.long))


# probe case 105
def test_pytorch_style_padding_mask_with_an_unpadded_sequence_warns():
    _, mine = _pair()
    x = torch.randn(2, 5, 8)
    torch_style = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with pytest.warns(attnlab.MaskConventionWarning, match=r"sequence\(s\) \[0\]"):
        mine(x, x, x, key_padding_mask=torch_style)


# probe case 105
def test_left_padded_batch_in_our_convention_is_silent(quiet):
    _, mine = _pair()
    x = torch.randn(3, 5, 8)
    left = torch.tensor(
        [[False, False, True, True, True], [True] * 5, [False] * 4 + [True]]
    )
    out, _ = mine(x, x, x, key_padding_mask=left)
    assert out.isfinite().all()
    mine(x, x, x, attn_mask=attnlab.causal_mask(5))  # a real causal mask too


# probe case 105
def test_mha_with_an_empty_source_is_silent(quiet):
    _, mine = _pair()
    q, kv = torch.randn(2, 4, 8), torch.randn(2, 0, 8)
    out, w = mine(q, kv, kv, key_padding_mask=torch.ones(2, 0, dtype=torch.bool))
    assert out.shape == (2, 4, 8) and w.shape == (2, 4, 0)


# probe case 108
def test_mha_accepts_pytorch_3d_attn_mask_layout():
    ref, mine = _pair()
    x = torch.randn(2, 4, 8)
    m = torch.randn(2 * 2, 4, 4)  # (B*H, T, S), float: the same meaning in both
    torch.testing.assert_close(
        mine(x, x, x, attn_mask=m)[0], ref(x, x, x, attn_mask=m)[0]
    )
    with pytest.raises(
        ValueError, match=r"3-D attn_mask must be \(B, T, S\).*\(B\*H, T, S\)"
    ):
        mine(x, x, x, attn_mask=torch.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="attn_mask of shape"):
        mine(x, x, x, attn_mask=torch.zeros(4, 5))


# probe case 110
def test_pytorch_style_causal_mask_warns():
    _, mine = _pair()
    x = torch.randn(2, 4, 8)
    triu = torch.ones(4, 4, dtype=torch.bool).triu(1)  # PyTorch: True = blocked
    with pytest.warns(attnlab.MaskConventionWarning, match=r"triu\(\.\.\., 1\)"):
        mine(x, x, x, attn_mask=triu)
    with pytest.warns(attnlab.MaskConventionWarning, match="query rows with no key"):
        mine(x, x, x, attn_mask=torch.zeros(4, 4, dtype=torch.bool))
    layer = attnlab.TransformerEncoderLayer(8, 2, 16, 0.0)
    with pytest.warns(attnlab.MaskConventionWarning, match="triu"):
        layer(x, src_mask=triu)


# probe case 114
def test_mha_with_no_keys_equals_torch():
    ref, mine = _pair()
    q, kv = torch.randn(2, 3, 8), torch.randn(2, 0, 8)
    out_t, w_t = ref(q, kv, kv)
    out_m, w_m = mine(q, kv, kv)
    assert w_m.shape == w_t.shape == (2, 3, 0)
    torch.testing.assert_close(out_m, out_t)


@pytest.mark.usefixtures("debug_mode")  # the value scans are on
def test_mha_nan_in_query_names_query():
    _, mine = _pair()
    x = torch.randn(2, 4, 8)
    bad = x.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="query contains NaN"):
        mine(bad, x, x)
    with pytest.raises(TypeError, match="value must be a floating-point"):
        mine(x, x, x.long())


# ------------------------------------------------------------ transformer (120-140)
# probe case 120
def test_encoder_layer_on_2d_input_names_src():
    layer = attnlab.TransformerEncoderLayer(8, 2, 16)
    with pytest.raises(ValueError, match="src must be batch-first"):
        layer(torch.randn(5, 8))
    dec = attnlab.TransformerDecoderLayer(8, 2, 16)
    with pytest.raises(ValueError, match="memory must be batch-first"):
        dec(torch.randn(1, 5, 8), torch.randn(5, 8))


# probe case 127
def test_copy_from_torch_refuses_the_other_layer_type():
    enc = attnlab.TransformerEncoderLayer(8, 2, 16)
    with pytest.raises(TypeError, match="nn.TransformerEncoderLayer"):
        attnlab.copy_from_torch(enc, nn.TransformerDecoderLayer(8, 2, 16))
    dec = attnlab.TransformerDecoderLayer(8, 2, 16)
    with pytest.raises(TypeError, match="nn.TransformerDecoderLayer"):
        attnlab.copy_from_torch(dec, nn.TransformerEncoderLayer(8, 2, 16))


def _lm():
    cfg = attnlab.TransformerConfig(
        tgt_vocab=10, d_model=8, n_heads=2, d_ff=16, max_len=12
    )
    return attnlab.TransformerLM(cfg).eval()


# probe case 130
@pytest.mark.parametrize("bad", [10, -1, 40000])
def test_lm_refuses_ids_outside_the_vocabulary(bad):
    with pytest.raises(
        ValueError, match=r"ids holds the id -?[0-9]+, outside the vocabulary \[0, 10\)"
    ):
        _lm()(torch.tensor([[1, bad]]))


# probe case 132
def test_lm_on_1d_ids_names_ids():
    with pytest.raises(ValueError, match=r"ids must be token ids \(B, T\)"):
        _lm()(torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="integer token ids"):
        _lm()(torch.tensor([[1.0, 2.0]]))


# probe case 136
@pytest.mark.parametrize("t", [-1.0, float("nan"), float("inf")])
def test_lm_generate_refuses_a_bad_temperature(t):
    with pytest.raises(ValueError, match="temperature"):
        _lm().generate(torch.tensor([[1, 2]]), 3, temperature=t)


def _s2s():
    cfg = attnlab.TransformerConfig(
        src_vocab=12, tgt_vocab=12, d_model=8, n_heads=2, d_ff=16
    )
    return attnlab.Seq2SeqTransformer(cfg).eval()


# probe case 138
def test_seq2seq_on_an_empty_source_runs_without_a_convention_warning(quiet):
    model = _s2s()
    src = torch.tensor([[5, 6, 7]])
    ids, _ = model.greedy(src, src_lengths=[0], max_len=4)
    assert ids.shape[0] == 1
    out = model(
        torch.tensor([[5, 6, 0], [5, 6, 7]]), torch.tensor([[1, 4], [1, 4]]), [0, 3]
    )
    assert out.isfinite().all()


# probe case 140
def test_seq2seq_beam_on_a_batch_says_it_takes_one_source():
    with pytest.raises(ValueError, match=r"src must be token ids \(S,\), got \(1, 3\)"):
        _s2s().beam(torch.tensor([[3, 4, 5]]), beam_size=2, max_len=3)


# ------------------------------------------------------------- positional (142-149)
# probe cases 142, 143, 149
@pytest.mark.parametrize(
    "module",
    [attnlab.SinusoidalPositionalEncoding(8), attnlab.LearnedPositionalEncoding(8)],
)
def test_positional_offset_must_be_a_non_negative_int(module):
    x = torch.zeros(1, 3, 8)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        module(x, offset=-1)
    with pytest.raises(TypeError, match="offset must be an int"):
        module(x, offset=2.5)
    torch.testing.assert_close(module(x, offset=2), module(torch.zeros(1, 5, 8))[:, 2:])


# probe case 147
def test_sinusoidal_base_must_be_finite_and_above_one():
    for base, why in ((float("nan"), "finite"), (float("inf"), "finite"), (1.0, "> 1")):
        with pytest.raises(ValueError, match=f"base must be {why}"):
            attnlab.sinusoidal_encoding(3, 8, base=base)
    with pytest.raises(ValueError, match="offset"):
        attnlab.apply_rotary(torch.randn(3, 4), offset=-2)


# --------------------------------------------------------------- masking (152-155)
# probe case 152
def test_causal_mask_float_size_names_it():
    with pytest.raises(TypeError, match="causal_mask: T must be an int"):
        attnlab.causal_mask(3.5)
    with pytest.raises(TypeError, match="causal_mask: S must be an int"):
        attnlab.causal_mask(3, 2.0)


# probe case 154
def test_padding_mask_float_lengths_raise():
    with pytest.raises(TypeError, match="lengths must be integers"):
        attnlab.padding_mask([2.5, 1.0])


# probe case 155
def test_padding_mask_of_no_lengths_is_empty():
    assert attnlab.padding_mask([]).shape == (0, 0)
    assert attnlab.padding_mask([], 4).shape == (0, 4)


@pytest.mark.usefixtures("debug_mode")  # the value scans are on
def test_float_mask_with_nan_names_the_mask():
    q = torch.randn(1, 3, 4)
    m = torch.zeros(3, 3)
    m[0, 0] = float("nan")
    with pytest.raises(ValueError, match="mask is a float mask .* NaN"):
        attnlab.scaled_dot_product_attention(q, q, q, m)


# ------------------------------------------------------------ structured (175-181)
# probe case 175
def test_crf_with_no_feasible_labelling_names_the_examples():
    unary = torch.randn(2, 4, 3, dtype=torch.float64)
    transition = torch.full((3, 3), float("-inf"), dtype=torch.float64)
    with pytest.raises(
        ValueError, match=r"no labelling has a finite score in example\(s\) \[0, 1\]"
    ):
        linear_chain_marginals(unary, transition)
    unary[1, 2] = float("-inf")  # one position with no possible state
    with pytest.raises(ValueError, match=r"example\(s\) \[1\]"):
        linear_chain_marginals(unary, torch.zeros(3, 3, dtype=torch.float64))


# probe case 176
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_crf_is_computed_in_float32(dtype):
    g = torch.Generator().manual_seed(0)
    unary = torch.randn(4, 12, 3, generator=g).to(dtype)
    transition = torch.randn(3, 3, generator=g).to(dtype)
    got = linear_chain_marginals(unary, transition)
    assert got.dtype == dtype
    ref = linear_chain_marginals(unary.double(), transition.double())
    eps = torch.finfo(dtype).eps  # only the final rounding to 16 bits remains
    torch.testing.assert_close(got.double(), ref, atol=eps, rtol=0)


# probe case 181
def test_segmentation_marginals_of_empty_scores_are_empty():
    assert segmentation_marginals(torch.empty(2, 0), torch.zeros(2, 2)).shape == (2, 0)
    assert segmentation_marginals(torch.empty(0, 5), torch.zeros(2, 2)).shape == (0, 5)


# ------------------------------------------------------------ normmax / entmax extras
def test_sparse_mappings_take_entmax_k():
    x = torch.randn(3, 50, dtype=torch.float64)
    for fn in (attnlab.sparsemax, attnlab.entmax15):
        ref = fn(x)
        for k in (1, 2, 7, 50, 500):
            torch.testing.assert_close(fn(x, -1, k), ref)
        with pytest.raises(ValueError, match="k must be"):
            fn(x, -1, 0)
        with pytest.raises(TypeError, match="k must be"):
            fn(x, -1, 2.0)


def test_entmax_bisect_alpha_one_is_softmax_and_differentiable():
    x = torch.randn(3, 5, dtype=torch.float64)
    torch.testing.assert_close(attnlab.entmax_bisect(x, 1.0), torch.softmax(x, -1))
    a = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    xr = x.clone().requires_grad_()
    assert torch.autograd.gradcheck(attnlab.entmax_bisect, (xr, a))
    # the alpha-gradient at 1 is the limit of those around it
    g = torch.randn(3, 5, dtype=torch.float64)

    def dalpha(alpha):
        al = torch.tensor(alpha, dtype=torch.float64, requires_grad=True)
        (attnlab.entmax_bisect(x, al) * g).sum().backward()
        return al.grad.item()

    assert math.isclose(dalpha(1.0), (dalpha(1.001) + dalpha(0.999)) / 2, rel_tol=1e-3)


def test_probe_rerun_script_finds_no_defect_in_this_issues_files(capsys):
    from tools import probe_rerun

    probe_rerun.main([])
    out = capsys.readouterr().out
    mine = [line for line in out.splitlines() if "[i22]" in line]
    assert len(mine) == 45 and all(" OK " in line for line in mine), out


# ------------------------------------------------ further inputs of the same kinds
def test_more_arguments_are_named():
    mha = attnlab.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="nn.MultiheadAttention"):
        mha.load_torch(nn.Linear(8, 8))
    with pytest.raises(ValueError, match="d_ff must be >= 1"):
        attnlab.TransformerEncoderLayer(8, 2, -1)
    with pytest.raises(ValueError, match="layer_norm_eps"):
        attnlab.TransformerEncoderLayer(8, 2, 16, 0.1, "relu", -1.0)
    with pytest.raises(ValueError, match=r"prompt must be token ids \(B, T0\)"):
        _lm().generate(torch.tensor([1, 2]), 2)
    with pytest.raises(TypeError, match="to_additive: mask must be a torch.Tensor"):
        attnlab.to_additive([True])
    with pytest.raises(ValueError, match="mask_value"):
        attnlab.to_additive(torch.ones(2, dtype=torch.bool), float("nan"))


@pytest.mark.parametrize("shape", [(2, 0), (0, 3)])
def test_hard_attention_on_empty_scores(shape):
    from attnlab.structured import GumbelSoftmax, ReinforceSample

    for module in (GumbelSoftmax(), ReinforceSample()):
        assert module(torch.empty(shape)).shape == shape
