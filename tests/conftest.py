"""Shared fixtures: plotting backend and figures, seeded RNGs, every device.

* matplotlib draws with Agg in the tests (set here, before any test imports pyplot;
  never for notebooks, where Agg would hide the inline plots), and every figure a test
  opens is closed after it.
* Every test starts from ``attnlab.seed_everything(0)``.
* The ``device`` fixture runs a test on each of ``attnlab.available_devices()`` (CPU
  always, Apple's MPS when present), plus CUDA as a visible skip when this machine has
  none.
* ``@pytest.mark.slow`` marks the tests that train a model; ``make check`` leaves them
  out, ``make test`` runs them.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

# the old import path (`from conftest import fails_with`) of test files on branches not
# yet moved to tests/checkhelp.py; remove once none is left
from checkhelp import fails_with  # noqa: E402, F401

# Triton's interpreter for the kernel tests where there is no GPU. Triton reads the
# variable when @triton.jit decorates a kernel, i.e. when attnlab.kernels is first
# imported, and a test module may import it at collection (test_contract_scalars.py
# walks every module): set here, before any test module is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import attnlab  # noqa: E402

DEVICES = attnlab.available_devices()
HAS_CUDA = any(d.type == "cuda" for d in DEVICES)

_params = [pytest.param(d, id=d.type) for d in DEVICES]
if not HAS_CUDA:
    _params.append(
        pytest.param(
            torch.device("cuda"),
            id="cuda",
            marks=pytest.mark.skip(reason="no CUDA device here"),
        )
    )


@pytest.fixture(autouse=True)
def _seed(monkeypatch):
    # unit tests check the library against fixed expectations: the book's seeds, even
    # when the shell asks for a shift (ATTNLAB_SEED, tests/test_seeding.py tests it)
    monkeypatch.delenv("ATTNLAB_SEED", raising=False)
    attnlab.seed_everything(0)
    yield


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(params=_params)
def device(request):
    """Every device: cpu always, cuda (or a clean skip), mps when present."""
    return request.param


cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")


@pytest.fixture
def check_separates(monkeypatch):
    """``check_separates(check, good, bads)``: in strict mode the exercise check passes
    the good answer and raises ``CheckFailed`` on every bad one."""
    from attnlab.check import CheckFailed

    monkeypatch.setenv("ATTNLAB_STRICT", "1")

    def run(check, good, bads):
        assert check(good)
        for bad in bads:
            with pytest.raises(CheckFailed):
                check(bad)

    return run


# ----------------------------------------------------- the exercise checks' tests
@pytest.fixture
def strict_checks(monkeypatch):
    """Checks raise on failure (as under ``make test``), whatever the environment.

    A test module of checks opts in with
    ``pytestmark = pytest.mark.usefixtures("strict_checks")``."""
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


@pytest.fixture
def debug_mode():
    """Inside the test, attnlab's value scans are on (``attnlab.debug()``): NaN/inf in
    an input raise ValueError instead of giving NaN (the default, as PyTorch's)."""
    with attnlab.debug():
        yield
