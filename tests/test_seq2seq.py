"""attnlab.seq2seq: shapes, padding masked, determinism, greedy decoding, and the
chapter-1 result (attention beats the fixed context on long inputs)."""

from __future__ import annotations

import pytest
import torch

import attnlab
from attnlab.data import ReversalTask, Vocab
from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig
from attnlab.train import accuracy_by_length, fit

STYLES = [
    (None, "luong"),
    ("additive", "bahdanau"),
    ("dot", "luong"),
    ("bilinear", "bahdanau"),
    ("additive", "luong"),
]


def _model(task, attention, style="bahdanau", **kw):
    cfg = Seq2SeqConfig(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_emb=8,
        d_hidden=6,
        attention=attention,
        style=style,
        d_attn=5,
        **kw,
    )
    return Seq2Seq(cfg)


@pytest.mark.parametrize("attention, style", STYLES)
def test_shapes_and_padding_never_attended(attention, style, device):
    task = ReversalTask(lengths=(1, 7))
    b = task.batch(5, seed=0, device=device)
    model = _model(task, attention, style).to(device)
    logits, w = model(b.src, b.tgt_in, b.src_lengths)
    B, S = b.src.shape
    T = b.tgt_in.shape[1]
    assert logits.shape == (B, T, len(task.tgt_vocab))
    ids, gw = model.greedy(b.src, b.src_lengths, max_len=9)
    assert ids.shape[0] == B and ids.shape[1] <= 9
    if attention is None:
        assert w is None and gw is None
        return
    assert w.shape == (B, T, S) and gw.shape == (B, ids.shape[1], S)
    pad = ~b.src_mask[:, None, :]  # (B, 1, S)
    assert (w.masked_select(pad) == 0).all() and (gw.masked_select(pad) == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(B, T, device=device))
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("attention, style", STYLES)
def test_padding_does_not_change_the_output(attention, style):
    """An example padded inside a longer batch gives the same logits as alone."""
    task = ReversalTask(lengths=(2, 8))
    model = _model(task, attention, style).eval()
    b = task.batch(4, seed=1)
    i = int(b.src_lengths.argmin())
    n = int(b.src_lengths[i])
    alone = task.encode(b.src_tokens[i])
    la, wa = model(alone.src, alone.tgt_in, alone.src_lengths)
    lb, wb = model(b.src, b.tgt_in, b.src_lengths)
    T = alone.tgt_in.shape[1]
    torch.testing.assert_close(lb[i, :T], la[0], atol=1e-5, rtol=1e-5)
    if attention:
        torch.testing.assert_close(wb[i, :T, :n], wa[0], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("attention, style", STYLES)
def test_greedy_matches_teacher_forcing(attention, style):
    """Feeding greedy's own outputs back with teacher forcing gives the same argmax."""
    task = ReversalTask(lengths=(2, 6))
    model = _model(task, attention, style).eval()
    b = task.batch(3, lengths=5, seed=2)
    ids, w = model.greedy(b.src, b.src_lengths, max_len=6)
    tgt_in = torch.cat([torch.full((3, 1), Vocab.bos_id), ids[:, :-1]], dim=1)
    logits, wt = model(b.src, tgt_in.clamp(min=0), b.src_lengths)
    alive = torch.ones_like(ids, dtype=torch.bool)
    for t in range(1, ids.shape[1]):  # steps after <eos> are padding
        alive[:, t] = alive[:, t - 1] & (ids[:, t - 1] != Vocab.eos_id)
    assert torch.equal(logits.argmax(-1)[alive], ids[alive])
    if attention:
        torch.testing.assert_close(wt[alive], w[alive])


def test_determinism():
    task = ReversalTask(lengths=(2, 6))
    out = []
    for _ in range(2):
        attnlab.seed_everything(3)
        m = _model(task, "additive")
        h = fit(m, task.stream(8, seed=1), steps=3, quiet=True)
        out.append((h.losses, [p.detach().clone() for p in m.parameters()]))
    assert out[0][0] == out[1][0]
    assert all(torch.equal(p, q) for p, q in zip(out[0][1], out[1][1]))


def test_config_errors():
    with pytest.raises(ValueError, match="attention"):
        Seq2SeqConfig(10, 10, attention="cosine")
    with pytest.raises(ValueError, match="style"):
        Seq2SeqConfig(10, 10, style="vaswani")
    with pytest.raises(ValueError, match="d_hidden"):
        Seq2SeqConfig(10, 10, d_hidden=0)
    model = _model(ReversalTask(), "dot")
    with pytest.raises(ValueError, match="src_lengths"):
        model(
            torch.ones(2, 3, dtype=torch.long),
            torch.ones(2, 2, dtype=torch.long),
            torch.tensor([3, 4]),
        )
    with pytest.warns(DeprecationWarning, match="0.1 order"):  # still works
        model(
            torch.ones(2, 3, dtype=torch.long),
            torch.tensor([3, 2]),
            torch.ones(2, 2, dtype=torch.long),
        )
    with pytest.raises(ValueError, match="tgt_in holds the id 99"):
        model(torch.ones(2, 3, dtype=torch.long), torch.full((2, 2), 99))
    step = model.step(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="prefix holds the id 99, outside"):
        step(torch.full((2, 1), 99))  # not an IndexError from the embedding
    with pytest.raises(ValueError, match=r"src must have 2 dimension"):
        model.greedy(torch.ones(3, dtype=torch.long), torch.tensor([3]))


def test_translate_returns_alignment():
    task = ReversalTask(lengths=(2, 6))
    model = _model(task, "additive")
    r = model.translate(task, "abc")
    assert r["src"] == ["a", "b", "c"] and r["target"] == ["c", "b", "a"]
    assert r["weights"].shape[1] == 3 and r["weights"].shape[0] >= 1
    assert r["correct"] == (r["out"] == ["c", "b", "a"])


# The chapter's budget, copied from chapters/01_seq2seq.ipynb: keep them in step.
CHAPTER = dict(steps=300, lr=2e-2, schedule="cosine", batch_size=64)


@pytest.mark.slow
def test_attention_beats_fixed_context_on_long_inputs():
    task = ReversalTask(lengths=(3, 24), distinct=True)
    acc = {}
    for attention in (None, "dot"):
        attnlab.seed_everything(0)
        cfg = Seq2SeqConfig(
            len(task.src_vocab),
            len(task.tgt_vocab),
            d_emb=16,
            d_hidden=32,
            attention=attention,
            style="luong",
        )
        model = Seq2Seq(cfg)
        stream = task.stream(CHAPTER["batch_size"], seed=0, bucket=True)
        fit(
            model,
            stream,
            steps=CHAPTER["steps"],
            lr=CHAPTER["lr"],
            schedule=CHAPTER["schedule"],
            quiet=True,
        )
        acc[attention] = accuracy_by_length(model, task, [18, 21, 24], n=50)
    long_attn = sum(acc["dot"].values()) / 3
    long_none = sum(acc[None].values()) / 3
    assert long_attn >= 0.6, acc
    assert long_none <= 0.1, acc
    assert min(acc["dot"].values()) > max(acc[None].values()) + 0.5, acc


@pytest.mark.parametrize("attention, style", STYLES[:2])
def test_beam_search_drives_the_stateful_gru_step(attention, style):
    """The GRU step keeps its state between calls and follows beam re-selection:
    beam search with one beam is greedy decoding, and every hypothesis's score is the
    log-probability that teacher forcing gives the same ids."""
    torch.manual_seed(0)
    task = ReversalTask(lengths=(3, 6))
    b = task.batch(1, seed=2)
    model = _model(task, attention, style).eval()
    greedy, _ = model.greedy(b.src, b.src_lengths, max_len=8)
    step = model.step(b.src, b.src_lengths)
    beams = attnlab.beam_search(step, Vocab.bos_id, Vocab.eos_id, 1, 8, alpha=0.0)
    assert beams[0][0] == greedy[0][greedy[0] != Vocab.pad_id].tolist()
    step = model.step(b.src, b.src_lengths)
    hyps = attnlab.beam_search(step, Vocab.bos_id, Vocab.eos_id, 3, 8, alpha=0.0)
    assert len(hyps) == 3
    for ids, score in hyps:
        tgt = torch.tensor([[Vocab.bos_id] + ids])  # (1, t + 1)
        logp = model(b.src, tgt[:, :-1], b.src_lengths)[0].log_softmax(-1)
        want = logp[0].gather(-1, tgt[0, 1:, None]).sum().item()
        assert score == pytest.approx(want, abs=1e-4)


@pytest.mark.parametrize("mapping", ["sparsemax", "entmax15"])
def test_sparse_mapping_gives_exact_zeros_and_rows_on_the_simplex(mapping):
    from attnlab.data import ReversalTask

    task = ReversalTask(lengths=(3, 8), distinct=True)
    V = len(task.src_vocab)
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(V, V, attention="dot", style="luong", mapping=mapping)
    model = Seq2Seq(cfg)
    batch = task.batch(6, lengths=(3, 8), seed=0)
    _, w = model(batch.src, batch.tgt_in, batch.src_lengths)  # (B, T, S)
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:2]))
    assert (w[~batch.src_mask[:, None, :].expand_as(w)] == 0).all()  # padding
    # sparse mappings leave exact zeros on real tokens too (softmax never does)
    assert (w[batch.src_mask[:, None, :].expand_as(w)] == 0).any()


def test_unknown_mapping_is_rejected():
    with pytest.raises(ValueError, match="mapping"):
        Seq2SeqConfig(10, 10, mapping="sigmoid")
