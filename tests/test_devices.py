"""attnlab picks the best device and every function follows its inputs."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import attnlab


def test_device_prefers_cuda_then_mps_then_cpu(monkeypatch):
    from attnlab import devices

    for cuda, mps, want in [
        (1, 1, "cuda"),
        (0, 1, "mps"),
        (1, 0, "cuda"),
        (0, 0, "cpu"),
    ]:
        monkeypatch.setattr(torch.cuda, "is_available", lambda c=cuda: bool(c))
        monkeypatch.setattr(devices, "_mps_available", lambda m=mps: bool(m))
        assert attnlab.device().type == want
        types = [d.type for d in attnlab.available_devices()]
        assert types == ["cpu"] + ["cuda"] * cuda + ["mps"] * mps


def test_available_devices_always_has_cpu_first():
    devs = attnlab.available_devices()
    assert devs[0].type == "cpu"
    assert (torch.device("cuda") in devs) == torch.cuda.is_available()


def test_attend_follows_device_and_dtype(device):
    for dtype in (torch.float32, torch.float64):
        q = torch.randn(2, 3, 4, device=device, dtype=dtype)
        k = torch.randn(2, 5, 4, device=device, dtype=dtype)
        v = torch.randn(2, 5, 6, device=device, dtype=dtype)
        out, w = attnlab.attend(q, k, v)
        assert out.device.type == device.type and out.dtype == dtype
        assert w.device.type == device.type and w.dtype == dtype


def test_setup_notebook_seeds_everything():
    attnlab.setup_notebook(seed=3)
    a = torch.randn(4)
    attnlab.setup_notebook(seed=3)
    b = torch.randn(4)
    assert torch.equal(a, b)


@pytest.mark.parametrize(
    "seed, err",
    [(-1, ValueError), (2**32, ValueError), (1.5, TypeError), ("3", TypeError)],
)
def test_a_bad_seed_is_refused_before_anything_is_seeded(seed, err):
    # found writing the Raises section: 1.5 seeded Python, then NumPy raised
    attnlab.seed_everything(0)
    expected = random.random()
    attnlab.seed_everything(0)
    with pytest.raises(err, match="seed_everything: seed"):
        attnlab.seed_everything(seed)
    assert random.random() == expected  # Python's generator untouched


def test_a_numpy_int_seed_is_an_int():
    attnlab.seed_everything(np.int64(5))
    a = torch.randn(3)
    attnlab.seed_everything(5)
    assert torch.equal(a, torch.randn(3))
