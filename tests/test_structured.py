"""attnlab.structured: CRF marginals vs enumeration and torch-struct; hard attention."""

from __future__ import annotations

import warnings

import pytest
import torch

import attnlab
from attnlab import structured as S
from attnlab.attention import attend
from attnlab.data import DateTask
from attnlab.seq2seq import MAPPINGS, Seq2Seq, Seq2SeqConfig
from attnlab.train import token_loss

F64 = dict(dtype=torch.float64)
INF = float("-inf")


def brute_marginals(u, A):
    configs, logp = S.enumerate_linear_chain(u, A)  # (K, n), (B, K)
    onehot = torch.nn.functional.one_hot(configs, u.shape[-1]).to(u.dtype)  # (K, n, C)
    return torch.einsum("bk,knc->bnc", logp.exp(), onehot)


def brute_log_z(u, A):
    """log Z by summing exp(score) of every labelling, written independently."""
    B, n, C = u.shape
    grids = torch.meshgrid(*[torch.arange(C)] * n, indexing="ij")
    z = torch.stack([g.flatten() for g in grids], -1)  # (K, n)
    score = sum(u[:, i, z[:, i]] for i in range(n))  # (B, K)
    for i in range(1, n):
        score = score + A[z[:, i - 1], z[:, i]]
    return torch.logsumexp(score, -1)


SHAPES = [(1, 1, 1), (2, 1, 3), (3, 5, 2), (2, 4, 3), (1, 7, 2), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES)
def test_marginals_match_enumeration(shape):
    u, A = torch.randn(*shape, **F64), torch.randn(shape[-1], shape[-1], **F64)
    m = S.linear_chain_marginals(u, A)
    assert m.shape == shape
    torch.testing.assert_close(m, brute_marginals(u, A), atol=1e-12, rtol=0)
    torch.testing.assert_close(m.sum(-1), torch.ones(shape[:2], **F64))
    torch.testing.assert_close(
        S.linear_chain_log_partition(u, A), brute_log_z(u, A), atol=1e-12, rtol=0
    )


def test_scores_x1000_are_stable():
    u, A = torch.randn(3, 6, 3, **F64) * 1000, torch.randn(3, 3, **F64) * 1000
    logz = S.linear_chain_log_partition(u, A)
    m = S.linear_chain_marginals(u, A)
    assert torch.isfinite(logz).all() and torch.isfinite(m).all()
    torch.testing.assert_close(logz, brute_log_z(u, A), atol=1e-9, rtol=1e-12)
    torch.testing.assert_close(m, brute_marginals(u, A), atol=1e-9, rtol=0)
    # float32 at x1000: still finite and one-hot where the max-scoring path is clear
    m32 = S.linear_chain_marginals(u.float(), A.float())
    assert torch.isfinite(m32).all()
    torch.testing.assert_close(m32.double(), m, atol=1e-4, rtol=0)


def test_matches_torch_struct():
    ts = pytest.importorskip("torch_struct")
    B, n, C = 4, 7, 3
    u, A = torch.randn(B, n, C, **F64), torch.randn(C, C, **F64)
    # torch-struct scores edges: log_potentials[b, i, c_next, c_prev], unaries folded in
    edge = (A.T[None, None] + u[:, 1:, :, None]).clone()  # (B, n-1, C, C)
    edge[:, 0] = edge[:, 0] + u[:, 0, None, :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist = ts.LinearChainCRF(edge)
        edge_marg, logz = dist.marginals.detach(), dist.partition.detach()
    node = torch.cat([edge_marg[:, :1].sum(-2), edge_marg.sum(-1)], dim=1)  # (B, n, C)
    torch.testing.assert_close(S.linear_chain_marginals(u, A), node, atol=1e-12, rtol=0)
    torch.testing.assert_close(
        S.linear_chain_log_partition(u, A), logz, atol=1e-12, rtol=0
    )


@pytest.mark.parametrize("shape", [(2, 4, 2), (1, 3, 3), (2, 1, 2)])
def test_gradcheck_marginals(shape):
    """Marginals are differentiable (double backward) w.r.t. unary and transition."""
    u = torch.randn(*shape, **F64, requires_grad=True)
    A = torch.randn(shape[-1], shape[-1], **F64, requires_grad=True)
    assert torch.autograd.gradcheck(S.linear_chain_marginals, (u, A))
    assert torch.autograd.gradgradcheck(S.linear_chain_log_partition, (u, A))


def test_gradcheck_segmentation():
    x = torch.randn(2, 3, 5, **F64, requires_grad=True)
    A = torch.randn(2, 2, **F64, requires_grad=True)
    assert torch.autograd.gradcheck(S.segmentation_marginals, (x, A))
    assert torch.autograd.gradcheck(
        lambda x, A: S.segmentation_marginals(x, A, 1), (x, A)
    )


def test_mask_removes_positions_from_the_chain():
    u, A = torch.randn(2, 6, 3, **F64), torch.randn(3, 3, **F64)
    mask = torch.tensor([[1, 0, 1, 1, 0, 1], [0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    m = S.linear_chain_marginals(u, A, mask)
    for b in range(2):
        keep = mask[b]
        ref = S.linear_chain_marginals(u[b : b + 1, keep], A)
        torch.testing.assert_close(m[b : b + 1, keep], ref)
        assert (m[b, ~keep] == 0).all()


def test_fully_masked_rows_give_zeros_never_nan():
    u = torch.randn(2, 4, 2, **F64, requires_grad=True)
    A = torch.randn(2, 2, **F64, requires_grad=True)
    mask = torch.tensor([[True] * 4, [False] * 4])
    m = S.linear_chain_marginals(u, A, mask)
    assert (m[1] == 0).all() and torch.isfinite(m).all()
    m.sum().backward()
    assert torch.isfinite(u.grad).all() and torch.isfinite(A.grad).all()
    x = torch.tensor([[0.3, INF, 1.0], [INF, INF, INF]], **F64, requires_grad=True)
    w = S.segmentation_marginals(x, torch.eye(2, **F64))
    assert (w[1] == 0).all() and w[0, 1] == 0 and torch.isfinite(w).all()
    w.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_segmentation_is_sigmoid_without_transitions_and_spans_with_them():
    x = torch.randn(4, 8, **F64)
    torch.testing.assert_close(
        S.segmentation_marginals(x, torch.zeros(2, 2, **F64)), x.sigmoid()
    )
    # a gap inside a span: independent weights drop it, agreeing neighbours fill it
    gap = torch.tensor([2.0, -0.5, 2.0, -3.0, -3.0], **F64)
    agree = torch.tensor([[1.5, -1.5], [-1.5, 1.5]], **F64)
    assert S.segmentation_marginals(gap, torch.zeros(2, 2, **F64))[1] < 0.5
    w = S.segmentation_marginals(gap, agree)
    assert w[1] > 0.5 and (w[3:] < 0.5).all()
    assert w.sum() > 1.5  # not on the simplex


def test_segmentation_attention_module_trains_its_transition():
    layer = S.SegmentationAttention(init=1.0)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    out, w = attend(q, k, k, mapping=layer)
    assert out.shape == (2, 3, 4) and w.shape == (2, 3, 5)
    out.square().sum().backward()
    assert layer.transition.grad is not None and layer.transition.grad.abs().sum() > 0
    norm = S.SegmentationAttention(normalize=True)
    torch.testing.assert_close(
        norm(torch.randn(3, 6)).sum(-1), torch.ones(3), atol=1e-5, rtol=0
    )


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: S.linear_chain_marginals(torch.randn(4, 3), torch.randn(3, 3)),
            r"\(4, 3\)",
        ),
        (
            lambda: S.linear_chain_marginals(torch.randn(2, 4, 3), torch.randn(2, 2)),
            r"\(2, 2\)",
        ),
        (
            lambda: S.linear_chain_marginals(torch.randn(2, 0, 3), torch.randn(3, 3)),
            "n, C >= 1",
        ),
        (
            lambda: S.linear_chain_log_partition(
                torch.randn(2, 4, 2),
                torch.randn(2, 2),
                torch.ones(2, 3, dtype=torch.bool),
            ),
            r"\(2, 3\)",
        ),
        (
            lambda: S.linear_chain_marginals(
                torch.full((1, 2, 2), float("nan")), torch.zeros(2, 2)
            ),
            "NaN",
        ),
        (
            lambda: S.segmentation_marginals(torch.randn(3), torch.zeros(3, 3)),
            r"\(3, 3\)",
        ),
        (lambda: S.GumbelSoftmax(tau=0.0), "tau"),
        (lambda: S.get_mapping("hardmax"), "hardmax"),
    ],
)
def test_bad_input_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_dtype_type_errors():
    with pytest.raises(TypeError, match="floating"):
        S.linear_chain_marginals(
            torch.ones(1, 2, 2, dtype=torch.long), torch.zeros(2, 2)
        )
    with pytest.raises(TypeError, match="dtypes differ"):
        S.linear_chain_marginals(torch.ones(1, 2, 2), torch.zeros(2, 2, **F64))


def test_a_list_mask_is_a_type_error_naming_it():
    # found writing the Raises section: was AttributeError 'list' ... 'dtype'
    with pytest.raises(TypeError, match="mask must be a torch.Tensor"):
        S.linear_chain_marginals(torch.ones(1, 2, 2), torch.zeros(2, 2), [[True] * 2])


# ------------------------------------------------------------------ hard attention
def test_gumbel_straight_through_is_one_hot_and_has_gradient():
    g = S.GumbelSoftmax(tau=0.5)
    x = torch.randn(64, 7, requires_grad=True)
    w = g(x)
    assert ((w == 0) | (w == 1)).all() and (w.sum(-1) == 1).all()
    (w * torch.randn(7)).sum().backward()
    assert x.grad.abs().sum() > 0  # straight-through: the relaxed sample's gradient
    g.eval()
    assert torch.equal(g(x), attnlab.argmax(x))


def test_gumbel_samples_follow_softmax():
    torch.manual_seed(0)
    x = torch.tensor([1.0, 0.0, -1.0, 0.5]).expand(20000, 4)
    freq = S.GumbelSoftmax()(x).mean(0)
    torch.testing.assert_close(freq, torch.softmax(x[0], -1), atol=0.015, rtol=0)


@pytest.mark.parametrize("mapping", [S.GumbelSoftmax(), S.ReinforceSample()])
def test_hard_mappings_with_masks(mapping):
    x = torch.tensor([[0.2, INF, 0.4, INF], [INF, INF, INF, INF], [1e3, -1e3, 0, 5]])
    x.requires_grad_()
    w = mapping(x)
    assert torch.isfinite(w).all() and (w[1] == 0).all() and (w[0, [1, 3]] == 0).all()
    assert (w[[0, 2]].sum(-1) == 1).all() and w[2, 0] == 1
    if isinstance(mapping, S.ReinforceSample):
        loss = mapping.surrogate(torch.randn(3))
    else:
        loss = (w * torch.arange(4.0)).sum()
    loss.backward()
    assert torch.isfinite(x.grad).all()


def test_hard_mappings_in_attend_with_length_one_and_masks():
    q, k = torch.randn(2, 3, 4), torch.randn(2, 1, 4)
    for m in (S.GumbelSoftmax(), S.ReinforceSample(), S.SegmentationAttention()):
        out, w = attend(q, k, k, mapping=m)
        assert out.shape == (2, 3, 4) and torch.isfinite(out).all()
    mask = torch.tensor([[True, False, True], [False, False, False]])[:, None, :]
    k = torch.randn(2, 3, 4)
    for m in (S.GumbelSoftmax(), S.ReinforceSample(), S.SegmentationAttention()):
        out, w = attend(q, k, k, mapping=m, mask=mask)
        assert (w[1] == 0).all() and (out[1] == 0).all() and (w[0, :, 1] == 0).all()


def test_reinforce_surrogate_is_unbiased():
    """The mean REINFORCE gradient approaches ∇ E[r] = p (r - p.r)."""
    torch.manual_seed(0)
    theta = torch.tensor([0.5, -0.3, 1.2, 0.0], **F64)
    r = torch.tensor([1.0, 0.0, 2.0, -1.0], **F64)
    x = theta.expand(50000, 4).clone().requires_grad_()
    m = S.ReinforceSample(momentum=0.0, entropy_bonus=0.0)
    w = m(x)
    reward = (w * r).sum(-1)  # (N,)
    m.baseline.fill_(0.5)
    m.initialised.fill_(True)
    (m.surrogate(reward) * x.shape[0]).backward()
    p = theta.softmax(-1)
    exact = p * (r - (p * r).sum())
    torch.testing.assert_close(-x.grad.mean(0), exact, atol=0.01, rtol=0)
    assert abs(float(m.baseline) - float((p * r).sum())) < 0.02  # momentum 0: the mean


def test_reinforce_surrogate_shape_error_and_order():
    m = S.ReinforceSample()
    with pytest.raises(RuntimeError, match="forward first"):
        m.surrogate(torch.zeros(3))
    m(torch.randn(3, 2, 5))
    with pytest.raises(ValueError, match=r"\(3, 2\)"):
        m.surrogate(torch.zeros(4))


@pytest.mark.parametrize("name", S.MAPPING_NAMES)
def test_get_mapping_builds_every_mapping(name):
    w = S.get_mapping(name)(torch.randn(3, 6))
    assert w.shape == (3, 6) and torch.isfinite(w).all()


# ------------------------------------------------------------------ seq2seq option
@pytest.mark.parametrize("mapping", MAPPINGS)
def test_seq2seq_trains_with_every_mapping(mapping):
    task = DateTask()
    V_s, V_t = len(task.src_vocab), len(task.tgt_vocab)
    cfg = Seq2SeqConfig(
        V_s, V_t, d_emb=8, d_hidden=8, attention="dot", style="luong", mapping=mapping
    )
    torch.manual_seed(0)
    model = Seq2Seq(cfg)
    batch = task.batch(8, seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def loss_of(model):
        logits, _ = model(batch.src, batch.tgt_in, batch.src_lengths)
        return token_loss(logits, batch.tgt_out)

    first = None
    for _ in range(5):
        loss = loss_of(model)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss_of(model).item() < first
    model.eval()
    ids, w = model.greedy(batch.src, batch.src_lengths, max_len=12)
    assert w.shape[0] == 8 and torch.isfinite(w).all()
    pad = ~batch.src_mask  # (B, S) padding positions never get weight
    assert (w.masked_select(pad[:, None, :].expand_as(w)) == 0).all()
    if mapping in ("sparsemax", "entmax15", "fusedmax", "gumbel"):
        assert (w == 0).any()  # exact zeros on real tokens too


def test_seq2seq_rejects_unknown_mapping():
    with pytest.raises(ValueError, match="mapping must be one of"):
        Seq2SeqConfig(10, 10, mapping="reinforce")  # a mapping, but not for seq2seq
