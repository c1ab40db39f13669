"""Which device to compute on.

Everything in :mod:`attnlab` follows the device and dtype of its inputs; this module only
answers "what is the best device here?" for code that creates tensors from scratch
(chapters, benchmarks, tests).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from . import validation as V

__all__ = ["device", "available_devices", "seed_everything"]


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and torch (all devices) so a chapter runs the same each time.

    Parameters
    ----------
    seed : an int in [0, 2^32 - 1] (NumPy's range), Python's or NumPy's.

    Raises
    ------
    TypeError
        ``seed`` is not an int (a bool, float or string).
    ValueError
        ``seed`` is outside [0, 2^32 - 1]. Checked before any generator is seeded.
    """
    seed = V.integer(seed, "seed", "seed_everything", low=0, high=2**32 - 1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def device() -> torch.device:
    """The best available device: ``cuda``, then ``mps``, then ``cpu``.

    Returns
    -------
    torch.device, without an index (``cuda`` is the current CUDA device).
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def available_devices() -> list[torch.device]:
    """Every device the tests should run on: always ``cpu``, plus ``cuda``/``mps``.

    Returns
    -------
    list of torch.device: ``cpu`` first, then ``cuda`` and ``mps`` where available.
    """
    devs = [torch.device("cpu")]
    if torch.cuda.is_available():
        devs.append(torch.device("cuda"))
    if _mps_available():
        devs.append(torch.device("mps"))
    return devs


@contextmanager
def num_threads(n: int | None) -> Iterator[None]:
    """Run a block with torch using ``n`` CPU threads (None: leave as is), then restore."""
    old = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def machine() -> str:
    """The CPU and the vector kernels torch picks on it, e.g. ``"AMD EPYC, AVX512"``.

    Training runs repeat bit for bit only on the same kind of CPU with the same torch;
    experiment files record this (:func:`run_meta`) so that a test knows when exact
    agreement can be asked for (``ATEN_CPU_CAPABILITY`` changes the second part).
    """
    import platform

    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next(ln.split(":", 1)[1].strip() for ln in f if "model name" in ln)
    except (OSError, StopIteration):
        pass
    return f"{name}, {torch.backends.cpu.get_cpu_capability()}"


def run_meta() -> dict[str, str]:
    """Where and when an experiment ran: ``machine``, ``torch``, ``python``, ``date``.

    Every script under ``tools/experiments/`` puts these into its result file's
    ``meta`` (CONTRIBUTING.md, "Results that travel").
    """
    import datetime
    import platform

    return {
        "machine": machine(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
    }
