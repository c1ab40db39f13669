"""Seeds, and the one knob that moves every seed of a live run: ``ATTNLAB_SEED``.

Training in floating point is not bitwise portable: another CPU, BLAS or PyTorch rounds
differently, and after a few hundred steps it holds another model. A reader's machine
is therefore not the book's, and a sentence that is true of the book's run must also be
true of the reader's. On one machine the honest stand-in for another machine is another
*training trajectory*, and another seed gives one.

Every seed the library turns into random state goes through this module, and so does
every seed a chapter uses for live training (``attnlab.manual_seed(0)`` or
``attnlab.seed_everything(0)``, never ``torch.manual_seed(0)``). With the environment variable ``ATTNLAB_SEED=k`` (an integer
``k >= 0``; unset or ``0``: the book's own run) every such seed ``s`` becomes

    s + 1000 * k            (:func:`live_seed`)

so ``ATTNLAB_SEED=1`` and ``ATTNLAB_SEED=2`` train other models on other batches, from
other initial weights, over disjoint sets of seeds (a chapter's seeds stay below 1000).
``make portability`` runs every chapter under two such shifts; a claim a chapter asserts
on a live run must hold under them.

What stays fixed: the seeds of an exercise check's test cases and of the widgets' and
twins' demo inputs. A committed experiment under ``tools/experiments/`` records the
book's seeds: :func:`attnlab.devices.run_meta` refuses to describe a shifted run.

    device = attnlab.setup_notebook(seed=0)      # seeds everything with live_seed(0)
    attnlab.manual_seed(1)                       # before building a model: its weights
    gen = attnlab.generator(3)                   # a torch.Generator for training batches
    print(attnlab.seeding.describe())            # which seeds this run used
"""

from __future__ import annotations

import contextlib
import contextvars
import random
from collections.abc import Iterator

import numpy as np
import torch

from . import validation as V

__all__ = [
    "seed_shift",
    "live_seed",
    "seed_everything",
    "manual_seed",
    "generator",
    "numpy_rng",
    "python_rng",
]

ENV = "ATTNLAB_SEED"
STRIDE = 1000  # a shift moves seeds by a multiple of this; a chapter's seeds stay below
MAX_SEED = 2**32 - 1  # NumPy's range, the narrowest of the three generators
_UNSHIFTED = contextvars.ContextVar("attnlab_unshifted", default=False)


@contextlib.contextmanager
def unshifted() -> Iterator[None]:
    """Inside the block every shift is 0: for seeds derived from a shifted one (a
    stream's per-batch seeds), which must not be shifted twice."""
    token = _UNSHIFTED.set(True)
    try:
        yield
    finally:
        _UNSHIFTED.reset(token)


def seed_shift() -> int:
    """The shift ``k`` that ``ATTNLAB_SEED`` asks for (0 when it is unset or empty).

    Raises
    ------
    ValueError
        ``ATTNLAB_SEED`` is not a non-negative integer (``"1.5"``, ``"-1"``, ``"one"``).
    """
    if _UNSHIFTED.get():
        return 0
    return V.env_integer(ENV, default=0, low=0, high=MAX_SEED // STRIDE)


def live_seed(seed: int, shift: int | None = None) -> int:
    """The seed a live run uses for ``seed``: ``seed + 1000 * shift``.

    Parameters
    ----------
    seed : int >= 0, the seed as the chapter writes it.
    shift : int >= 0, or None (default) for :func:`seed_shift`'s (``ATTNLAB_SEED``).
        Committed experiments pass 0: a result file records one run.

    Returns
    -------
    int in [0, 2^32 - 1].

    Raises
    ------
    TypeError
        ``seed`` or ``shift`` is not an int (a bool, float or string).
    ValueError
        ``seed`` or ``shift`` is negative, or the shifted seed leaves [0, 2^32 - 1].
    """
    seed = V.integer(seed, "seed", "live_seed", low=0, high=MAX_SEED)
    if shift is None:
        shift = seed_shift()
    shift = V.integer(shift, "shift", "live_seed", low=0)
    out = seed + STRIDE * shift
    if out > MAX_SEED:
        raise ValueError(
            f"live_seed: seed {seed} shifted by {shift} x {STRIDE} is {out}, "
            f"past {MAX_SEED} (NumPy's largest seed)"
        )
    return out


def seed_everything(seed: int = 0, shift: int | None = None) -> int:
    """Seed Python, NumPy and torch (all devices) with :func:`live_seed` of ``seed``.

    Parameters
    ----------
    seed : an int in [0, 2^32 - 1] (NumPy's range), Python's or NumPy's.
    shift : as :func:`live_seed` (None: ``ATTNLAB_SEED``'s).

    Returns
    -------
    int, the seed actually used (``seed`` itself unless ``ATTNLAB_SEED`` is set).

    Raises
    ------
    TypeError
        ``seed`` is not an int (a bool, float or string).
    ValueError
        ``seed`` is outside [0, 2^32 - 1]. Checked before any generator is seeded.
    """
    s = live_seed(
        V.integer(seed, "seed", "seed_everything", low=0, high=MAX_SEED), shift
    )
    random.seed(s)
    np.random.seed(s)
    torch.manual_seed(s)
    return s


def manual_seed(seed: int, shift: int | None = None) -> int:
    """Seed torch's global generator (all devices) with :func:`live_seed` of ``seed``.

    What the library calls before building a model, so that its initial weights move
    with ``ATTNLAB_SEED``. Returns the seed used.
    """
    s = live_seed(seed, shift)
    torch.manual_seed(s)
    return s


def generator(seed: int, device=None, shift: int | None = None) -> torch.Generator:
    """A ``torch.Generator`` seeded with :func:`live_seed` of ``seed``.

    Parameters
    ----------
    seed : int in [0, 2^32 - 1].
    device : where the generator lives (default: the CPU).
    shift : as :func:`live_seed`.
    """
    g = torch.Generator() if device is None else torch.Generator(device=device)
    return g.manual_seed(live_seed(seed, shift))


def numpy_rng(seed: int, shift: int | None = None) -> np.random.Generator:
    """A NumPy ``Generator`` seeded with :func:`live_seed` of ``seed``."""
    return np.random.default_rng(live_seed(seed, shift))


def python_rng(seed: int | str, shift: int | None = None) -> random.Random:
    """A ``random.Random`` seeded with :func:`live_seed` of ``seed``.

    A string seed (a task's ``"name/split/seed"``) is seeded as written when no shift is
    asked for, and with ``"/shift=k"`` appended otherwise.
    """
    if isinstance(seed, str):
        k = (
            seed_shift()
            if shift is None
            else V.integer(shift, "shift", "python_rng", low=0)
        )
        return random.Random(seed if k == 0 else f"{seed}/shift={k}")
    return random.Random(live_seed(seed, shift))


def describe() -> str:
    """One line for a page: which seeds this run uses."""
    k = seed_shift()
    if k == 0:
        return "seeds as written on the page (ATTNLAB_SEED unset)"
    return (
        f"{ENV}={k}: every live-training seed s on this page runs as s + {STRIDE * k} "
        "(another training trajectory; the book's own run uses s)"
    )
