"""Tests for attnlab.mappings: exactness, gradients, masks, dtypes, devices."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd import gradcheck

import attnlab
from attnlab import mappings as M
from attnlab.kernels import sparse as K
from attnlab.kernels.tv1d import prox_tv1d, tv1d_optimality_gap


@pytest.fixture(scope="module")
def entmax():
    """The reference package; only the comparison tests need it (and skip without)."""
    return pytest.importorskip("entmax")


SIMPLEX = {
    "softmax": M.softmax,
    "sparsemax": M.sparsemax,
    "entmax15": M.entmax15,
    "entmax_bisect": M.entmax_bisect,
    "fusedmax": M.fusedmax,
}
SPARSE = ["sparsemax", "entmax15", "entmax_bisect", "fusedmax"]


def _scores(shape, scale=2.0, dtype=torch.float64, device="cpu"):
    return (torch.randn(shape, dtype=torch.float64) * scale).to(device, dtype)


# ---------------------------------------------------------------- simplex, masks
@pytest.mark.parametrize("name", list(SIMPLEX))
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_on_simplex_any_dim(name, dim, device):
    x = _scores((3, 7, 5), device=device)
    p = SIMPLEX[name](x, dim=dim)
    assert p.shape == x.shape and p.device == x.device
    assert (p >= 0).all()
    torch.testing.assert_close(p.sum(dim), torch.ones_like(p.sum(dim)))


@pytest.mark.parametrize("name", list(SIMPLEX))
def test_masks_and_fully_masked_rows_forward_backward(name, device):
    x = _scores((4, 6), device=device)
    x[0, 1:4] = float("-inf")  # partly masked
    x[2] = float("-inf")  # fully masked
    x.requires_grad_(True)
    p = SIMPLEX[name](x)
    assert torch.isfinite(p).all()
    assert (p[0, 1:4] == 0).all()
    assert (p[2] == 0).all()
    torch.testing.assert_close(
        p[[0, 1, 3]].sum(-1), torch.ones(3, dtype=p.dtype, device=device)
    )
    (p * torch.randn_like(p)).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert (x.grad[2] == 0).all() and (x.grad[0, 1:4] == 0).all()


@pytest.mark.parametrize("name", list(SIMPLEX))
def test_length_one(name, device):
    x = torch.tensor([[3.0], [-1e4]], device=device, requires_grad=True)
    p = SIMPLEX[name](x)
    torch.testing.assert_close(p, torch.ones_like(p))
    p.sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("name", list(SIMPLEX))
def test_huge_logits_are_finite_and_one_hot(name, device):
    x = (torch.tensor([[1.0, 3.0, 2.0, -1.0]], device=device) * 1000).requires_grad_()
    p = SIMPLEX[name](x)
    assert torch.isfinite(p).all()
    torch.testing.assert_close(p, torch.tensor([[0.0, 1.0, 0.0, 0.0]], device=device))
    (p * torch.arange(4.0, device=device)).sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("name", SPARSE)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_plus_inf_raise(name, bad):
    x = torch.randn(2, 5)
    x[1, 2] = bad
    with attnlab.debug(), pytest.raises(ValueError, match="NaN or \\+inf"):
        SIMPLEX[name](x)
    assert not attnlab.debugging()  # the block switched the scans back off


def test_bad_arguments_raise():
    with pytest.raises(TypeError):
        M.sparsemax([1.0, 2.0])
    with pytest.raises(TypeError):
        M.entmax15(torch.arange(4))
    with pytest.raises(ValueError, match="out of range"):
        M.sparsemax(torch.randn(3), dim=1)
    for alpha in (0.0, -1.0, float("nan"), float("inf")):  # alpha in (0, inf) only
        with pytest.raises(ValueError, match="alpha must be finite and > 0"):
            M.entmax_bisect(torch.randn(3), alpha=alpha)
    with pytest.raises(ValueError, match="broadcast"):
        M.entmax_bisect(torch.randn(2, 3), alpha=torch.full((3,), 1.5))
    with pytest.raises(ValueError, match="lam"):
        M.fusedmax(torch.randn(3), lam=-1.0)
    with pytest.raises(ValueError, match="method"):
        M.sparsemax(torch.randn(3), method="bogus")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", list(SIMPLEX))
def test_half_precision_upcast(name, dtype, device):
    x = _scores((5, 9), device=device)
    x[1, :3] = float("-inf")
    p = SIMPLEX[name](x.to(dtype))
    assert p.dtype == dtype and torch.isfinite(p).all()
    ref = SIMPLEX[name](x.float())
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    torch.testing.assert_close(p.float(), ref, atol=tol, rtol=0)


# ------------------------------------------------------- against the entmax package
def _with_inf(x, frac=0.3):
    x = x.clone()
    x[torch.rand(x.shape) < frac] = float("-inf")
    x[..., 0] = x[..., 0].clamp_min(-5)  # keep every row alive
    return x


@pytest.fixture
def always_iter(monkeypatch):
    """Small inputs go to the sort; this makes ``method="iter"`` iterate at any size."""
    from attnlab.mappings import sparse as S

    monkeypatch.setattr(S, "SMALL_ROW", 0)
    monkeypatch.setattr(S, "SMALL_NUMEL", 0)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000])
@pytest.mark.parametrize("method", ["topk", "iter", "sort"])
def test_agree_with_entmax_package(n, method, entmax, always_iter):
    for scale in (0.05, 1.0, 20.0):
        x = _with_inf(_scores((50, n), scale=scale))
        torch.testing.assert_close(
            M.sparsemax(x, method=method), entmax.sparsemax(x), atol=1e-12, rtol=0
        )
        torch.testing.assert_close(
            M.entmax15(x, method=method), entmax.entmax15(x), atol=1e-12, rtol=0
        )
    x = _scores((50, n))
    torch.testing.assert_close(
        M.entmax_bisect(x, 1.3),
        entmax.entmax_bisect(x, 1.3, n_iter=80),
        atol=1e-10,
        rtol=0,
    )


def test_float32_exact_to_1e6_at_n1024(entmax):
    x = torch.randn(256, 1024)
    for ours, ref in [(M.sparsemax, entmax.sparsemax), (M.entmax15, entmax.entmax15)]:
        assert (ours(x) - ref(x)).abs().max() < 1e-6
        assert (ours(x) - ours(x.double())).abs().max() < 1e-6


@pytest.mark.parametrize("method", ["topk", "iter", "sort"])
def test_gradients_agree_with_entmax_package(method, entmax, always_iter):
    x = _with_inf(_scores((20, 30)))
    g = torch.randn(20, 30, dtype=torch.float64)
    for ours, ref in [(M.sparsemax, entmax.sparsemax), (M.entmax15, entmax.entmax15)]:
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        (ours(a, method=method) * g).sum().backward()
        (ref(b) * g).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, atol=1e-12, rtol=0)


@pytest.mark.parametrize("method", ["topk", "iter"])
@pytest.mark.parametrize("dim", [-1, 0])
def test_topk_retries_longer_prefixes_exactly(
    monkeypatch, dim, method, entmax, always_iter
):
    monkeypatch.setitem(K.FIRST_K, "sparsemax", 1)  # every live row must retry
    monkeypatch.setitem(K.FIRST_K, "entmax15", 1)
    x = _with_inf(_scores((30, 70), scale=0.1)).movedim(-1, dim).contiguous()
    x.select(dim - 1 if dim == -1 else 1, 4).fill_(float("-inf"))  # one dead row
    for ours, ref in [(M.sparsemax, entmax.sparsemax), (M.entmax15, entmax.entmax15)]:
        got = ours(x, dim=dim, method=method)
        torch.testing.assert_close(got, ours(x, dim=dim, method="sort"))
        live = torch.isfinite(x.amax(dim, keepdim=True)).expand_as(x)
        want = ref(torch.where(live, x, 0.0), dim=dim)  # the package fails on dead rows
        torch.testing.assert_close(got[live], want[live], atol=1e-12, rtol=0)
        assert (got[~live] == 0).all()


@pytest.mark.parametrize("dim", [-1, 1])
def test_iter_unsettled_rows_finish_by_partial_sort(
    monkeypatch, dim, entmax, always_iter
):
    calls = []

    def short(fn):  # one pass can never confirm a support: the fallback must run
        def run(x, d, name):
            out = fn(x, d, name, max_iter=1)
            calls.append(out is None)
            return out

        return run

    monkeypatch.setattr(K, "sparsemax_iter", short(K.sparsemax_iter))
    monkeypatch.setattr(K, "entmax15_iter", short(K.entmax15_iter))
    x = _with_inf(_scores((20, 40))).movedim(-1, dim).contiguous()
    for ours, ref in [(M.sparsemax, entmax.sparsemax), (M.entmax15, entmax.entmax15)]:
        torch.testing.assert_close(
            ours(x, dim=dim), ref(x, dim=dim), atol=1e-12, rtol=0
        )
    assert calls == [True, True]


def test_iter_first_order_backward_equals_double_backward_path(always_iter):
    x = _with_inf(_scores((30, 50)))
    g = torch.randn(30, 50, dtype=torch.float64, requires_grad=True)
    for fn in (M.sparsemax, M.entmax15):
        a = x.clone().requires_grad_()
        (plain,) = torch.autograd.grad(fn(a), a, g)  # the fast first-order path
        (graph,) = torch.autograd.grad(fn(a), a, g, create_graph=True)
        assert graph.requires_grad  # the differentiable path ran
        torch.testing.assert_close(plain, graph.detach(), atol=1e-12, rtol=0)


def test_iter_raises_on_nan_and_inf(always_iter):
    for bad in (float("nan"), float("inf")):
        x = torch.randn(3, 9)
        x[1, 4] = bad
        for fn in (M.sparsemax, M.entmax15):
            with pytest.raises(ValueError, match="NaN or \\+inf"):
                fn(x)


def test_fallback_to_sort_gives_same_threshold():
    z = torch.randn(40, 50, dtype=torch.float64)
    z = (z - z.amax(-1, keepdim=True)).clamp_min(K.FLOOR)
    # max_iter=1 can never confirm convergence: every row takes the sort fallback
    torch.testing.assert_close(
        K.sparsemax_tau_iter(z, -1, max_iter=1), K.sparsemax_tau_sort(z, -1)
    )
    torch.testing.assert_close(
        K.entmax15_tau_iter(z, -1, max_iter=1), K.entmax15_tau_sort(z, -1)
    )


# --------------------------------------------------------------------- gradcheck
@pytest.mark.parametrize(
    "shape,dim", [((6,), -1), ((3, 5), -1), ((4, 3, 5), 1), ((5, 2), 0)]
)
@pytest.mark.parametrize("name", ["sparsemax", "entmax15", "softmax"])
def test_gradcheck(name, shape, dim, always_iter):
    x = _scores(shape).requires_grad_()
    assert gradcheck(lambda t: SIMPLEX[name](t, dim=dim), (x,))
    if name != "softmax":
        assert gradcheck(lambda t: SIMPLEX[name](t, dim=dim, method="iter"), (x,))


@pytest.mark.parametrize("shape,dim", [((6,), -1), ((3, 5), -1), ((4, 3, 5), 1)])
def test_gradcheck_entmax_bisect_scores_and_alpha(shape, dim):
    x = _scores(shape).requires_grad_()
    row = list(shape)
    row[dim] = 1
    alpha = (1.2 + torch.rand(row, dtype=torch.float64)).requires_grad_()
    assert gradcheck(lambda t, a: M.entmax_bisect(t, a, dim=dim), (x, alpha))
    a0 = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)  # scalar alpha
    assert gradcheck(lambda t, a: M.entmax_bisect(t, a, dim=dim), (x, a0))


@pytest.mark.parametrize("shape,dim", [((8,), -1), ((3, 7), -1), ((6, 4), 0)])
@pytest.mark.parametrize("lam", [0.0, 0.1, 0.5])
def test_gradcheck_fusedmax(shape, dim, lam):
    x = _scores(shape).requires_grad_()
    assert gradcheck(lambda t: M.fusedmax(t, lam=lam, dim=dim), (x,))


def test_jacobian_matches_formula():
    x = torch.tensor([2.0, 1.5, 0.1, -1.0], dtype=torch.float64)
    for fn, power in [(M.sparsemax, 0.0), (M.entmax15, 0.5)]:
        p = fn(x)
        s = torch.where(p > 0, p.pow(power), 0)
        want = torch.diag(s) - torch.outer(s, s) / s.sum()
        got = torch.autograd.functional.jacobian(fn, x)
        torch.testing.assert_close(got, want)


# -------------------------------------------------------------------- properties
rows = st.lists(
    st.floats(-50, 50, allow_nan=False, allow_infinity=False), min_size=1, max_size=12
)


@settings(max_examples=60, deadline=None)
@given(rows, st.floats(-100, 100))
def test_property_simplex_and_shift_invariance(vals, c):
    x = torch.tensor(vals, dtype=torch.float64)
    for name in ["softmax", "sparsemax", "entmax15", "entmax_bisect"]:
        p = SIMPLEX[name](x)
        assert (p >= 0).all() and abs(p.sum().item() - 1) < 1e-9
        torch.testing.assert_close(SIMPLEX[name](x + c), p, atol=1e-8, rtol=0)


@settings(max_examples=60, deadline=None)
@given(rows)
def test_property_sort_and_iteration_and_bisection_agree(vals):
    x = torch.tensor(vals, dtype=torch.float64)
    sp = M.sparsemax(x)
    torch.testing.assert_close(sp, M.sparsemax(x, method="sort"), atol=1e-12, rtol=0)
    torch.testing.assert_close(sp, M.sparsemax(x, method="iter"), atol=1e-12, rtol=0)
    torch.testing.assert_close(sp, M.entmax_bisect(x, 2.0), atol=1e-9, rtol=0)
    e15 = M.entmax15(x)
    torch.testing.assert_close(e15, M.entmax15(x, method="sort"), atol=1e-12, rtol=0)
    torch.testing.assert_close(e15, M.entmax15(x, method="iter"), atol=1e-12, rtol=0)
    torch.testing.assert_close(e15, M.entmax_bisect(x, 1.5), atol=1e-9, rtol=0)


@settings(max_examples=40, deadline=None)
@given(rows)
def test_property_alpha_to_one_is_softmax(vals):
    x = torch.tensor(vals, dtype=torch.float64).clamp(-5, 5)
    err = [
        (M.entmax_bisect(x, a) - M.softmax(x)).abs().max().item()
        for a in (1.1, 1.01, 1.001)
    ]
    assert err[2] < 5e-3 and err[2] <= err[0] + 1e-12


@settings(max_examples=40, deadline=None)
@given(rows)
def test_property_temperature_to_zero_is_argmax(vals):
    x = torch.tensor(vals, dtype=torch.float64)
    top = torch.sort(x, descending=True).values
    if len(vals) > 1 and top[0] - top[1] < 1e-3:
        return  # a near tie: argmax is not a limit
    torch.testing.assert_close(M.softmax(x, temperature=1e-6), M.argmax(x))


@settings(max_examples=40, deadline=None)
@given(rows, st.floats(0.0, 3.0))
def test_property_fusedmax(vals, lam):
    x = torch.tensor(vals, dtype=torch.float64)
    p = M.fusedmax(x, lam=lam)
    assert (p >= 0).all() and abs(p.sum().item() - 1) < 1e-9
    y, _ = prox_tv1d(x.numpy(), lam)
    assert tv1d_optimality_gap(y, x.numpy(), lam) < 1e-9
    torch.testing.assert_close(p, M.sparsemax(torch.from_numpy(y)))


def test_fusedmax_lam_zero_is_sparsemax_and_fuses_neighbours():
    x = torch.tensor([0.0, 1.0, 1.2, 0.9, 1.1, 0.0, 0.2])
    torch.testing.assert_close(M.fusedmax(x, lam=0.0), M.sparsemax(x))
    p = M.fusedmax(x, lam=0.5)
    assert torch.allclose(p[1:5], p[1].expand(4)) and p[1] > 0
    assert (p[[0, 5, 6]] == 0).all()


def test_tv1d_is_optimal_on_random_inputs():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        y = rng.normal(size=n) * rng.choice([0.1, 1, 10])
        lam = float(rng.uniform(0, 3))
        x, groups = prox_tv1d(y, lam)
        assert tv1d_optimality_gap(x, y, lam) < 1e-9
        assert (np.diff(groups) >= 0).all()  # groups are contiguous segments


def test_argmax_and_sigmoid():
    x = torch.tensor([[1.0, 5.0, 2.0], [float("-inf")] * 3])
    torch.testing.assert_close(M.argmax(x), torch.tensor([[0.0, 1.0, 0.0], [0.0] * 3]))
    s = M.sigmoid(torch.tensor([0.0, 10.0]))
    assert s[0] == 0.5 and s.sum() > 1  # not on the simplex


def test_modules_and_learnable_alpha():
    x = torch.randn(2, 3, 6)
    torch.testing.assert_close(M.Sparsemax(dim=1)(x), M.sparsemax(x, dim=1))
    torch.testing.assert_close(M.Entmax15()(x), M.entmax15(x))
    torch.testing.assert_close(M.Softmax(temperature=2.0)(x), M.softmax(x / 2))
    torch.testing.assert_close(M.Fusedmax(lam=0.3)(x), M.fusedmax(x, lam=0.3))
    alpha = torch.nn.Parameter(torch.full((2, 1, 1), 1.5))
    layer = M.EntmaxBisect(alpha)
    (layer(x) * torch.randn_like(x)).sum().backward()
    assert alpha.grad is not None and alpha.grad.shape == (2, 1, 1)
    assert torch.isfinite(alpha.grad).all() and alpha.grad.abs().sum() > 0
    assert attnlab.sparsemax is M.sparsemax


def test_sparsemax_jacobian_depends_only_on_support():
    # the seed slides' example: p = [.99, .01, 0] and [.5, .5, 0] share s = [1, 1, 0]
    xa = torch.tensor([1.98, 1.0, -3.0], dtype=torch.float64)
    xb = torch.tensor([1.0, 1.0, -3.0], dtype=torch.float64)
    torch.testing.assert_close(
        M.sparsemax(xa), torch.tensor([0.99, 0.01, 0.0], dtype=torch.float64)
    )
    ja = torch.autograd.functional.jacobian(M.sparsemax, xa)
    jb = torch.autograd.functional.jacobian(M.sparsemax, xb)
    torch.testing.assert_close(ja, jb)
    assert math.isclose(ja[0, 0].item(), 0.5)


def test_topk_retries_in_3d_along_the_middle(monkeypatch):
    monkeypatch.setitem(K.FIRST_K, "sparsemax", 2)
    monkeypatch.setitem(K.FIRST_K, "entmax15", 2)
    x = _scores((3, 40, 5), scale=0.1)
    for fn in (M.sparsemax, M.entmax15):
        torch.testing.assert_close(fn(x, dim=1), fn(x, dim=1, method="sort"))


@pytest.mark.parametrize("method", ["iter", "topk", "sort"])
def test_sparse_mappings_double_backward(method, always_iter):
    x = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    for fn in (M.sparsemax, M.entmax15):
        assert torch.autograd.gradgradcheck(lambda t, f=fn: f(t, method=method), (x,))


def test_warm_start_is_a_lower_bound_and_the_result_exact(entmax):
    x = _with_inf(_scores((40, 1024), scale=3.0))
    x[7] = float("-inf")  # a dead row
    z = x - torch.nan_to_num(x.amax(-1, keepdim=True), neginf=0.0)
    live = torch.isfinite(x.amax(-1))
    zc = z.clamp_min(K.FLOOR)
    exact = {
        K._sparsemax_passes: K.sparsemax_tau_sort(zc, -1),
        K._entmax15_passes: K.entmax15_tau_sort(zc, -1),
    }
    for passes, tau in exact.items():
        y = z if passes is K._sparsemax_passes else z / 2
        start = K._warm_start(y, -1, passes)
        assert (start[live] <= tau[live] + 1e-12).all()
        assert (start[live] >= -1).all() and (start[live] > -1).any()  # a gain
    for ours, ref in [(M.sparsemax, entmax.sparsemax), (M.entmax15, entmax.entmax15)]:
        got = ours(x)
        want = ref(torch.where(live[:, None], x, 0.0))
        torch.testing.assert_close(got[live], want[live], atol=1e-12, rtol=0)
        assert (got[7] == 0).all()
