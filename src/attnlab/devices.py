"""Which device to compute on.

Everything in :mod:`attnlab` follows the device and dtype of its inputs; this module only
answers "what is the best device here?" for code that creates tensors from scratch
(chapters, benchmarks, tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from .seeding import seed_everything, seed_shift  # seeds: attnlab.seeding

__all__ = ["device", "available_devices", "seed_everything"]


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
    ``meta`` (CONTRIBUTING.md, "Results that travel"). A result file records the
    book's seeds, so this refuses to describe a run under ``ATTNLAB_SEED`` (whose seeds
    are shifted: :mod:`attnlab.seeding`).

    Raises
    ------
    RuntimeError
        ``ATTNLAB_SEED`` asks for a shift: unset it to write a result file.
    """
    import datetime
    import platform

    if seed_shift():
        raise RuntimeError(
            "run_meta: ATTNLAB_SEED is set, so every seed of this run is shifted "
            "(attnlab.seeding); a committed result file records the book's seeds: "
            "unset ATTNLAB_SEED to write one"
        )

    return {
        "machine": machine(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
    }
