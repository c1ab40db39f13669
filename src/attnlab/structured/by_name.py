"""Every attention mapping of the course by name (:func:`get_mapping`)."""

from __future__ import annotations

from .. import mappings as M
from ..registry import Registry
from .crf import SegmentationAttention
from .hard import GumbelSoftmax, ReinforceSample

# ---------------------------------------------------------------- by name
# Each built as ``cls(**kwargs)`` (:func:`get_mapping`).
MAPPINGS: Registry[type] = Registry(
    "mapping",
    {
        "softmax": M.Softmax,
        "sparsemax": M.Sparsemax,
        "entmax15": M.Entmax15,
        "fusedmax": M.Fusedmax,
        "gumbel": GumbelSoftmax,
        "reinforce": ReinforceSample,
        "structured": SegmentationAttention,
    },
)
MAPPING_NAMES = MAPPINGS.names()


def get_mapping(name: str, **kwargs):
    """Build a mapping for :func:`attnlab.attend` by name.

    ``softmax``, ``sparsemax``, ``entmax15``, ``fusedmax`` (``lam``) return the
    modules of :mod:`attnlab.mappings`; ``gumbel`` a :class:`GumbelSoftmax` (``tau``),
    ``reinforce`` a :class:`ReinforceSample`, ``structured`` a
    :class:`SegmentationAttention` (``init``, ``normalize``). Keyword arguments go to
    the constructor.

    Parameters
    ----------
    name : one of :data:`MAPPING_NAMES` (the :data:`MAPPINGS` registry).
    **kwargs : passed to the mapping's constructor.

    Returns
    -------
    ``nn.Module`` mapping scores ``(..., S)`` to weights ``(..., S)``.

    Raises
    ------
    ValueError
        ``name`` is unknown (the message lists the known names).
    """
    return MAPPINGS.get(name)(**kwargs)
