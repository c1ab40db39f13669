"""Deprecated alias of :mod:`attnlab.explain.attribution` (its home since 0.3: an explain tool,
and models do not import the explain tools). Import ``attnlab.explain`` instead."""

import warnings

from ..explain.attribution import *  # noqa: F403
from ..explain.attribution import __all__  # noqa: F401

warnings.warn(
    "attnlab.pretrained.attribution moved: import attnlab.explain.attribution (or attnlab.explain)",
    DeprecationWarning,
    stacklevel=2,
)
