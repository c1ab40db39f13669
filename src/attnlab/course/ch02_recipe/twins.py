"""Chapter 2's static twin ``query_vs_keys``: rotate one query, and the browser recomputes
five scorers' scores and softmax weights. The mechanism: :mod:`attnlab.course.twin`.
"""

from __future__ import annotations

import math

import torch

from ... import mappings as M
from ...scoring import dot_score, scaled_dot_score
from ..twin import (
    Range,
    Twin,
    TwinCheck,
    register_check,
)

__all__ = ["query_vs_keys_twin"]


# ------------------------------------------------------------- 2. query vs keys
def query_vs_keys_twin() -> Twin:
    """Chapter 2: rotate and stretch one query; five scorers' scores and weights.

    The keys and the scorers' weights are those of
    :func:`attnlab.widgets.recipe.query_vs_keys` (``recipe_scorers()``).
    """
    from .widgets import KEYS, recipe_scorers

    sc = recipe_scorers()
    wq, wk = sc["mlp"].hidden.weight.split([2, 2], dim=1)
    data = {
        "keys": KEYS.tolist(),
        "scorers": list(sc),
        "bilinear_W": sc["bilinear"].W.tolist(),
        "additive_W1": sc["additive"].W1.weight.tolist(),
        "additive_W2": sc["additive"].W2.weight.tolist(),
        "additive_v": sc["additive"].v.weight[0].tolist(),
        "mlp_Wq": wq.tolist(),
        "mlp_Wk": wk.tolist(),
        "mlp_b": sc["mlp"].hidden.bias.tolist(),
        "mlp_w": sc["mlp"].out.weight[0].tolist(),
        "mlp_c": float(sc["mlp"].out.bias.detach()[0]),
    }
    return Twin(
        "query_vs_keys",
        "One query, four keys, five scorers",
        controls=[
            Range("angle", "query angle (°)", -180, 180, 1, 30),
            Range("length", "query length ‖q‖", 0.1, 10, 0.1, 1),
        ],
        data=data,
        note="Each row of the table is one scorer; its weights are the softmax of its "
        "scores. Make the query long: the dot, scaled-dot and bilinear rows turn "
        "one-hot. Then turn it: at which angles do the additive and MLP rows turn "
        "one-hot too, and where do they stay spread out (why?)",
    )


def _query_vs_keys_reference(settings: dict, data: dict) -> dict:
    from .widgets import recipe_scorers

    rad = math.radians(float(settings["angle"]))
    n = float(settings["length"])
    q = torch.tensor([[n * math.cos(rad), n * math.sin(rad)]], dtype=torch.float64)
    k = torch.tensor(data["keys"], dtype=torch.float64)
    out = {"angle": float(settings["angle"]), "length": n}
    with torch.no_grad():
        for name, scorer in recipe_scorers().items():
            if isinstance(scorer, torch.nn.Module):
                s = scorer.double()(q, k)[0]
            else:  # dot / scaled dot: plain functions
                s = (dot_score if name == "dot" else scaled_dot_score)(q, k)[0]
            w = M.softmax(s)
            for j in range(len(k)):
                out[f"score:{name}:{j}"] = float(s[j])
                out[f"weight:{name}:{j}"] = float(w[j])
            out[f"winner:{name}"] = int(w.argmax())
    return out


register_check(
    "query_vs_keys",
    TwinCheck(
        cases=[
            {"angle": 30, "length": 1},
            {"angle": 10, "length": 10},
            {"angle": -135, "length": 3.7},
            {"angle": 180, "length": 0.1},
        ],
        reference=_query_vs_keys_reference,
        # The page's weights are float32 copies; the reference uses the same copies in
        # float64, so only summation order differs.
        default_tol=1e-9,
    ),
)
