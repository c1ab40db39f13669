"""bench/attention_gpu_check.py end to end on a CPU (``--dry-run``: Triton's interpreter,
tiny sizes): every row's kernels run and match SDPA, the JSON is written, and what needs
CUDA (the GPU tests, timings, memory, SDPA's backend) is marked as not run. Skipped where
Triton is not installed."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("triton")

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_dry_run_writes_every_row(tmp_path):
    out = tmp_path / "gpu.json"
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)  # the script sets it itself, before triton
    p = subprocess.run(
        [sys.executable, str(ROOT / "bench/attention_gpu_check.py"), "--dry-run",
         "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    d = json.loads(out.read_text())
    not_run = "not run: no CUDA (dry run)"
    assert d["dry_run"] is True and d["tests"] == not_run
    assert len(d["rows"]) == 2 and d["kernel"]["sources_sha256"]
    for row in d["rows"]:
        assert "error" not in row, row.get("traceback")
        assert row["max_abs_diff_vs_sdpa"] < 2e-2  # bfloat16 outputs
        assert row["window_max_abs_diff_vs_masked_sdpa"] < 2e-2
        assert set(row["tiles"]) == {"fwd", "dkdv", "dq", "window_fwd"}
        assert all(row["tiles"].values())
        for key in ("fwd_ms", "sdpa_f+b_ms", "window_fwd_ms", "memory", "sdpa_backend"):
            assert row[key] == not_run
