"""The Triton flash kernels (forward and backward), run on CPU in Triton's interpreter
(n <= 128, one pinned tile configuration: 32 x 16 forward, 16 x 32 backward).

TRITON_INTERPRET must be set before anything imports the kernels (Triton reads it when
``@triton.jit`` decorates them): tests/conftest.py sets it where there is no CUDA,
before any test module is collected (tests/test_contract_scalars.py imports every
attnlab module at collection). Skipped cleanly when triton is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest
import torch
import torch.nn.functional as F

triton = pytest.importorskip("triton")

import attnlab  # noqa: E402
from attnlab import efficient  # noqa: E402
from attnlab.kernels import triton_flash as tf  # noqa: E402
from attnlab.kernels import triton_flash_bwd as bwd  # noqa: E402
from attnlab.kernels import triton_tiles as tiles  # noqa: E402

pytestmark = pytest.mark.skipif(
    not tf.kernels_interpreted() and not torch.cuda.is_available(),
    reason="kernels decorated without TRITON_INTERPRET=1 and no CUDA",
)


def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "T,S,Dh,Dv", [(64, 64, 16, 16), (50, 90, 12, 8), (90, 50, 16, 20), (1, 7, 16, 16)]
)
def test_forward_equals_sdpa(causal, T, S, Dh, Dv):
    g = dict(device=_dev())
    q, k, v = (
        torch.randn(1, 2, T, Dh, **g),
        torch.randn(1, 2, S, Dh, **g),
        torch.randn(1, 2, S, Dv, **g),
    )
    out, lse = tf.triton_flash_forward(q, k, v, is_causal=causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert (out - ref).abs().max() < 2e-5
    scores = (q @ k.transpose(-2, -1)) * Dh**-0.5  # (1, 2, T, S)
    if causal:
        scores = scores.masked_fill(
            ~efficient.band_mask(T, S, None, True, device=q.device), float("-inf")
        )
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs(dtype):
    """bf16 operands of tl.dot are wrong in the interpreter unless cast: the kernel casts."""
    q, k, v = (torch.randn(1, 2, 48, 16, device=_dev()) for _ in range(3))
    out, _ = tf.triton_flash_forward(
        q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True
    )
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.dtype == dtype
    assert (out.float() - ref).abs().max() < 3e-2


def test_flash_attention_dispatches_to_triton_forward_and_backward(monkeypatch):
    """On CUDA flash_attention runs the Triton kernels both ways (GQA and padding too)."""
    calls = []
    real_f, real_b = tf._forward3, tf.backward3

    def spy_f(*a, **kw):
        calls.append("fwd")
        return real_f(*a, **kw)

    def spy_b(*a, **kw):
        calls.append("bwd")
        return real_b(*a, **kw)

    monkeypatch.setattr(efficient.flash, "_triton_usable", lambda q: True)
    monkeypatch.setattr(tf, "_forward3", spy_f)
    monkeypatch.setattr(tf, "backward3", spy_b)
    q = torch.randn(2, 4, 40, 16, device=_dev(), requires_grad=True)
    k, v = (torch.randn(2, 2, 40, 16, device=_dev(), requires_grad=True) for _ in "kv")
    kpm = torch.ones(2, 40, dtype=torch.bool)
    kpm[1, 25:] = False
    out = attnlab.flash_attention(q, k, v, is_causal=True, key_padding_mask=kpm)
    g = torch.randn_like(out)
    ga = torch.autograd.grad(out, (q, k, v), g)
    monkeypatch.setattr(efficient.flash, "_triton_usable", lambda q: False)
    ref = attnlab.flash_attention(q, k, v, is_causal=True, key_padding_mask=kpm)
    gb = torch.autograd.grad(ref, (q, k, v), g)
    assert calls == ["fwd", "bwd"]
    assert (out - ref).abs().max() < 2e-5
    assert max((a - b).abs().max() for a, b in zip(ga, gb)) < 2e-5


def _reference(q, k, v, causal, window, align, kpm, dtype=torch.float64):
    """SDPA with an explicit mask, the shared heads repeated (GQA), in ``dtype``."""
    T, S = q.shape[-2], k.shape[-2]
    g = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(g, -3), v.repeat_interleave(g, -3)
    mask = efficient.band_mask(T, S, window, causal, align=align)  # (T, S)
    if kpm is not None:
        mask = mask & kpm[:, None, None, :]  # (B, 1, T, S)
    q, k, v = (t.to(dtype) for t in (q, k, v))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


# (name, T, S, H, H_kv, causal, window, align, padded)
CASES = [
    ("full", 64, 64, 2, 2, False, None, "top_left", False),
    ("causal", 96, 96, 2, 2, True, None, "top_left", False),
    ("causal T>S", 70, 50, 2, 2, True, None, "top_left", False),
    ("causal T<S bottom-right", 40, 90, 2, 2, True, None, "bottom_right", False),
    ("GQA 4:2 causal", 64, 64, 4, 2, True, None, "top_left", False),
    ("GQA 4:1", 48, 72, 4, 1, False, None, "top_left", False),
    ("padding", 64, 80, 2, 2, False, None, "top_left", True),
    ("padding causal GQA", 72, 72, 4, 2, True, None, "top_left", True),
    ("window 13", 96, 96, 2, 2, False, 13, "top_left", False),
    ("window 9 causal T<S bottom-right", 50, 100, 2, 2, True, 9, "bottom_right", False),
    ("window 20 causal T>S padding", 90, 60, 2, 1, True, 20, "top_left", True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_forward_and_gradients_against_float64_and_sdpa(case):
    """Float32 kernels against float64 (max abs error <= 5e-6) and within 4x float32
    SDPA's own error (plus 1e-6): output and dq, dk, dv."""
    _, T, S, H, Hk, causal, window, align, padded = case
    gen = torch.Generator().manual_seed(T * S + H)
    q, k, v, dout = (
        torch.randn(2, h, n, d, generator=gen, dtype=torch.float64)
        for h, n, d in ((H, T, 16), (Hk, S, 16), (Hk, S, 24), (H, T, 24))
    )
    kpm = None
    if padded:
        kpm = torch.ones(2, S, dtype=torch.bool)
        kpm[1, S // 2 :] = False  # half of the second sequence is padding
    q64, k64, v64 = (t.clone().requires_grad_() for t in (q, k, v))
    ref = _reference(q64, k64, v64, causal, window, align, kpm)
    live = ref.isfinite()  # rows with no key are NaN in SDPA, 0 in ours
    ref_g = torch.autograd.grad(ref, (q64, k64, v64), dout.where(live, 0.0))
    q32, k32, v32 = (t.float().requires_grad_() for t in (q, k, v))
    s32 = _reference(q32, k32, v32, causal, window, align, kpm, torch.float32)
    s32_g = torch.autograd.grad(s32, (q32, k32, v32), dout.float().where(live, 0.0))
    ours = tf.triton_flash_attention(
        q32, k32, v32, is_causal=causal, window=window, key_padding_mask=kpm,
        align=align,
    )  # fmt: skip
    assert torch.isfinite(ours).all()
    assert (ours[~live] == 0).all()
    ours_g = torch.autograd.grad(ours, (q32, k32, v32), dout.float().where(live, 0.0))
    pairs = [(ours, s32, ref)] + list(zip(ours_g, s32_g, ref_g))
    for what, (a, b, r) in zip(("out", "dq", "dk", "dv"), pairs):
        r = r.where(r.isfinite(), 0.0)
        e_ours = (a.double() - r).abs().max().item()
        e_sdpa = (b.double().where(b.isfinite(), 0.0) - r).abs().max().item()
        assert e_ours <= 5e-6, f"{what}: {e_ours:.2e} vs float64"
        assert e_ours <= 4 * e_sdpa + 1e-6, f"{what}: {e_ours:.2e} > 4 x {e_sdpa:.2e}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("window", [None, 11])
def test_half_precision_gradients_within_sdpa_error(dtype, window):
    """16-bit causal T != S (the case a 2026 review found at 1.54x): output and
    gradients within 1.5x SDPA's own error against float64 on the same rounded inputs
    (sharp logits). In the interpreter P is not rounded before P V: see the GPU test."""
    T, S = 48, 80
    gen = torch.Generator().manual_seed(7)
    q, k, v, dout = (
        (torch.randn(1, 2, n, 32, generator=gen, dtype=torch.float64) * m).to(dtype)
        for n, m in ((T, 4.0), (S, 4.0), (S, 1.0), (T, 1.0))
    )
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    ref = _reference(q64, k64, v64, True, window, "bottom_right", None)
    ref_g = torch.autograd.grad(ref, (q64, k64, v64), dout.double())
    qh, kh, vh = (t.clone().requires_grad_() for t in (q, k, v))
    sd = _reference(qh, kh, vh, True, window, "bottom_right", None, dtype)
    sd_g = torch.autograd.grad(sd, (qh, kh, vh), dout)
    qo, ko, vo = (t.clone().requires_grad_() for t in (q, k, v))
    ours = tf.triton_flash_attention(
        qo, ko, vo, is_causal=True, window=window, align="bottom_right"
    )
    ours_g = torch.autograd.grad(ours, (qo, ko, vo), dout)
    assert ours.dtype == dtype and all(g.dtype == dtype for g in ours_g)
    for what, a, b, r in zip(
        ("out", "dq", "dk", "dv"), (ours, *ours_g), (sd, *sd_g), (ref, *ref_g)
    ):
        e_ours = (a.double() - r).abs().max().item()
        e_sdpa = (b.double() - r).abs().max().item()
        assert e_ours <= 1.5 * e_sdpa, f"{what}: {e_ours:.2e} > 1.5 x {e_sdpa:.2e}"


if triton is not None:
    import triton.language as tl  # noqa: E402

    @triton.jit
    def _probe_ranges(OUT, T, S, OFF, W, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      CAUSAL: tl.constexpr, WINDOW: tl.constexpr):  # fmt: skip
        i = tl.program_id(0)
        lo, f_lo, f_hi, hi = tiles.kv_range(
            i * BLOCK_M, T, S, OFF, W, BLOCK_M, BLOCK_N, CAUSAL, WINDOW
        )
        tl.store(OUT + 8 * i + 0, lo)
        tl.store(OUT + 8 * i + 1, f_lo)
        tl.store(OUT + 8 * i + 2, f_hi)
        tl.store(OUT + 8 * i + 3, hi)
        lo, f_lo, f_hi, hi = tiles.q_range(
            i * BLOCK_N, T, S, OFF, W, BLOCK_M, BLOCK_N, CAUSAL, WINDOW
        )
        tl.store(OUT + 8 * i + 4, lo)
        tl.store(OUT + 8 * i + 5, f_lo)
        tl.store(OUT + 8 * i + 6, f_hi)
        tl.store(OUT + 8 * i + 7, hi)


def _tiles(a, b, step, n):
    return {j for j in range(0, n, step) if a <= j < b}


@pytest.mark.parametrize(
    "T,S,causal,window,align",
    [
        (256, 256, True, None, "top_left"),
        (200, 300, True, None, "bottom_right"),
        (300, 170, True, None, "top_left"),
        (256, 256, False, 40, "top_left"),
        (160, 320, True, 50, "bottom_right"),
        (256, 256, False, None, "top_left"),
    ],
)
def test_two_stage_loop_visits_the_plan(T, S, causal, window, align):
    """The kernels' key ranges (forward, dq) and query ranges (dk, dv) against
    tile_plan: the visited tiles are exactly the non-skipped ones, and the tiles run
    without a mask are exactly the "full" ones (the last, partial key tile excepted,
    which is masked by its bound); so tiles above the diagonal are never visited and
    only those the band's edge crosses compute a mask."""
    bm, bn = 32, 16
    off = 0 if align == "top_left" else S - T
    n_prog = max(triton.cdiv(T, bm), triton.cdiv(S, bn))
    out = torch.zeros(n_prog * 8, dtype=torch.int32)
    _probe_ranges[(n_prog,)](
        out, T, S, off, window or 0, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
        WINDOW=window is not None,
    )  # fmt: skip
    r = out.view(n_prog, 8).tolist()
    plan = efficient.tile_plan(T, S, bm, bn, causal, window, align)
    tail = {(S - 1) // bn * bn} if S % bn else set()
    skipped_any = False
    for i, row in enumerate(plan):  # forward / dq: one program per query block
        lo, f_lo, f_hi, hi = r[i][:4]
        visited = _tiles(lo, hi, bn, S)
        plain = _tiles(f_lo, f_hi, bn, S)
        want = {j * bn for j, kind in enumerate(row) if kind != "skip"}
        full = {j * bn for j, kind in enumerate(row) if kind == "full"}
        assert visited == want, (i, lo, hi)
        assert plain <= full and full - plain <= tail, (i, f_lo, f_hi)
        skipped_any |= len(want) < len(row)
    rows_t = tail_q = {(T - 1) // bm * bm} if T % bm else set()
    for j in range(triton.cdiv(S, bn)):  # dk, dv: one program per key block
        lo, f_lo, f_hi, hi = r[j][4:]
        visited = _tiles(lo, hi, bm, T)
        plain = _tiles(f_lo, f_hi, bm, T)
        want = {i * bm for i, row in enumerate(plan) if row[j] != "skip"}
        full = {i * bm for i, row in enumerate(plan) if row[j] == "full"}
        assert visited == want, (j, lo, hi)
        assert plain <= full and full - plain <= rows_t | tail_q, (j, f_lo, f_hi)
    assert skipped_any == (causal or window is not None)


def test_interpreter_pins_one_config():
    assert len(tf._fwd_tuned.configs) == 1 and len(bwd.dq_tuned.configs) == 1
    assert len(bwd.dkdv_tuned.configs) == 1


def _through_autotuner(tuner, kind, monkeypatch, call):
    """Run ``call`` (a library wrapper) with ``tuner`` holding every GPU configuration,
    as on a GPU, and return the tiles its pruning hands to the benchmark: Triton's own
    ``Autotuner.run`` calls the pruning with the arguments the wrapper passed. Nothing
    launches (the benchmark and the kernel are stubbed); the launch arguments are a GPU
    launch's (``DOT_FP32`` only for float32 inputs)."""
    full = [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
        for bm, bn, w, s in tiles.config_rows(kind)
    ]
    seen = []

    def bench(*args, config, **kwargs):
        seen.append(tiles._row(config))
        return [float(len(seen))] * 3  # the first is the fastest

    monkeypatch.setattr(tiles, "interpreting", lambda: False)  # launch_args' view only
    monkeypatch.setattr(tuner, "configs", full)
    monkeypatch.setattr(tuner, "cache", {})
    monkeypatch.setattr(tuner, "cache_results", False)
    monkeypatch.setattr(tuner, "_bench", bench)
    monkeypatch.setattr(tuner, "fn", types.SimpleNamespace(run=lambda *a, **k: None))
    if kind == "dq":  # the backward runs dK/dV first: stub it too (nothing launches)
        stub = types.SimpleNamespace(run=lambda *a, **k: None)
        monkeypatch.setattr(bwd.dkdv_tuned, "fn", stub)
    call()
    return seen or [tiles._row(tuner.best_config)]


def _fwd_call(dh, dtype, n=4096):
    q = torch.zeros(1, 1, n, dh, dtype=dtype)
    return lambda: tf.triton_flash_forward(q, q, q, is_causal=True)


def _bwd_call(dh, dtype, n=2048):
    q = torch.zeros(1, 1, n, dh, dtype=dtype)
    lse = torch.zeros(1, 1, n)
    return lambda: tf.triton_flash_backward(q, q, q, q, lse, q, is_causal=True)


@pytest.mark.parametrize("kind", ["fwd", "dkdv", "dq"])
def test_autotuner_prunes_by_the_head_dim_it_is_given(kind, monkeypatch):
    """Through Triton's autotuner: at head dim 128 the 16-bit tiles that spill are
    dropped (BLOCK_DH reaches the pruning as a keyword argument), at 64 none are;
    float32 inputs get the float32 tiles only."""
    tuner = {"fwd": tf._fwd_tuned, "dkdv": bwd.dkdv_tuned, "dq": bwd.dq_tuned}[kind]
    call = _fwd_call if kind == "fwd" else _bwd_call
    rows16 = {"fwd": tiles.FWD_CONFIGS, "dkdv": tiles.DKDV_CONFIGS}.get(
        kind, tiles.DQ_CONFIGS
    )
    fp32 = tiles.FP32_CONFIGS[kind]
    d64 = _through_autotuner(tuner, kind, monkeypatch, call(64, torch.bfloat16))
    d128 = _through_autotuner(tuner, kind, monkeypatch, call(128, torch.bfloat16))
    f32 = _through_autotuner(tuner, kind, monkeypatch, call(64, torch.float32))
    assert d64 == list(rows16)  # nothing pruned at n >= 2k, head dim 64
    assert 0 < len(d128) <= len(d64) and set(d128) <= set(d64)
    if kind != "dq":  # dQ: none of its 16-bit tiles spills at head dim 128
        assert len(d128) < len(d64)
    assert not any(tiles.WIDE_HEAD_DROP[kind](bm, bn, w) for bm, bn, w, _ in d128)
    assert d128[0] == tiles.default_config(kind, torch.bfloat16, 128)
    assert set(f32) <= set(fp32) and f32[0] == tiles.default_config(kind, torch.float32)


def test_autotuner_pinned_and_small_problems(monkeypatch):
    """ATTNLAB_TRITON_AUTOTUNE=0 runs the default tile without benchmarking; a short
    sequence drops the tiles wider than it, never all of them."""
    monkeypatch.setenv("ATTNLAB_TRITON_AUTOTUNE", "0")
    pinned = _through_autotuner(
        tf._fwd_tuned, "fwd", monkeypatch, _fwd_call(128, torch.float16)
    )
    assert pinned == [tiles.default_config("fwd", torch.float16, 128)]
    monkeypatch.delenv("ATTNLAB_TRITON_AUTOTUNE")
    small = _through_autotuner(
        tf._fwd_tuned, "fwd", monkeypatch, _fwd_call(64, torch.bfloat16, n=64)
    )
    assert small and all(bm <= 64 and bn <= 64 for bm, bn, _, _ in small)
    tiny = _through_autotuner(
        tf._fwd_tuned, "fwd", monkeypatch, _fwd_call(16, torch.bfloat16, n=1)
    )
    assert len(tiny) == 1  # never empty


def test_pruning_refuses_a_launch_without_the_head_dim():
    cfgs = [tiles._Cfg(*r) for r in tiles.FWD_CONFIGS]
    with pytest.raises(KeyError, match="BLOCK_DH"):
        tiles.prune_configs(cfgs, {"T_KEY": 64, "S_KEY": 64}, DOT_FP32=False)


def test_cpu_tensors_without_interpreter_are_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(ValueError, match="needs CUDA tensors, got q on cpu"):
        tf.triton_flash_forward(q, q, q)


def test_bad_dtype_and_shapes():
    q = torch.randn(1, 1, 8, 16, device=_dev())
    with pytest.raises(TypeError, match="float64"):
        tf.triton_flash_forward(q.double(), q.double(), q.double())
    with pytest.raises(ValueError, match="shapes"):
        tf.triton_flash_forward(q, q[..., :8], q)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S", [(64, 64), (48, 80)])
def test_half_precision_within_1_5x_sdpa_error(dtype, causal, T, S):
    """Statistics in float32: the output's error against a float64 reference on the
    same rounded inputs is within 1.5x SDPA's own in the same dtype (sharp logits), the
    limit chapter 8 states."""
    gen = torch.Generator().manual_seed(T + S + causal)
    q, k, v = (
        (torch.randn(1, 2, n, 32, generator=gen, dtype=torch.float64) * m).to(dtype)
        for n, m in ((T, 4.0), (S, 4.0), (S, 1.0))
    )
    mask = efficient.band_mask(T, S, None, causal)
    ref = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), attn_mask=mask
    )
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    dev = _dev()
    out, lse = tf.triton_flash_forward(
        q.to(dev), k.to(dev), v.to(dev), is_causal=causal
    )
    assert out.dtype == dtype and lse.dtype == torch.float32
    e_ours = (out.cpu().double() - ref).abs().max().item()
    e_sdpa = (sdpa.double() - ref).abs().max().item()
    assert e_ours <= 1.5 * e_sdpa, f"triton {e_ours:.2e} > 1.5 x SDPA's {e_sdpa:.2e}"


def test_interpreter_switched_on_too_late_is_a_clear_error():
    """Kernels imported before TRITON_INTERPRET=1 stay compiled: a CPU call then says
    so, instead of Triton's "0 active drivers" from deep inside the launch."""
    code = (
        "import os, torch\n"
        "os.environ.pop('TRITON_INTERPRET', None)\n"
        "from attnlab.kernels import triton_flash as tf\n"
        "assert not tf.kernels_interpreted()\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "q = torch.randn(1, 1, 8, 16)\n"
        "try:\n"
        "    tf.triton_flash_forward(q, q, q)\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "imported before it was" in run.stdout, run.stdout + run.stderr[-2000:]
