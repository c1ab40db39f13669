"""Every attention mapping of the course by name (:func:`get_mapping`)."""

from __future__ import annotations

from .. import mappings as M
from .crf import SegmentationAttention
from .hard import GumbelSoftmax, ReinforceSample

# ---------------------------------------------------------------- by name
MAPPING_NAMES = (
    "softmax",
    "sparsemax",
    "entmax15",
    "fusedmax",
    "gumbel",
    "reinforce",
    "structured",
)


def get_mapping(name: str, **kwargs):
    """Build a mapping for :func:`attnlab.attend` by name.

    ``softmax``, ``sparsemax``, ``entmax15``, ``fusedmax`` (``lam``) return the
    modules of :mod:`attnlab.mappings`; ``gumbel`` a :class:`GumbelSoftmax` (``tau``),
    ``reinforce`` a :class:`ReinforceSample`, ``structured`` a
    :class:`SegmentationAttention` (``init``, ``normalize``). Keyword arguments go to
    the constructor.
    """
    table = {
        "softmax": M.Softmax,
        "sparsemax": M.Sparsemax,
        "entmax15": M.Entmax15,
        "fusedmax": M.Fusedmax,
        "gumbel": GumbelSoftmax,
        "reinforce": ReinforceSample,
        "structured": SegmentationAttention,
    }
    if name not in table:
        raise ValueError(f"mapping must be one of {MAPPING_NAMES}, got {name!r}")
    return table[name](**kwargs)
