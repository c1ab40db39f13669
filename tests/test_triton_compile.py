"""The Triton kernels compile for an A100 (sm_80) and an H100 (sm_90a) on this CPU.

Triton's interpreter, which the other kernel tests run, never computes a kernel's cache
key: a helper that lost its ``@triton.jit`` passes every interpreter test and fails on
every GPU. Triton's own compiler runs without a GPU (its front end, then the ``ptxas``
it bundles), so this test compiles every kernel — and through them every helper — with
the launch arguments the library's wrappers build (:mod:`attnlab.kernels.triton_compile`,
in a subprocess: the interpreter, switched on for the other tests, must be off). It fails
on a compile error, on a register spill at a kernel's default tile (float32 and
bfloat16, head dim 64; bfloat16 at head dim 128 too), and unless the 16-bit kernels
multiply 16-bit operands, P and dS rounded to 16 bit (read from the TTGIR), while the
float32 ones multiply float32.

Cost: about 22 compiles, 3-8 CPU s each (the numbers are printed). Every configuration
the autotuner may pick (about 70 compiles, several CPU minutes) is compiled by
``test_every_autotune_config_compiles``, which runs only with ATTNLAB_COMPILE_ALL=1.
Skipped only where Triton is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

KERNELS = ("fwd", "dkdv", "dq", "delta")
ROUNDED = {"fwd": ["p_r"], "dkdv": ["dst_r", "pt_r"], "dq": ["ds_r"], "delta": []}


def _compile(tmp_path, *args, timeout=1500):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)  # compiled kernels, not interpreted ones
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "attnlab.kernels.triton_compile", *args],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    rows = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert p.returncode == 0 and rows, p.stderr[-4000:]
    cpu = sum(r.get("cpu_s", 0) for r in rows)
    print(f"{len(rows)} compiles, {cpu:.0f} CPU s (this process and ptxas)")
    return rows


@pytest.fixture(scope="module")
def default_tiles(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("triton-cache")
    rows = _compile(tmp)  # every kernel, sm 80 and 90, float32 and bfloat16, d = 64
    rows += _compile(
        tmp, "--dh", "128", "--dtype", "bfloat16", "--kernels", "fwd", "dkdv", "dq"
    )
    return rows


def _where(r):
    return f"{r['kernel']} sm_{r['sm']} {r['dtype']} d={r['dh']} {r['config']}"


def test_every_kernel_compiles_for_sm80_and_sm90(default_tiles):
    errors = [f"{_where(r)}: {r['error']}" for r in default_tiles if "error" in r]
    assert not errors, "\n".join(errors)
    got = {(r["kernel"], r["sm"], r["dtype"], r["dh"]) for r in default_tiles}
    want = {
        (k, sm, dt, 64)
        for k in KERNELS
        for sm in (80, 90)
        for dt in ("float32", "bfloat16")
    }
    want |= {(k, sm, "bfloat16", 128) for k in KERNELS[:3] for sm in (80, 90)}
    assert got == want


def test_default_tiles_do_not_spill(default_tiles):
    """ptxas reports no spill stores or loads at any kernel's default tile (the dK/dV
    kernel at head dim 128 included)."""
    rows = [r for r in default_tiles if "error" not in r]
    assert all(r["default"] for r in rows)
    spills = [
        f"{_where(r)}: {r['registers']} registers, {r['spill_stores']} B spilled"
        for r in rows
        if r["spill_stores"] or r["spill_loads"]
    ]
    assert not spills, "\n".join(spills)


def test_16bit_kernels_multiply_16bit_and_round_p_and_ds(default_tiles):
    """What the interpreter cannot show (it multiplies in float32): compiled for a GPU,
    the bfloat16 kernels' products take bfloat16 operands (mma / wgmma on sm_90), P and
    dS are rounded from float32 to bfloat16 before their products; float32 inputs
    multiply float32 (no TF32)."""
    for r in default_tiles:
        if "error" in r or r["kernel"] == "delta":
            continue
        assert r["dots"] >= 2, _where(r)
        assert r["rounded_16bit"] == (
            ROUNDED[r["kernel"]] if r["dtype"] == "bfloat16" else []
        ), _where(r)
        if r["dtype"] == "bfloat16":
            assert r["dot_operand_types"] == ["bf16"] and r["mma_16bit"], _where(r)
            if r["sm"] == 90 and r["kernel"] == "fwd":
                assert r["wgmma"], _where(r)  # Hopper's warpgroup MMA
        else:
            assert r["dot_operand_types"] == ["f32"], _where(r)
            assert not r["mma_16bit"], _where(r)


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("ATTNLAB_COMPILE_ALL") != "1",
    reason="every autotune configuration: several CPU minutes (ATTNLAB_COMPILE_ALL=1)",
)
def test_every_autotune_config_compiles(tmp_path):
    rows = _compile(tmp_path, "--all-configs", timeout=3600)
    errors = [f"{_where(r)}: {r['error']}" for r in rows if "error" in r]
    assert not errors, "\n".join(errors)
