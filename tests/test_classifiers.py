"""attnlab.classifiers: the J&W classifier's pieces compose, frozen weights replace
its attention, the Transformer's captured weights are those its layers used, and
training learns the rationale tasks (slow)."""

from __future__ import annotations

import pytest
import torch

from attnlab.classifiers import (
    AttentionClassifier,
    TransformerClassifier,
    accuracy_f1,
    masked_softmax,
    predict_proba,
)
from attnlab.data import rationale_task
from attnlab.explain import attention_rollout, diagnostic_mlp, wp_adversary
from attnlab.train import bce_loss, fit_classifier


def _batch():
    d = rationale_task("focus", "train", n=6, lengths=(5, 12))
    return d


@pytest.mark.parametrize("encoder", ["lstm", "average"])
@pytest.mark.parametrize("attention", ["additive", "uniform"])
def test_forward_is_decode_of_attend_of_encode(encoder, attention):
    d = _batch()
    m = AttentionClassifier(len(d.vocab), encoder, attention).eval()
    logit, w = m(d.ids, d.mask)
    assert logit.shape == (6,) and w.shape == d.ids.shape
    torch.testing.assert_close(w.sum(1), torch.ones(6))
    assert (w[~d.mask] == 0).all()
    h = m.encode(m.embedding(d.ids), d.mask)
    torch.testing.assert_close(m.decode(h, m.attend(h, d.mask)), logit)
    if attention == "uniform":
        torch.testing.assert_close(w, d.mask / d.mask.sum(1, keepdim=True))


def test_padding_does_not_change_the_output():
    d = _batch()
    m = AttentionClassifier(len(d.vocab)).eval()
    with torch.no_grad():
        full = m(d.ids, d.mask)[0]
        one = torch.cat([m(d[i].ids, d[i].mask)[0] for i in range(6)])
    torch.testing.assert_close(full, one, atol=1e-6, rtol=1e-5)


def test_given_weights_replace_the_attention_and_embeddings_the_lookup():
    d = _batch()
    m = AttentionClassifier(len(d.vocab)).eval()
    w = torch.zeros(d.ids.shape)
    w[:, 0] = 1.0
    logit, got = m(d.ids, d.mask, weights=w)
    assert got is w
    h = m.encode(m.embedding(d.ids), d.mask)
    torch.testing.assert_close(logit, m.out(h[:, 0]).squeeze(-1))
    e = m.embedding(d.ids)
    torch.testing.assert_close(m(d.ids, d.mask, embeddings=e)[0], m(d.ids, d.mask)[0])


def test_bad_inputs_raise():
    d = _batch()
    with pytest.raises(ValueError, match="encoder"):
        AttentionClassifier(10, "cnn")
    with pytest.raises(ValueError, match="attention"):
        AttentionClassifier(10, attention="dot")
    m = AttentionClassifier(len(d.vocab))
    with pytest.raises(ValueError, match="mask"):
        m(d.ids, d.mask[:, :-1])
    with pytest.raises(TypeError, match="boolean"):
        m(d.ids, d.mask.float())
    with pytest.raises(ValueError, match="weights"):
        m(d.ids, d.mask, weights=torch.ones(6, 2))
    with pytest.raises(ValueError, match="max_len"):
        TransformerClassifier(len(d.vocab), max_len=4)(d.ids, d.mask)
    with pytest.raises(TypeError, match="RationaleData"):
        fit_classifier(m, (d.ids, d.labels))


def test_masked_softmax_never_gives_nan():
    w = masked_softmax(
        torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
        torch.tensor([[True, False], [False, False]]),
    )
    torch.testing.assert_close(w, torch.tensor([[1.0, 0.0], [0.0, 0.0]]))


def test_transformer_returns_the_weights_its_layers_used():
    d = _batch()
    torch.manual_seed(0)
    m = TransformerClassifier(len(d.vocab), d_model=16, n_heads=2, n_layers=2).eval()
    logit, att = m(d.ids, d.mask)
    B, T = d.ids.shape
    assert (
        logit.shape == (B,) and len(att) == 2 and att[0].shape == (B, 2, T + 1, T + 1)
    )
    keys = torch.cat([torch.ones(B, 1, dtype=torch.bool), d.mask], 1)
    assert (
        att[1][~keys[:, None, None, :].expand_as(att[1])] == 0
    ).all()  # no weight on pads
    torch.testing.assert_close(att[0].sum(-1), torch.ones(B, 2, T + 1))
    # first layer's weights by hand: pre-LN, queries and keys from norm1(x)
    layer = m.layers[0]
    x = torch.cat(
        [m.embedding(torch.ones(B, 1, dtype=torch.long)), m.embedding(d.ids)], 1
    )
    x = layer.norm1(x + m.positions[: T + 1])
    ref = layer.self_attn(
        x, x, x, key_padding_mask=keys, need_weights=True, average_attn_weights=False
    )[1]
    torch.testing.assert_close(att[0], ref)
    assert attention_rollout(att).shape == (B, T + 1, T + 1)


@pytest.mark.slow
def test_bilstm_learns_focus_and_average_cannot():
    tr = rationale_task("focus", "train", n=2000, lengths=(8, 14))
    te = rationale_task("focus", "test", n=200, lengths=(8, 14))
    torch.manual_seed(0)
    lstm = AttentionClassifier(len(tr.vocab))
    fit_classifier(lstm, tr, epochs=3)
    torch.manual_seed(0)
    avg = AttentionClassifier(len(tr.vocab), "average")
    fit_classifier(avg, tr, epochs=3)
    assert accuracy_f1(lstm, te)[0] > 0.9
    assert accuracy_f1(avg, te)[0] < 0.8  # no context: cannot tell which word follows
    p = predict_proba(lstm, te)
    assert p.shape == (200,) and ((p > 0) & (p < 1)).all()


@pytest.mark.slow
def test_wp_adversary_and_diagnostic_mlp_run_and_learn():
    tr = rationale_task("count", "train", n=600, lengths=(6, 10))
    te = rationale_task("count", "test", n=150, lengths=(6, 10))
    torch.manual_seed(0)
    base = AttentionClassifier(len(tr.vocab))
    fit_classifier(base, tr, epochs=3)
    adv = wp_adversary(base, tr, lam=0.001, epochs=2)
    assert isinstance(adv, AttentionClassifier) and not adv.training
    with torch.no_grad():
        w_tr, w_te = base(tr.ids, tr.mask)[1], base(te.ids, te.mask)[1]
    acc, f1 = diagnostic_mlp(tr, te, w_tr, w_te, epochs=2)
    assert 0.6 < acc <= 1.0 and 0.0 <= f1 <= 1.0
    with pytest.raises(ValueError, match="w_train"):
        diagnostic_mlp(tr, te, w_tr[:, :3], w_te)
    with pytest.raises(ValueError, match="lam"):
        wp_adversary(base, tr, lam=-1.0)


def test_bce_loss_is_binary_cross_entropy_of_the_logits():
    d = _batch()
    torch.manual_seed(0)
    m = AttentionClassifier(len(d.vocab)).eval()
    logit = m(d.ids, d.mask)[0]
    p = torch.sigmoid(logit.double())
    y = d.labels.double()
    ref = -(y * p.log() + (1 - y) * (1 - p).log()).mean()  # the float64 formula
    got = bce_loss(m, d, torch.arange(len(d.ids)))
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-6)
