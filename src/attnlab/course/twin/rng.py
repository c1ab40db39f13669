"""The twins' seeded random numbers, the same in Python and in the browser
(``attnlabTwin.uniforms`` and ``attnlabTwin.normals`` in ``core.js``)."""

from __future__ import annotations

import numpy as np

__all__ = ["normals", "uniforms"]


def uniforms(seed: int, n: int) -> np.ndarray:
    """The twins' seeded uniforms in [0, 1): mulberry32, as ``attnlabTwin.uniforms``.

    mulberry32's state only adds a constant each draw, so it vectorises.
    """
    k = np.arange(1, n + 1, dtype=np.uint64)
    a = ((seed + k * 0x6D2B79F5) & 0xFFFFFFFF).astype(np.uint32)
    with np.errstate(over="ignore"):
        t = (a ^ (a >> np.uint32(15))) * (a | np.uint32(1))
        t = (t + (t ^ (t >> np.uint32(7))) * (t | np.uint32(61))) ^ t
    return (t ^ (t >> np.uint32(14))).astype(np.float64) / 4294967296.0


def normals(seed: int, n: int) -> np.ndarray:
    """The twins' seeded N(0, 1) numbers: mulberry32 uniforms and Box–Muller.

    The same numbers as ``attnlabTwin.normals(seed, n)`` in the browser (up to the last
    bit of log/cos), so the twin's statistics can be checked against attnlab.
    """
    u = uniforms(seed, 2 * n)
    u1, u2 = 1.0 - u[0::2], u[1::2]
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
