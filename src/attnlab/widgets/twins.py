"""The twins of chapters 1, 2, 3, 5 and 7, which used to share this one module.

Each now sits in its chapter's folder (``attnlab/course/chNN_topic/twins.py``); this
module re-exports them under the old name, for notebooks that import it. Deprecated
since attnlab 0.2.0 (importing it warns).
"""

import warnings

from attnlab.course.ch01_seq2seq.twins import attention_maps_twin, translation_maps
from attnlab.course.ch02_recipe.twins import query_vs_keys_twin
from attnlab.course.ch03_mappings.twins import mapping_lab_twin
from attnlab.course.ch05_self_attention.twins import (
    SQRT_DK,
    mask_lab_twin,
    sqrt_dk_stats,
    sqrt_dk_twin,
)
from attnlab.course.ch07_transformer.twins import positional_twin
from attnlab.course.twin.rng import normals, uniforms

__all__ = [
    "SQRT_DK",
    "attention_maps_twin",
    "mapping_lab_twin",
    "mask_lab_twin",
    "normals",
    "positional_twin",
    "query_vs_keys_twin",
    "sqrt_dk_stats",
    "sqrt_dk_twin",
    "translation_maps",
    "uniforms",
]

warnings.warn(
    "attnlab.widgets.twins is deprecated since attnlab 0.2.0: import each chapter's "
    "attnlab.course.chNN_topic.twins",
    DeprecationWarning,
    stacklevel=2,
)
