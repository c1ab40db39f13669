"""Deprecated alias of :mod:`attnlab.explain.faithfulness` (its home since 0.3: an explain tool,
and models do not import the explain tools). Import ``attnlab.explain`` instead."""

import warnings

from ..explain.faithfulness import *  # noqa: F403
from ..explain.faithfulness import __all__  # noqa: F401

warnings.warn(
    "attnlab.pretrained.faithfulness moved: import attnlab.explain.faithfulness (or attnlab.explain)",
    DeprecationWarning,
    stacklevel=2,
)
