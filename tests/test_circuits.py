"""attnlab.circuits: the repeated-token task, the head detector's scores, the model."""

from __future__ import annotations

import pytest
import torch

from attnlab.circuits import (
    AttentionOnly,
    InductionConfig,
    copy_losses,
    head_scores,
    pattern_mask,
    phase_change_step,
    repeated_tokens,
    split_of,
    train_induction,
)


def test_pattern_masks_on_a_hand_example():
    ids = torch.tensor([[0, 5, 7, 5, 7, 9]])
    prev = pattern_mask(ids, "previous")[0]
    assert prev.nonzero().tolist() == [[1, 0], [2, 1], [3, 2], [4, 3], [5, 4]]
    ind = pattern_mask(ids, "induction")[0]
    # query 3 (token 5) saw 5 at position 1: look at what followed, position 2;
    # query 4 (token 7) saw 7 at position 2: position 3. Token 9 is new.
    assert ind.nonzero().tolist() == [[3, 2], [4, 3]]


def test_head_scores_match_the_detector_formula():
    ids = torch.tensor([[0, 5, 7, 5, 7, 9], [0, 3, 3, 3, 4, 1]])
    g = torch.Generator().manual_seed(0)
    w = torch.softmax(torch.randn(3, 2, 4, 6, 6, generator=g), -1)  # (L, B, H, T, T)
    w = w * torch.ones(6, 6).tril()  # causal, rows renormalised
    w = w / w.sum(-1, keepdim=True)
    for kind in ("previous", "induction"):
        got = head_scores(w, ids, kind)  # (L, H)
        want = torch.zeros(3, 4, dtype=torch.float64)
        for b in range(2):  # the detector's loop: one sequence, one head at a time
            pat = pattern_mask(ids[b : b + 1], kind)[0].double()
            for layer in range(3):
                for h in range(4):
                    a = w[layer, b, h].double()
                    want[layer, h] += (a * pat).sum() / a.sum() / 2
        torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=0)
    perfect = torch.zeros(1, 1, 6, 6)  # an exact previous-token head
    perfect[0, 0, 0, 0] = 1
    perfect[0, 0, torch.arange(1, 6), torch.arange(5)] = 1
    assert float(head_scores(perfect, ids[:1], "previous")) == pytest.approx(5 / 6)
    # here the token after the earlier copy is also the previous token (copy length
    # 2): two of the six rows hit the induction pattern too
    assert float(head_scores(perfect, ids[:1], "induction")) == pytest.approx(2 / 6)
    # [0, 3, 3, 3, 4, 1]: query 3 follows the 3 at position 1 to key 2, its previous
    assert float(head_scores(perfect, ids[1:], "induction")) == pytest.approx(1 / 6)


def test_repeated_tokens():
    ids, n = repeated_tokens(50, 8, 20, torch.Generator().manual_seed(0))
    assert ids.shape == (50, 17) and (ids[:, 0] == 0).all()
    assert int(n.min()) >= 4 and int(n.max()) <= 8 and len(set(n.tolist())) > 1
    for row, k in zip(ids, n.tolist()):
        assert row[1 : 1 + k].tolist() == row[1 + k : 1 + 2 * k].tolist()
        assert int(row[1:].min()) >= 1 and int(row.max()) < 20
    g = torch.Generator().manual_seed(3)
    tr, n_tr = repeated_tokens(300, 8, 20, g, split="train")
    te, n_te = repeated_tokens(40, 8, 20, g, split="test")
    assert tr.shape == (300, 17) and te.shape == (40, 17)
    assert set(split_of(tr, n_tr)) == {"train"} and set(split_of(te, n_te)) == {"test"}
    firsts = {tuple(r[1 : 1 + k].tolist()) for r, k in zip(tr, n_tr.tolist())}
    assert not firsts & {
        tuple(r[1 : 1 + k].tolist()) for r, k in zip(te, n_te.tolist())
    }
    with pytest.raises(ValueError, match="split"):
        repeated_tokens(2, 8, 20, split="valid")
    with pytest.raises(ValueError, match="min_half"):
        repeated_tokens(2, 8, 20, min_half=9)
    with pytest.raises(TypeError, match="half"):
        repeated_tokens(2, 8.0, 20)


def test_copy_losses_of_a_perfect_copier():
    ids, n = repeated_tokens(4, 6, 10, torch.Generator().manual_seed(1))
    logits = torch.full((4, 13, 10), -30.0)
    logits[:, :-1].scatter_(2, ids[:, 1:, None], 30.0)  # predicts every next token
    first, second = copy_losses(logits, ids, n)
    assert first < 1e-6 and second < 1e-6
    first, second = copy_losses(torch.zeros(4, 13, 10), ids, n)
    assert first == pytest.approx(torch.log(torch.tensor(10.0)).item(), abs=1e-5)
    with pytest.raises(ValueError, match="copy lengths"):
        copy_losses(logits, ids, n + 10)


def test_model_is_causal_and_refuses_bad_ids():
    torch.manual_seed(0)
    model = AttentionOnly(InductionConfig(vocab_size=10, half=4, d_model=16)).eval()
    ids = torch.randint(1, 10, (2, 9))
    other = ids.clone()
    other[:, 5:] = (other[:, 5:] % 9) + 1  # change the future
    torch.testing.assert_close(model(ids)[:, :5], model(other)[:, :5])
    w = model.attention()  # (L, B, H, T, T)
    assert w.shape == (2, 2, 4, 9, 9)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 4, 9))
    assert float(w.triu(1).abs().max()) == 0
    with pytest.raises(ValueError, match="positions"):
        model(torch.zeros(1, 10, dtype=torch.long))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(torch.full((1, 3), 10))
    with pytest.raises(TypeError, match="long"):
        model(torch.zeros(1, 3))


def test_training_history_and_phase_change():
    cfg = InductionConfig(vocab_size=10, half=4, d_model=16, steps=4, eval_every=2)
    model, hist = train_induction(cfg, seed=0)
    assert hist["step"] == [0, 2, 4]
    assert torch.tensor(hist["induction"]).shape == (3, 2, 4)
    assert phase_change_step([0, 50, 100], [3.0, 3.0, 3.0], [3.0, 1.6, 1.4]) == 100
    assert phase_change_step([0, 50], [3.0, 3.0], [3.0, 2.0]) is None


def test_chapter_widgets_ablation_losses_and_head_pattern():
    import matplotlib

    matplotlib.use("Agg")
    from attnlab.course.ch12_circuits.widgets import ablation_losses, head_pattern

    torch.manual_seed(0)
    model = AttentionOnly(InductionConfig(vocab_size=10, half=4, d_model=16)).eval()
    ids, n = repeated_tokens(6, 4, 10, torch.Generator().manual_seed(0))
    got = ablation_losses(model, ids, n)  # (L, H, 2)
    Dh = 4
    for layer, h in ((0, 1), (1, 3)):
        w = model.blocks[layer].attn.w_o.weight
        saved = w.detach().clone()
        with torch.no_grad():
            w[:, h * Dh : (h + 1) * Dh] = 0
            want = copy_losses(model(ids), ids, n)
            w.copy_(saved)
        assert got[layer, h].tolist() == pytest.approx(list(want), abs=1e-5)
    out = head_pattern(model, ids[:1], 1, 2, show=False)
    assert 0 <= out["induction"] <= 1 and 0 <= out["previous"] <= 1
    with pytest.raises(ValueError, match="one sequence"):
        head_pattern(model, ids, 1, 2, show=False)
    with pytest.raises(ValueError, match="layer, head"):
        head_pattern(model, ids[:1], 2, 0, show=False)
