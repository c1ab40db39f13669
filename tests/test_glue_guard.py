"""attnlab.glue refuses a value a page cannot print: a missing number (None), NaN or
an infinity stops the build instead of reaching the prose as "nan"."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnlab


@pytest.mark.parametrize(
    "bad", [None, float("nan"), math.inf, np.float64("nan"), torch.tensor(-math.inf)]
)
def test_glue_refuses_missing_and_non_finite(bad):
    with pytest.raises(ValueError, match="ch_test_value"):
        attnlab.glue("ch_test_value", bad)


@pytest.mark.parametrize("good", [0.0, 3, "MiB", np.float32(1.5), torch.tensor(2.0)])
def test_glue_returns_ordinary_values(good):
    assert attnlab.glue("ch_test_value", good) is good
