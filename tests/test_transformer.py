"""Transformer layers against PyTorch by weight copy; models, decoding, training tricks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlab

D, H, FF = 16, 4, 32


def _pair(kind, norm_first, activation, dtype=torch.float64):
    torch_cls = (
        nn.TransformerEncoderLayer if kind == "enc" else nn.TransformerDecoderLayer
    )
    ours_cls = (
        attnlab.TransformerEncoderLayer
        if kind == "enc"
        else attnlab.TransformerDecoderLayer
    )
    ref = torch_cls(
        D,
        H,
        FF,
        dropout=0.0,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
        dtype=dtype,
    )
    ours = ours_cls(D, H, FF, 0.0, activation, norm_first=norm_first)  # torch's order
    return attnlab.copy_from_torch(ours.to(dtype), ref), ref


def _grads(module, names):
    return [dict(module.named_parameters())[n].grad for n in names]


def _compare_grads(ours, ref, attn_pairs, extra):
    for mine, theirs in attn_pairs:
        a, b = getattr(ours, mine), getattr(ref, theirs)
        w = torch.cat([a.w_q.weight.grad, a.w_k.weight.grad, a.w_v.weight.grad])
        torch.testing.assert_close(w, b.in_proj_weight.grad)
        bias = torch.cat([a.w_q.bias.grad, a.w_k.bias.grad, a.w_v.bias.grad])
        torch.testing.assert_close(bias, b.in_proj_bias.grad)
        torch.testing.assert_close(a.w_o.weight.grad, b.out_proj.weight.grad)
    for name in extra:
        for p, q in zip(
            getattr(ours, name).parameters(), getattr(ref, name).parameters()
        ):
            torch.testing.assert_close(p.grad, q.grad)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_equals_pytorch(norm_first, activation):
    ours, ref = _pair("enc", norm_first, activation)
    x = torch.randn(3, 5, D, dtype=torch.float64, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]).bool()
    am = (torch.rand(5, 5) > 0.4) | torch.eye(5, dtype=torch.bool)
    out = ours(x, src_mask=am, src_key_padding_mask=keep)
    exp = ref(x2, src_mask=~am, src_key_padding_mask=~keep)  # PyTorch: True = blocked
    torch.testing.assert_close(out, exp)
    g = torch.randn_like(out)
    out.backward(g), exp.backward(g)
    torch.testing.assert_close(x.grad, x2.grad)
    _compare_grads(
        ours,
        ref,
        [("self_attn", "self_attn")],
        ["linear1", "linear2", "norm1", "norm2"],
    )


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer_equals_pytorch(norm_first, activation):
    ours, ref = _pair("dec", norm_first, activation)
    y = torch.randn(2, 4, D, dtype=torch.float64, requires_grad=True)
    m = torch.randn(2, 6, D, dtype=torch.float64, requires_grad=True)
    y2, m2 = (t.detach().clone().requires_grad_(True) for t in (y, m))
    causal = attnlab.causal_mask(4)
    tgt_keep = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]).bool()
    mem_keep = torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0]]).bool()
    mem_mask = (torch.rand(4, 6) > 0.3) | (torch.arange(6) == 0)  # key 0 always seen
    out = ours(
        y,
        m,
        tgt_mask=causal,
        memory_mask=mem_mask,
        tgt_key_padding_mask=tgt_keep,
        memory_key_padding_mask=mem_keep,
    )
    exp = ref(
        y2,
        m2,
        tgt_mask=~causal,
        memory_mask=~mem_mask,
        tgt_key_padding_mask=~tgt_keep,
        memory_key_padding_mask=~mem_keep,
    )
    torch.testing.assert_close(out, exp)
    g = torch.randn_like(out)
    out.backward(g), exp.backward(g)
    torch.testing.assert_close(y.grad, y2.grad)
    torch.testing.assert_close(m.grad, m2.grad)
    pairs = [("self_attn", "self_attn"), ("cross_attn", "multihead_attn")]
    _compare_grads(ours, ref, pairs, ["linear1", "linear2", "norm1", "norm2", "norm3"])


def test_float_masks_and_is_causal_match_pytorch():
    ours, ref = _pair("dec", False, "relu")
    y, m = (
        torch.randn(2, 5, D, dtype=torch.float64),
        torch.randn(2, 3, D, dtype=torch.float64),
    )
    causal = attnlab.causal_mask(5)
    additive = attnlab.to_additive(causal, dtype=torch.float64)  # same meaning in both
    exp = ref(y, m, tgt_mask=~causal)
    torch.testing.assert_close(ours(y, m, tgt_is_causal=True), exp)
    torch.testing.assert_close(
        ours(y, m, tgt_mask=additive), ref(y, m, tgt_mask=additive)
    )
    assert not torch.allclose(ours(y, m), exp)  # without the mask the future leaks in


def test_encoder_is_causal_with_src_mask_is_their_and():
    """attnlab's one is_causal rule in a layer: with a causal src_mask (PyTorch's hint
    is honest) both agree; with a non-causal one, ours ANDs the two."""
    torch.manual_seed(2)
    ours, ref = _pair("enc", False, "relu")
    x = torch.randn(2, 6, D, dtype=torch.float64)
    causal = attnlab.causal_mask(6)  # (S, S), True = may attend
    want = ref(x, src_mask=~causal, is_causal=True)
    torch.testing.assert_close(ours(x, src_mask=causal, is_causal=True), want)
    torch.testing.assert_close(ours(x, is_causal=True), want)
    band = attnlab.band_mask(6, 6, window=1)  # (S, S): neighbours on both sides
    got = ours(x, src_mask=band, is_causal=True)
    torch.testing.assert_close(got, ref(x, src_mask=~(band & causal)))
    assert not torch.allclose(got, ours(x, src_mask=band))  # the triangle counts


def test_eval_mode_float32_matches_pytorch_fast_path():
    torch.manual_seed(3)
    ours, ref = _pair("enc", False, "relu", dtype=torch.float32)
    ours.eval(), ref.eval()
    x = torch.randn(4, 7, D)
    with torch.no_grad():  # PyTorch may take its fused "fast path" here
        err = (ours(x) - ref(x)).abs().max().item()
    assert err < 1e-5


def test_dropout_active_in_training_only():
    layer = attnlab.TransformerEncoderLayer(D, H, FF, dropout=0.5)
    x = torch.randn(2, 6, D)
    assert not torch.allclose(layer(x), layer(x))  # two different dropout draws
    layer.eval()
    torch.testing.assert_close(layer(x), layer(x))


def test_layer_names_mirror_pytorch():
    ours = attnlab.TransformerDecoderLayer(D, H, FF)
    names = {n for n, _ in ours.named_children()}
    assert {"self_attn", "cross_attn", "linear1", "linear2", "norm1", "norm2", "norm3",
            "dropout", "dropout1", "dropout2", "dropout3"} <= names  # fmt: skip
    enc = {n for n, _ in attnlab.TransformerEncoderLayer(D, H, FF).named_children()}
    assert "norm3" not in enc and "cross_attn" not in enc


def test_constructor_in_pytorch_order():
    # (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps); norm_first
    # is keyword-only, since PyTorch's next positional argument is batch_first.
    layer = attnlab.TransformerEncoderLayer(D, H, FF, 0.2, "gelu", 1e-6)
    ref = nn.TransformerEncoderLayer(D, H, FF, 0.2, "gelu", 1e-6)
    assert layer.dropout.p == ref.dropout.p == 0.2
    assert layer.norm1.eps == ref.norm1.eps == 1e-6
    assert layer.activation is F.gelu
    assert attnlab.TransformerDecoderLayer(D, H).linear1.out_features == 2048
    with pytest.raises(TypeError):
        attnlab.TransformerEncoderLayer(D, H, FF, 0.1, "relu", 1e-5, True)


def test_bad_arguments():
    with pytest.raises(ValueError, match="activation"):
        attnlab.TransformerEncoderLayer(D, H, FF, activation="tanh")
    with pytest.raises(ValueError, match="dropout"):
        attnlab.TransformerEncoderLayer(D, H, FF, dropout=1.5)
    with pytest.raises(ValueError, match="divisible"):
        attnlab.TransformerEncoderLayer(10, 4, FF)
    ours, ref = _pair("enc", True, "relu")
    with pytest.raises(ValueError, match="norm_first"):
        attnlab.copy_from_torch(attnlab.TransformerEncoderLayer(D, H, FF).double(), ref)


def _model(**kw):
    cfg = dict(src_vocab=11, tgt_vocab=11, d_model=16, n_heads=2, d_ff=32, dropout=0.0)
    cfg.update(kw)
    return attnlab.Seq2SeqTransformer(attnlab.TransformerConfig(**cfg)).eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_cannot_see_the_future(norm_first, device):
    model = _model(norm_first=norm_first).to(device)
    src = torch.randint(4, 11, (2, 6), device=device)
    tgt = torch.randint(4, 11, (2, 7), device=device)
    base = model(src, tgt)
    for t in (0, 3, 6):
        changed = tgt.clone()
        changed[:, t:] = torch.randint(4, 11, changed[:, t:].shape, device=device)
        out = model(src, changed)
        torch.testing.assert_close(out[:, :t], base[:, :t])  # the past is untouched
    # ... while the source *is* seen
    assert not torch.allclose(model(src.flip(1), tgt), base)


def test_lm_cannot_see_the_future():
    cfg = attnlab.TransformerConfig(
        tgt_vocab=9, d_model=16, n_heads=2, d_ff=32, dropout=0.0
    )
    lm = attnlab.TransformerLM(cfg).eval()
    ids = torch.randint(3, 9, (2, 8))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 9
    torch.testing.assert_close(lm(changed)[:, :5], lm(ids)[:, :5])
    assert not torch.allclose(lm(changed)[:, 5:], lm(ids)[:, 5:])
    out = lm.generate(ids[:, :3], 4)
    assert out.shape == (2, 7) and torch.equal(out[:, :3], ids[:, :3])


def test_source_padding_is_ignored_and_no_nan():
    model = _model()
    src = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    tgt = torch.tensor([[1, 4, 5], [1, 4, 5]])
    base = model(src, tgt)
    other = src.clone()
    other[0, 3:] = 9  # garbage where the lengths say "padding"
    out = model(other, tgt, src_lengths=torch.tensor([3, 5]))
    torch.testing.assert_close(out, base)
    empty = model(src, tgt, src_lengths=torch.tensor([0, 5]))  # a fully masked source
    assert torch.isfinite(empty).all()


def test_attention_maps_every_layer_and_head():
    model = _model(n_encoder_layers=2, n_decoder_layers=3)
    src, tgt = torch.randint(4, 11, (2, 5)), torch.randint(4, 11, (2, 4))
    maps = model.attention_maps(src, tgt)
    assert [len(maps[k]) for k in ("encoder", "decoder", "cross")] == [2, 3, 3]
    assert maps["encoder"][0].shape == (2, 2, 5, 5)
    assert maps["cross"][2].shape == (2, 2, 4, 5)
    for w in maps["decoder"]:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 4))
        assert (w.triu(1) == 0).all()  # causal


def test_beam_one_equals_greedy():
    torch.manual_seed(1)
    model = _model(tgt_vocab=7)
    for i in range(6):
        src = torch.randint(4, 11, (1, 3 + i))
        greedy, _ = model.greedy(src, max_len=8)
        g = greedy[0].tolist()
        g = g[: g.index(2) + 1] if 2 in g else g
        best, score = model.beam(src[0], beam_size=1, max_len=8, alpha=0.6)[0]
        assert best == g


def _table_step(table):
    """A 'model' given as {prefix tuple: log-probs}: decoders only see this function."""

    def step(prefix):
        rows = [table[tuple(p[1:].tolist())] for p in prefix]
        return torch.tensor(rows).log()

    return step


def test_beam_finds_what_greedy_misses():
    # tokens: 0 pad, 1 bos, 2 eos, 3 "a", 4 "b". Greedy takes "a" (0.6) but every
    # continuation of "a" is weak; "b" (0.4) is followed by eos with 0.9.
    table = {
        (): [0, 0, 0.0, 0.6, 0.4],
        (3,): [0, 0, 0.5, 0.25, 0.25],
        (4,): [0, 0, 0.9, 0.05, 0.05],
        (3, 2): None,
    }
    table = {k: [max(p, 1e-9) for p in v] for k, v in table.items() if v}
    for k in [(3, 3), (3, 4), (4, 3), (4, 4)]:
        table[k] = [1e-9, 1e-9, 1.0, 1e-9, 1e-9]
    step = _table_step(table)
    greedy = attnlab.greedy_decode(step, 1, 1, 2, max_len=3)[0].tolist()
    assert greedy == [3, 2]  # P = 0.6 * 0.5 = 0.30
    beam = attnlab.beam_search(step, 1, 2, beam_size=2, max_len=3, alpha=0.0)
    assert beam[0][0] == [4, 2]  # P = 0.4 * 0.9 = 0.36
    assert beam[0][1] == pytest.approx(torch.tensor(0.36).log().item(), abs=1e-6)


def test_length_penalty():
    assert attnlab.length_penalty(1, 0.0) == 1.0
    assert attnlab.length_penalty(7, 1.0) == pytest.approx(2.0)
    assert attnlab.length_penalty(10, 0.6) > attnlab.length_penalty(3, 0.6)
    with pytest.raises(ValueError, match="length_penalty: alpha must be finite"):
        attnlab.length_penalty(3, float("nan"))  # was a silent NaN
    with pytest.raises(ValueError, match="length_penalty: length must be >= 0"):
        attnlab.length_penalty(-1, 0.6)


@pytest.mark.slow
def test_model_overfits_a_tiny_batch():
    torch.manual_seed(0)
    task = attnlab.data.make_task("reversal", lengths=(3, 5), n_symbols=6)
    batch = task.batch(6, seed=0)
    V = len(task.src_vocab)
    cfg = attnlab.TransformerConfig(
        src_vocab=V,
        tgt_vocab=V,
        d_model=32,
        n_heads=2,
        d_ff=64,
        dropout=0.0,
        norm_first=True,
    )
    model = attnlab.Seq2SeqTransformer(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only add overhead
    try:
        for _ in range(80):
            loss = attnlab.train.token_loss(model.logits(batch), batch.tgt_out)
            opt.zero_grad(), loss.backward(), opt.step()
    finally:
        torch.set_num_threads(threads)
    assert loss.item() < 0.05
    model.eval()
    pred, _ = model.greedy(batch.src, batch.src_lengths, max_len=10)
    assert attnlab.train.exact_match(pred, batch.tgt_out).all()


def test_beam_does_not_stop_on_weak_finished_hypotheses():
    # After any "b" the model says <eos> (0.9); all-"a" prefixes continue with "a"
    # (0.85) until five "a"s, then <eos>. Weak "...b <eos>" hypotheses finish early;
    # the search must go on until the strong all-"a" one finishes.
    def step(prefix):
        rows = []
        for p in prefix[:, 1:].tolist():
            if p and p[-1] == 4:
                rows.append([1e-9, 1e-9, 0.9, 0.05, 0.05])
            elif len(p) < 5:
                rows.append([1e-9, 1e-9, 1e-9, 0.85, 0.15])
            else:
                rows.append([1e-9, 1e-9, 1.0, 1e-9, 1e-9])
        return torch.tensor(rows).log()

    best, score = attnlab.beam_search(step, 1, 2, beam_size=2, max_len=8, alpha=0.0)[0]
    assert best == [3, 3, 3, 3, 3, 2]
    assert score == pytest.approx(5 * torch.tensor(0.85).log().item(), abs=1e-5)
    assert best == attnlab.greedy_decode(step, 1, 1, 2, max_len=8)[0].tolist()


def test_step_weights_are_the_last_cross_attention():
    model = _model()
    src = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    lengths = torch.tensor([3, 5])
    ids, w = attnlab.greedy_decode(
        model.step(src, lengths, weights=True), 2, 1, 2, max_len=4, return_weights=True
    )
    assert w.shape == (2, ids.shape[1], 5)
    assert (w[0, :, 3:] == 0).all()  # padding never receives weight
    tgt_in = torch.cat([torch.ones(2, 1, dtype=torch.long), ids[:, :-1]], dim=1)
    maps = model.attention_maps(src, tgt_in, lengths)
    torch.testing.assert_close(w[1], maps["cross"][-1][1].mean(0))  # (T, S)
    assert torch.equal(ids, model.greedy(src, lengths, max_len=4)[0])
