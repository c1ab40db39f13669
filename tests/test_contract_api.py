"""The 0.2 contract, one assertion per class of defect the hidden probe found, and the
hot path: no host sync, the fast path equal to the readable one and to PyTorch's."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlab
from attnlab import explain


@contextlib.contextmanager
def count_host_syncs():
    """Counts tensor -> Python conversions (bool(t), t.item(), t.tolist())."""
    calls = {"n": 0}
    names = ("__bool__", "item", "tolist")
    saved = {n: getattr(torch.Tensor, n) for n in names}

    def wrap(fn):
        def inner(self, *a, **k):
            calls["n"] += 1
            return fn(self, *a, **k)

        return inner

    try:
        for n in names:
            setattr(torch.Tensor, n, wrap(saved[n]))
        yield calls
    finally:
        for n in names:
            setattr(torch.Tensor, n, saved[n])


# ------------------------------------------------------------------- hot path
@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_forward_makes_no_host_sync(need_weights):
    mha = attnlab.MultiHeadAttention(16, 4).train()
    x = torch.randn(2, 5, 16)
    with count_host_syncs() as calls:
        out, _ = mha(x, x, x, need_weights=need_weights, is_causal=True)
        out.sum().backward()
    assert calls["n"] == 0


def test_encoder_layer_inside_a_model_makes_no_host_sync():
    layer = attnlab.TransformerEncoderLayer(16, 4, 32, 0.0)
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    with attnlab.derived_masks(), count_host_syncs() as calls:
        layer(x, src_key_padding_mask=pad, is_causal=True)
    assert calls["n"] == 0


def test_value_scans_only_under_debug():
    q = torch.randn(1, 3, 4)
    q[0, 1, 2] = float("nan")
    out, _ = attnlab.scaled_dot_product_attention(q, q, q)
    assert out.isnan().any()  # NaN in -> NaN out, as F.scaled_dot_product_attention
    with attnlab.debug(), pytest.raises(ValueError, match="q contains NaN"):
        attnlab.scaled_dot_product_attention(q, q, q)
    assert not attnlab.debugging()
    attnlab.debug()  # a bare call switches it on for the rest of the run
    try:
        assert attnlab.debugging()
    finally:
        attnlab.debug(False)
    assert not attnlab.debugging()


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "padding", "causal"])
def test_fast_path_equals_readable_path_and_torch(mask_kind):
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    ours = attnlab.MultiHeadAttention(16, 4).load_torch(theirs).eval()
    q, kv = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
    keep = torch.rand(5, 6) > 0.4
    keep[2] = False  # a query with no key: zeros, never NaN
    kw, tkw = {}, {}
    if mask_kind == "bool":
        kw, tkw = dict(attn_mask=keep), dict(attn_mask=~keep)
    elif mask_kind == "float":
        add = torch.zeros(5, 6).masked_fill(~keep, float("-inf"))
        kw, tkw = dict(attn_mask=add), dict(attn_mask=add)
    elif mask_kind == "padding":
        pad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
        kw, tkw = dict(key_padding_mask=pad), dict(key_padding_mask=~pad)
    elif mask_kind == "causal":
        kw = dict(is_causal=True)
        tkw = dict(attn_mask=~torch.ones(5, 6, dtype=torch.bool).tril())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast, none = ours(q, kv, kv, need_weights=False, **kw)
        slow, w = ours(q, kv, kv, need_weights=True, **kw)
        ref = theirs(q, kv, kv, need_weights=False, **tkw)[0]
    assert none is None and w is not None
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    assert not fast.isnan().any()
    live = ~ref.isnan().any(-1, keepdim=True)  # PyTorch gives NaN on dead rows
    torch.testing.assert_close(fast * live, ref.nan_to_num() * live, atol=1e-5, rtol=0)


# ------------------------------------------------------------ the probe's classes
def test_softmax_has_no_overflow_at_tiny_temperature():
    x = torch.tensor([1.0, 2.0, 3.0])
    p = attnlab.softmax(x, temperature=1e-40)
    assert torch.equal(p, torch.tensor([0.0, 0.0, 1.0]))  # was NaN
    torch.testing.assert_close(
        attnlab.softmax(x, temperature=0.3), torch.softmax(x / 0.3, -1)
    )


def test_a_tensor_temperature_gets_its_gradient():
    x = torch.tensor([1.0, 2.0, 3.0])
    t = torch.tensor(0.7, requires_grad=True)
    t_ref = torch.tensor(0.7, requires_grad=True)
    (attnlab.softmax(x, temperature=t) * x).sum().backward()
    (torch.softmax(x / t_ref, -1) * x).sum().backward()
    torch.testing.assert_close(t.grad, t_ref.grad)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 4.0])
def test_normmax_double_backward_matches_finite_differences(alpha):
    x = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(
        lambda x: attnlab.normmax_bisect(x, alpha), (x,)
    )


def test_scale_nan_is_refused_by_flash_attention():
    q = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match="flash_attention: scale must be finite"):
        attnlab.flash_attention(q, q, q, scale=float("nan"))


@pytest.mark.parametrize("T, S, Dh", [(0, 4, 3), (3, 0, 3), (0, 0, 3), (3, 4, 0)])
def test_degenerate_sizes_as_pytorch(T, S, Dh):
    q, k, v = torch.randn(2, T, Dh), torch.randn(2, S, Dh), torch.randn(2, S, 5)
    for causal in (False, True):
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out, _ = attnlab.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(out, ref)
        fl = attnlab.flash_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(fl, ref, atol=1e-6, rtol=1e-6)


def test_load_torch_checks_everything_before_copying():
    ours = attnlab.MultiHeadAttention(8, 2)
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    for bad in (
        nn.MultiheadAttention(8, 2, kdim=1, vdim=1, batch_first=True),
        nn.MultiheadAttention(8, 2, bias=False),
        nn.MultiheadAttention(8, 2).double(),
    ):
        with pytest.raises((TypeError, ValueError), match="load_torch"):
            ours.load_torch(bad)
        for k, v in ours.state_dict().items():
            assert torch.equal(v, before[k]), f"{k} was half-copied"


@pytest.mark.parametrize(
    "kw, what",
    [
        (dict(activation="gelu"), "activation"),
        (dict(layer_norm_eps=1e-6), "layer_norm_eps"),
        (dict(dim_feedforward=32), "linear1"),
        (dict(norm_first=True), "norm_first"),
    ],
)
def test_copy_from_torch_refuses_a_different_layer_and_copies_nothing(kw, what):
    ours = attnlab.TransformerEncoderLayer(8, 2, 16)
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    theirs = nn.TransformerEncoderLayer(8, 2, **{"dim_feedforward": 16, **kw})
    with pytest.raises(ValueError, match=what):
        attnlab.copy_from_torch(ours, theirs)
    for k, v in ours.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} was copied before the error"


def test_explain_tools_refuse_logits_and_unnormalised_weights():
    p, q = torch.tensor([10.0, 0.0]), torch.tensor([0.0, 10.0])
    with pytest.raises(ValueError, match="p must hold weights whose rows sum to 1"):
        explain.jsd(p, q)  # was 6.93, above the ln 2 bound
    with pytest.raises(ValueError, match="negative"):
        explain.jsd(torch.tensor([2.0, -1.0]), torch.tensor([0.5, 0.5]))
    assert float(explain.jsd(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))) <= (
        torch.log(torch.tensor(2.0)).item() + 1e-7
    )
    with pytest.raises(ValueError, match="attentions"):
        explain.attention_rollout([torch.randn(1, 2, 3, 3)])  # scores, not weights


def test_out_of_vocabulary_ids_in_the_decoders_are_clear_errors():
    cfg = attnlab.TransformerConfig(
        src_vocab=11, tgt_vocab=11, d_model=8, n_heads=2, d_ff=16, dropout=0.0
    )
    lm = attnlab.TransformerLM(cfg).eval()
    step = attnlab.CachedLMStep(lm)
    with pytest.raises(ValueError, match="ids holds the id 11, outside"):
        step(torch.tensor([[1, 11]]))  # was an IndexError from the embedding
    from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig

    model = Seq2Seq(Seq2SeqConfig(7, 7, attention="dot")).eval()
    gru_step = model.step(torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="prefix holds the id 9, outside"):
        gru_step(torch.tensor([[9]]))


# ------------------------------------------------------------ one name per thing
def test_an_encoder_refuses_a_decoder_layer():
    dec = attnlab.TransformerDecoderLayer(8, 2, 16)
    assert not isinstance(dec, attnlab.TransformerEncoderLayer)
    with pytest.raises(TypeError, match="TransformerEncoder takes"):
        attnlab.TransformerEncoder(dec, 2)


def test_the_seq2seq_models_share_forward_order_and_config():
    from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig

    rnn = Seq2Seq(Seq2SeqConfig(7, 7, attention="dot"))
    cfg = attnlab.TransformerConfig(src_vocab=7, tgt_vocab=7, d_model=8, n_heads=2)
    tf = attnlab.Seq2SeqTransformer(cfg)
    src, tgt = torch.randint(3, 7, (2, 4)), torch.randint(3, 7, (2, 3))
    lengths = torch.tensor([4, 3])
    assert rnn(src, tgt, lengths)[0].shape == tf(src, tgt, lengths).shape == (2, 3, 7)
    assert rnn.config.tgt_vocab == tf.config.tgt_vocab == 7
    assert tf.cfg is tf.config  # the 0.1 name still works


def test_capture_attention_is_public():
    assert attnlab.capture_attention is attnlab.transformer.stacks.capture_attention


@pytest.mark.parametrize("modules", [[torch.nn.Linear(2, 2)], {"self": "attn"}])
def test_capture_attention_refuses_what_is_not_a_dict_of_modules(modules):
    # found writing the Raises section: was AttributeError from inside ('.items')
    with pytest.raises(TypeError, match="capture_attention: modules"):
        with attnlab.capture_attention(modules):
            pass


def test_old_widget_module_names_warn_and_are_the_same_modules():
    for name in [m for m in sys.modules if m.startswith("attnlab.widgets.")]:
        del sys.modules[name]
    with pytest.warns(DeprecationWarning, match="import attnlab.course.ch02_recipe"):
        old = importlib.import_module("attnlab.widgets.recipe")
    assert old is importlib.import_module("attnlab.course.ch02_recipe.widgets")


def test_every_name_exported_in_0_1_is_still_importable():
    old_top = ["noam_lr", "noam_scheduler", "token_loss", "MultiHeadAttention"]
    for name in old_top:
        assert hasattr(attnlab, name)
    with pytest.warns(DeprecationWarning, match="capture_attention"):
        from attnlab.transformer import _capture_weights  # the 0.1 name
    assert _capture_weights is attnlab.transformer.capture_attention

    assert attnlab.__version__ == "0.2.0"
    for name in attnlab.__all__:
        assert hasattr(attnlab, name), name


def test_the_moved_training_helpers_keep_their_old_names_deprecated():
    import attnlab.classifiers as old
    from attnlab import rationales, train

    with pytest.warns(DeprecationWarning, match="attnlab.train.fit_classifier"):
        assert old.fit_classifier is train.fit_classifier
    with pytest.warns(DeprecationWarning, match="attnlab.rationales.minibatches"):
        assert old.minibatches is rationales.minibatches
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018
    assert "fit_classifier" not in old.__all__ and "minibatches" not in old.__all__


def test_the_moved_attribution_tools_keep_their_old_names_deprecated():
    from attnlab import explain, pretrained

    for name in ["attnlab.pretrained.attribution", "attnlab.pretrained.faithfulness"]:
        sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning, match="import attnlab.explain.attribution"):
        old = importlib.import_module("attnlab.pretrained.attribution")
    assert old.token_attributions is explain.token_attributions
    with pytest.warns(DeprecationWarning, match="import attnlab.explain.faithfulness"):
        old = importlib.import_module("attnlab.pretrained.faithfulness")
    assert old.eraser_scores is explain.eraser_scores
    assert old.STOP_WORDS is explain.STOP_WORDS
    with pytest.warns(DeprecationWarning, match="from attnlab.explain"):
        assert pretrained.token_attributions is explain.token_attributions
    with pytest.warns(DeprecationWarning, match="from attnlab.explain"):
        assert pretrained.ATTRIBUTION_METHODS is explain.ATTRIBUTION_METHODS


# Every top-level function has numpydoc sections (finding 20 of the 2026-11-25 review,
# 11 of the 2026-11-29 one); a new function joins attnlab.__all__ with its sections.
def _has_numpydoc_sections(fn) -> bool:
    """A ``Parameters`` section unless the function takes none, and ``Returns`` unless
    it returns None."""
    doc = inspect.getdoc(fn) or ""
    sig = inspect.signature(fn)
    takes_none = not sig.parameters
    returns_none = sig.return_annotation in (None, "None")
    return (takes_none or "Parameters\n---" in doc) and (
        returns_none or "Returns\n---" in doc
    )


def test_top_level_functions_have_numpydoc_sections():
    functions = {
        name: getattr(attnlab, name)
        for name in attnlab.__all__
        if inspect.isfunction(getattr(attnlab, name))
    }
    missing = {name for name, fn in functions.items() if not _has_numpydoc_sections(fn)}
    assert not missing, f"no Parameters/Returns section: {sorted(missing)}"
    assert {"softmax", "sparsemax", "causal_mask", "noam_lr"} <= set(functions)
