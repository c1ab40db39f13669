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
