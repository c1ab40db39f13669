"""Shared fixtures: seeded RNGs and every available device."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import attnlab

DEVICES = attnlab.available_devices()


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    yield


@pytest.fixture(params=DEVICES, ids=[d.type for d in DEVICES])
def device(request):
    """Every device this machine has: cpu always, cuda/mps when present."""
    return request.param


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
