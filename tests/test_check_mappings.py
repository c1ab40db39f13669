"""The chapter 3 checks pass the library, fail wrong answers, and wait for stubs."""

from __future__ import annotations

import pytest
import torch

import attnlab
from attnlab.check import CheckFailed


def _tau(x):
    """Sparsemax threshold by the sort formula (Martins & Astudillo, 2016), written out
    here so the check is tested against a reference that is not the library's."""
    zs, _ = x.sort(-1, descending=True)
    cs = zs.cumsum(-1)
    r = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    k = (1 + r * zs > cs).sum(-1, keepdim=True)  # support size (-inf never counts)
    return (cs.gather(-1, k - 1) - 1) / k


def good_sparsemax(x):
    dead = torch.isneginf(x).all(-1, keepdim=True)  # fully masked rows give zeros
    z = torch.where(dead, torch.zeros_like(x), x)
    return (z - _tau(z)).clamp_min(0).masked_fill(dead, 0.0)


def good_vjp(p, g):
    s = (p > 0).to(g.dtype)
    k = s.sum(-1, keepdim=True).clamp_min(1)
    return s * (g - (g * s).sum(-1, keepdim=True) / k)


def naive_sparsemax(x):  # forgets the -inf guard: NaN on a fully masked row
    zs, _ = torch.sort(x, dim=-1, descending=True)
    cs = zs.cumsum(-1) - 1
    r = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    k = (r * zs > cs).sum(-1, keepdim=True)
    return torch.clamp(x - cs.gather(-1, k - 1) / k, min=0)


def stub(*args):
    raise NotImplementedError


CASES = [
    (attnlab.check.sparsemax_sort, good_sparsemax, naive_sparsemax),
]


@pytest.mark.parametrize("check,good,bad", CASES)
def test_check_passes_reference_and_fails_wrong(check, good, bad, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    assert check(good)
    assert "✅" in capsys.readouterr().out
    with pytest.raises(CheckFailed):
        check(bad)
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not check(bad)
    assert "❌" in capsys.readouterr().out


@pytest.mark.parametrize(
    "check",
    [
        attnlab.check.sparsemax_sort,
    ],
)
def test_stub_reports_not_implemented(check, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not check(stub)
    assert "not implemented yet" in capsys.readouterr().out


def test_softmax_is_not_sparsemax(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not attnlab.check.sparsemax_sort(lambda x: attnlab.softmax(x))
    assert "❌" in capsys.readouterr().out


def test_naive_sort_fails_only_on_the_fully_masked_row(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    attnlab.check.sparsemax_sort(naive_sparsemax)
    assert "fully masked" in capsys.readouterr().out


def good_tail(p, k):
    k = min(k, p.shape[-1])
    return p.sum(-1) - (p.topk(k, -1).values.sum(-1) if k else 0)


def good_entmax_vjp(p, g, alpha):
    s = torch.where(p > 0, p.clamp_min(1e-300) ** (2 - alpha), 0.0)
    total = s.sum(-1, keepdim=True)
    g_bar = (s * g).sum(-1, keepdim=True) / torch.where(total > 0, total, 1.0)
    return s * (g - g_bar)


def power_everywhere(p, g, alpha):  # 0 ** 0 = 1 puts alpha = 2 off-support keys in
    s = p ** (2 - alpha)
    return s * (g - (s * g).sum(-1, keepdim=True) / s.sum(-1, keepdim=True))


@pytest.mark.parametrize(
    "check, good, bad",
    [
        ("tail_mass", good_tail, lambda p, k: p.sum(-1) - p[..., :k].sum(-1)),
        ("entmax_vjp", good_entmax_vjp, power_everywhere),
        ("entmax_vjp", good_entmax_vjp, lambda p, g, a: good_vjp(p, g)),
    ],
)
def test_new_checks_pass_reference_and_fail_wrong(
    check, good, bad, monkeypatch, capsys
):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    assert getattr(attnlab.check, check)(good)
    with pytest.raises(attnlab.check.CheckFailed):
        getattr(attnlab.check, check)(bad)


# ------------------------------------------------ every wrong answer gets its own hint
def ascending_sparsemax(x):  # sorts the wrong way round
    zs, _ = x.sort(-1)
    cs = zs.cumsum(-1)
    r = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)
    k = (1 + r * zs > cs).sum(-1, keepdim=True).clamp_min(1)
    return (x - (cs.gather(-1, k - 1) - 1) / k).clamp_min(0)


def off_by_one_sparsemax(x):  # counts the support from 0
    zs, _ = x.sort(-1, descending=True)
    cs = zs.cumsum(-1)
    r = torch.arange(0, x.shape[-1], dtype=x.dtype)
    k = (1 + r * zs > cs).sum(-1, keepdim=True).clamp(1, x.shape[-1])
    return (x - (cs.gather(-1, k - 1) - 1) / k).clamp_min(0)


def first_dim_sparsemax(x):  # works along dim 0
    return (
        good_sparsemax(x.transpose(0, -1)).transpose(0, -1)
        if x.dim() > 1
        else good_sparsemax(x)
    )


def _library_iter(x):  # the library's threshold passes, called directly
    from attnlab.kernels import sparse as K

    out = K.sparsemax_iter(x, -1, "sparsemax")
    return out[0] if out is not None else K.sparsemax_iter(x, -1, "s", max_iter=64)[0]


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda x: attnlab.softmax(x), "that is softmax"),
        (lambda x: attnlab.sparsemax(x), "called attnlab.mappings.sparsemax"),
        (lambda x: attnlab.mappings.sparsemax(x, method="sort"), "called attnlab"),
        (_library_iter, "called attnlab.kernels.sparse.sparsemax_iter"),
        (naive_sparsemax, "a row that is all -inf gets all zeros"),
        (ascending_sparsemax, "sort in decreasing order"),
        (off_by_one_sparsemax, "the support size is off by one"),
        (first_dim_sparsemax, "work along the last dimension"),
        (lambda x: torch.full_like(x, 0.25), "the weights must depend on the scores"),
    ],
    ids=[
        "softmax",
        "library",
        "library-sort",
        "library-iter",
        "nan",
        "ascending",
        "k-1",
        "dim0",
        "const",
    ],
)
def test_sparsemax_names_the_bug(wrong, hint, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.sparsemax_sort(wrong)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (
            lambda p, k: p.sum(-1) - p[..., :k].sum(-1),
            "the k largest entries, not the first k",
        ),
        (lambda p, k: p.topk(min(k, p.shape[-1]), -1).values.sum(-1), "total minus"),
        (lambda p, k: p.sum(-1) - p.topk(k, -1).values.sum(-1), "clamp k"),
        (lambda p, k: p - p, "one number per row"),
    ],
    ids=["first-k", "top-not-tail", "k>n", "shape"],
)
def test_tail_names_the_bug(wrong, hint, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.tail_mass(wrong)


def softmax_for_all(p, g, alpha):  # s = p whatever alpha
    return p * (
        g - (p * g).sum(-1, keepdim=True) / p.sum(-1, keepdim=True).clamp_min(1e-30)
    )


def unguarded_vjp(p, g, alpha):  # 0 / 0 on a row with no support
    s = torch.where(p > 0, p.clamp_min(1e-300) ** (2 - alpha), 0.0)
    return s * (g - (s * g).sum(-1, keepdim=True) / s.sum(-1, keepdim=True))


def by_autograd(p, g, alpha):  # recomputes the forward with the library: not written
    x = torch.where(p > 0, p.log(), torch.full_like(p, -1e3)).requires_grad_()
    (attnlab.entmax_bisect(x, alpha) * g).sum().backward()
    return x.grad


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (power_everywhere, "u must be 0 off the support"),
        (softmax_for_all, "u = p is softmax's case only"),
        (
            lambda p, g, a: torch.where(p > 0, p ** (2 - a), 0.0) * g,
            "subtract the u-weighted mean",
        ),
        (by_autograd, "called attnlab.mappings.entmax_bisect"),
        (unguarded_vjp, "guard the division"),
    ],
    ids=["0^0", "softmax-s", "no-mean", "autograd", "nan"],
)
def test_vjp_names_the_bug(wrong, hint, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.entmax_vjp(wrong)


# ------------------------------------------------------------------ fusedmax_vjp
def _per_group(v, groups, reduce):
    out = torch.empty_like(v)
    for gid in groups.unique():
        on = groups == gid
        out[on] = reduce(v[on])
    return out


def good_fusedmax_vjp(p, groups, g):  # the chapter's solution
    return _per_group(good_vjp(p, g), groups, torch.mean)


def by_fusedmax_autograd(p, groups, g):  # rebuilds scores, backprops the library
    x = torch.where(p > 0, p, torch.full_like(p, -1.0)).requires_grad_()
    (attnlab.fusedmax(x, lam=0.0) * g).sum().backward()
    return x.grad


def test_fusedmax_vjp_passes_the_solution(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    assert attnlab.check.fusedmax_vjp(good_fusedmax_vjp)
    assert "✅" in capsys.readouterr().out


def test_fusedmax_vjp_solution_gradchecks():
    """The exercise's autograd.Function (prox, then sparsemax; the answer as backward)
    passes gradcheck: the reference is not only the library's own backward."""
    from attnlab.kernels.tv1d import prox_tv1d

    class Fused(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, lam):
            y, groups = prox_tv1d(x.detach().numpy(), lam)
            p = attnlab.sparsemax(torch.from_numpy(y))
            ctx.save_for_backward(p, torch.from_numpy(groups))
            return p

        @staticmethod
        def backward(ctx, g):
            p, groups = ctx.saved_tensors
            return good_fusedmax_vjp(p, groups, g), None

    x = torch.tensor([0.1, 1.0, 1.3, 0.8, 1.1, 0.2, -0.4, 0.3], dtype=torch.float64)
    assert torch.autograd.gradcheck(
        lambda t: Fused.apply(t, 0.3), (x.requires_grad_(),)
    )


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda p, groups, g: good_vjp(p, g), "that is sparsemax's backward"),
        (
            lambda p, groups, g: _per_group(good_vjp(p, g), groups, torch.sum),
            "summing over a group counts it",
        ),
        (
            lambda p, groups, g: _per_group(g, groups, torch.mean),
            "add sparsemax's Jacobian",
        ),
        (
            lambda p, groups, g: _per_group(g, groups, torch.mean) * (p > 0),
            "add sparsemax's Jacobian",
        ),
        (
            lambda p, groups, g: _per_group(
                p * (g - (p * g).sum() / p.sum()), groups, torch.mean
            ),
            "support indicator",
        ),
        (by_fusedmax_autograd, "called attnlab.mappings.fusedmax"),
        (lambda p, groups, g: torch.full_like(g, 0.1), "must depend on p"),
    ],
    ids=["no-groups", "group-sum", "no-sparsemax", "support-only", "u=p", "lib", "c"],
)
def test_fusedmax_vjp_names_the_bug(wrong, hint, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.fusedmax_vjp(wrong)


def test_fusedmax_vjp_stub(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not attnlab.check.fusedmax_vjp(stub)
    assert "not implemented yet" in capsys.readouterr().out
