"""attnlab.notebook: the glue helper the chapters quote their numbers through."""

import numpy as np
import pytest
import torch

from attnlab import notebook


@pytest.mark.parametrize(
    "value, plain",
    [
        (np.float64(0.34), 0.34),
        (np.float32(0.5), 0.5),
        (np.int64(3), 3),
        (torch.tensor(0.25, dtype=torch.float64), 0.25),
        (torch.tensor([7]), 7),
    ],
)
def test_numpy_and_tensor_scalars_are_glued_as_python_numbers(
    value, plain, monkeypatch
):
    """myst-nb formats {glue:text} from the repr: np.float64(0.34) takes no format spec."""
    glued = {}
    myst_nb = pytest.importorskip("myst_nb")
    monkeypatch.setattr(
        myst_nb, "glue", lambda n, v, display=True: glued.update({n: v})
    )
    assert notebook.glue("x", value) is value  # the caller keeps what it passed
    assert type(glued["x"]) in (int, float) and glued["x"] == pytest.approx(plain)
    assert f"{glued['x']:.2f}" == f"{plain:.2f}"


def test_other_values_are_glued_unchanged(monkeypatch):
    glued = {}
    myst_nb = pytest.importorskip("myst_nb")
    monkeypatch.setattr(
        myst_nb, "glue", lambda n, v, display=True: glued.update({n: v})
    )
    arr = np.array([1.0, 2.0])
    for v in (0.5, "text", arr):
        notebook.glue("y", v)
        assert glued["y"] is v
