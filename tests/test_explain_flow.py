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
