"""Shared fixtures: seeded RNGs and every device.

The ``device`` fixture runs a test on the CPU always, on CUDA when this machine has it
(skipped cleanly, and visibly, when it does not), and on Apple's MPS when present.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

_mps = getattr(torch.backends, "mps", None)
HAS_MPS = bool(_mps is not None and _mps.is_available())
HAS_CUDA = torch.cuda.is_available()

_params = [
    pytest.param(torch.device("cpu"), id="cpu"),
    pytest.param(
        torch.device("cuda"),
        id="cuda",
        marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device here"),
    ),
]
if HAS_MPS:
    _params.append(pytest.param(torch.device("mps"), id="mps"))


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    yield


@pytest.fixture(params=_params)
def device(request):
    """Every device: cpu always, cuda (or a clean skip), mps when present."""
    return request.param


cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
