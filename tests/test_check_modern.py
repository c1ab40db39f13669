"""Chapter 13 checks pass good answers, fail realistic wrong ones, report stubs."""

from __future__ import annotations

import pytest
import torch
from checkhelp import fails_with

import attnlab

pytestmark = pytest.mark.usefixtures("strict_checks")


def good_ntk(d, base, factor):
    new_base = base * factor ** (d / (d - 2))
    return new_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def test_ntk_frequencies():
    assert attnlab.check.ntk_frequencies(good_ntk)
    fails_with(  # the base times the factor, without the exponent
        attnlab.check.ntk_frequencies,
        lambda d, b, f: (b * f) ** (-torch.arange(0, d, 2, dtype=torch.float64) / d),
        r"base \* factor\^",
    )
    fails_with(  # position interpolation instead of NTK
        attnlab.check.ntk_frequencies,
        lambda d, b, f: b ** (-torch.arange(0, d, 2, dtype=torch.float64) / d) / f,
        r"d=16",
    )
    fails_with(  # d frequencies instead of d/2
        attnlab.check.ntk_frequencies,
        lambda d, b, f: good_ntk(2 * d, b, f),
        r"d=16",
    )
    fails_with(
        attnlab.check.ntk_frequencies,
        lambda d, b, f: attnlab.modern.rope_frequencies(
            d, b, {"type": "ntk", "factor": f}
        )[0],
        r"rope_frequencies",
    )


def good_sink(scores, sink):
    z = sink[None, :, None, None].to(scores.dtype).expand(*scores.shape[:-1], 1)
    both = torch.cat((scores, z), -1)  # (B, H, T, S + 1)
    return torch.softmax(both, -1)[..., :-1]


def test_softmax_with_sink():
    assert attnlab.check.softmax_with_sink(good_sink)
    fails_with(  # the sink ignored
        attnlab.check.softmax_with_sink,
        lambda s, z: torch.softmax(s, -1),
        r"sum to < 1",
    )
    fails_with(  # the sink's column kept
        attnlab.check.softmax_with_sink,
        lambda s, z: torch.softmax(
            torch.cat((s, z[None, :, None, None].expand(*s.shape[:-1], 1)), -1), -1
        ),
        r"random scores",
    )

    def no_max(s, z):  # overflows at x1000
        e = torch.exp(s)
        return e / (e.sum(-1, keepdim=True) + torch.exp(z)[None, :, None, None])

    fails_with(attnlab.check.softmax_with_sink, no_max, r"x 1000")
    fails_with(
        attnlab.check.softmax_with_sink,
        lambda s, z: attnlab.modern.attend(
            s,
            torch.eye(s.shape[-1], dtype=s.dtype).expand(*s.shape[:2], -1, -1),
            torch.eye(s.shape[-1], dtype=s.dtype).expand(*s.shape[:2], -1, -1),
            None,
            scale=1.0,
            sink=z,
        )[1],
        r"attend",
    )


def good_cache(types, g, dh, context, window=None):
    return sum(
        2 * g * dh * (context if t == "full" else min(context, window)) for t in types
    )


def test_kv_cache_numbers():
    assert attnlab.check.kv_cache_numbers(good_cache)
    fails_with(  # the window ignored: every layer full
        attnlab.check.kv_cache_numbers,
        lambda types, g, dh, context, window=None: good_cache(
            ["full"] * len(types), g, dh, context
        ),
        r"min\(context, window\)",
    )
    fails_with(  # the window applied to every layer
        attnlab.check.kv_cache_numbers,
        lambda types, g, dh, context, window=None: good_cache(
            types if window is None else ["sliding"] * len(types),
            g,
            dh,
            context,
            window,
        ),
        r"min\(context, window\)",
    )
    fails_with(  # a sliding layer counted as the full window even for a short context
        attnlab.check.kv_cache_numbers,
        lambda types, g, dh, context, window=None: sum(
            2 * g * dh * (context if t == "full" else window) for t in types
        ),
        r"fewer tokens than the window",
    )
    fails_with(  # keys only
        attnlab.check.kv_cache_numbers,
        lambda *a, **k: good_cache(*a, **k) // 2,
        r"2 x n_kv_heads x d_head",
    )


def test_stubs_report_not_implemented(capsys, monkeypatch):
    monkeypatch.delenv("ATTNLAB_STRICT", raising=False)

    def stub(*a, **k):
        raise NotImplementedError

    for check in (
        attnlab.check.ntk_frequencies,
        attnlab.check.softmax_with_sink,
        attnlab.check.kv_cache_numbers,
    ):
        assert not check(stub)
    assert capsys.readouterr().out.count("not implemented") == 3
