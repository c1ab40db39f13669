"""The course's static twins (see :mod:`attnlab.widgets.twin` for the mechanism).

Each ``*_twin()`` returns a :class:`~attnlab.widgets.twin.Twin` to display right after
the ipywidget it mirrors; its script computes in the browser. Next to each, a
``*_reference(settings, data)`` computes with attnlab what the twin must display for
some control settings, and :func:`~attnlab.widgets.twin.register_check` tells the
browser check (``tools/browser_check.py``) which settings to try and how close the
readouts must be.

========================  =======  ===================================================
twin (``data-twin``)      chapter  what the browser computes
========================  =======  ===================================================
``mapping_lab``           3        softmax / sparsemax / 1.5-entmax of scaled scores
``query_vs_keys``         2        five scorers' scores and softmax weights
``mask_lab``              5        masked softmax in float32 or emulated float16
``sqrt_dk``               5        spread of q·k and softmax peak, ±1/√d_k
``positional``            7        the sinusoidal encoding table
``attention_maps``        1        nothing: maps precomputed by the trained model
========================  =======  ===================================================
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import mappings as M
from ..positional import sinusoidal_encoding
from ..scoring import dot_score, scaled_dot_score
from .twin import (
    HEAD,
    Checkbox,
    Range,
    Readout,
    Select,
    Twin,
    TwinCheck,
    register_check,
)

__all__ = [
    "mapping_lab_twin",
    "query_vs_keys_twin",
    "mask_lab_twin",
    "sqrt_dk_twin",
    "positional_twin",
    "attention_maps_twin",
    "translation_maps",
    "normals",
    "uniforms",
    "sqrt_dk_stats",
]

_MAPS = {"softmax": M.softmax, "sparsemax": M.sparsemax, "entmax15": M.entmax15}


def _num(x: float) -> float:
    return float(x) + 0.0  # no -0.0


# ----------------------------------------------------------------- 1. mapping lab
def mapping_lab_twin(scores=(1.2, 0.9, 0.1, -0.4, 0.7, -1.0)) -> Twin:
    """Chapter 3: scale one set of scores ×0.1 … ×100 (log slider) and map them."""
    scores = [float(s) for s in scores]
    if not 1 <= len(scores) <= 12 or not all(math.isfinite(s) for s in scores):
        raise ValueError(f"mapping_lab_twin: give 1 to 12 finite scores, got {scores}")
    return Twin(
        "mapping_lab",
        "Mapping lab",
        controls=[
            Range("logscale", "scale (log)", -1, 2, 0.01, 0),
            Select(
                "mapping",
                "mapping",
                (
                    ("softmax", "softmax"),
                    ("sparsemax", "sparsemax"),
                    ("entmax15", "1.5-entmax"),
                ),
                "softmax",
            ),
        ],
        readouts=[
            Readout("support", "support"),
            Readout("entropy", "entropy"),
            Readout("max", "largest weight"),
            Readout("total", "sum"),
        ],
        data={"scores": scores},
        note="The bars are the weights p of the scaled scores s (written under each "
        "key); grey keys get exactly zero.",
    )


def _mapping_lab_reference(settings: dict, data: dict) -> dict:
    scale = 10.0 ** float(settings["logscale"])
    z = scale * torch.tensor(data["scores"], dtype=torch.float64)
    p = _MAPS[settings["mapping"]](z)
    q = p[p > 0]
    out = {f"p:{j}": float(v) for j, v in enumerate(p)}
    out.update(
        support=int((p > 0).sum()),
        entropy=_num(-(q * q.log()).sum()),
        max=float(p.max()),
        total=float(p.sum()),
        logscale=scale,
    )
    return out


register_check(
    "mapping_lab",
    TwinCheck(
        cases=[
            {"logscale": 0, "mapping": "softmax"},
            {"logscale": 2, "mapping": "softmax"},
            {"logscale": 2, "mapping": "sparsemax"},
            {"logscale": 0, "mapping": "sparsemax"},
            {"logscale": -1, "mapping": "sparsemax"},
            {"logscale": 0.3, "mapping": "entmax15"},
            {"logscale": -1, "mapping": "entmax15"},
        ],
        reference=_mapping_lab_reference,
    ),
)


# ------------------------------------------------------------- 2. query vs keys
def query_vs_keys_twin() -> Twin:
    """Chapter 2: rotate and stretch one query; five scorers' scores and weights.

    The keys and the scorers' weights are those of
    :func:`attnlab.widgets.recipe.query_vs_keys` (``recipe_scorers()``).
    """
    from .recipe import KEYS, recipe_scorers

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
        "one-hot, while the additive row stays near 1/4 and the MLP row in between "
        "(why?).",
    )


def _query_vs_keys_reference(settings: dict, data: dict) -> dict:
    from .recipe import recipe_scorers

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


# ------------------------------------------------------------------ 3. mask lab
_MASK_OPTIONS = (
    ("boolean", "boolean (attnlab)"),
    ("-inf", "−inf"),
    ("-10000", "−10000"),
    ("-1e9", "−1e9"),
)


def mask_lab_twin() -> Twin:
    """Chapter 5: mask two padding keys with −inf, −10000 or −1e9, in float32 or
    (emulated) float16, with the scores scaled up and optionally a fully masked row."""
    from .self_attention import _LAB_SCORES

    return Twin(
        "mask_lab",
        "Mask lab",
        controls=[
            Select("mask", "mask", _MASK_OPTIONS, "-10000"),
            Range("logscale", "scores × (log)", 0, 4.5, 0.25, 0),
            Select("dtype", "dtype", ("float32", "float16"), "float32"),
            Checkbox("whole_row", "mask every key of the last query"),
        ],
        readouts=[
            Readout("leak", "largest weight on padding (real queries)"),
            Readout("nan", "NaN anywhere"),
            Readout("mask_value", "mask value in this dtype"),
        ],
        data={"scores": _LAB_SCORES.double().tolist(), "n_pad": 2},
        note="float16 is emulated: every operation is rounded to float16 as PyTorch "
        "does (−1e9 does not fit and becomes −inf). Red cells are NaN.",
    )


def _mask_lab_reference(settings: dict, data: dict) -> dict:
    from .self_attention import mask_lab

    mask = "boolean (attnlab)" if settings["mask"] == "boolean" else settings["mask"]
    scale = 10.0 ** float(settings["logscale"])
    r = mask_lab(mask, scale, settings["dtype"], bool(settings["whole_row"]), False)
    w = r["weights"]  # (T, S) float32
    out = {
        f"w:{i}:{j}": float(w[i, j])
        for i in range(w.shape[0])
        for j in range(w.shape[1])
    }
    mv = r["mask_value_in_dtype"]
    out.update(
        leak=r["leaked"],
        nan="yes" if r["has_nan"] else "no",
        mask_value="none" if mv is None else mv,
        logscale=scale,
    )
    return out


register_check(
    "mask_lab",
    TwinCheck(
        cases=[
            {"mask": "-10000", "logscale": 0, "dtype": "float32", "whole_row": False},
            {"mask": "-10000", "logscale": 4.5, "dtype": "float32", "whole_row": False},
            {"mask": "-1e9", "logscale": 4.5, "dtype": "float32", "whole_row": True},
            {"mask": "-1e9", "logscale": 1, "dtype": "float16", "whole_row": False},
            {"mask": "-inf", "logscale": 0, "dtype": "float32", "whole_row": True},
            {"mask": "-10000", "logscale": 3, "dtype": "float16", "whole_row": False},
            {"mask": "boolean", "logscale": 2, "dtype": "float16", "whole_row": True},
        ],
        reference=_mask_lab_reference,
        # float32: one ulp of exp may differ (torch's vectorised exp vs the browser's);
        # float16: one half-precision ulp (2^-11 relative) of a weight in [0, 1].
        tol={
            "w": lambda s: 1e-3 if s["dtype"] == "float16" else 1e-6,
            "leak": lambda s: 1e-3 if s["dtype"] == "float16" else 1e-6,
            "logscale": 1e-9,
        },
        default_tol=0.0,
    ),
)


# ------------------------------------------------------------------- 4. sqrt(d_k)
SQRT_DK = {"n_queries": 100, "n_keys": 16, "seed": 0}


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


def sqrt_dk_stats(d_k: int, n_queries: int = 100, n_keys: int = 16, seed: int = 0):
    """What the √d_k twin shows, computed with attnlab on the twin's random numbers.

    Query ``i`` and its ``n_keys`` keys are consecutive blocks of ``normals(seed + d_k,
    ...)``. Returns the sample std of the raw scores ``q·k`` and of the scaled ones
    ``q·k/√d_k``, and the mean largest softmax weight of each.
    """
    g = normals(seed + d_k, n_queries * (n_keys + 1) * d_k)
    g = torch.from_numpy(g).view(n_queries, n_keys + 1, d_k)  # (N, 1 + K, d_k)
    q, k = g[:, :1], g[:, 1:]  # (N, 1, d_k), (N, K, d_k)
    raw = dot_score(q, k)[:, 0]  # (N, 1, d_k) @ (N, d_k, K) -> (N, K)
    scaled = scaled_dot_score(q, k)[:, 0]  # (N, K)
    return {
        "sd_raw": float(raw.std()),
        "sd_scaled": float(scaled.std()),
        "peak_raw": float(M.softmax(raw).amax(-1).mean()),
        "peak_scaled": float(M.softmax(scaled).amax(-1).mean()),
    }


def sqrt_dk_twin() -> Twin:
    """Chapter 5: d_k from 1 to 1024; spread of the scores and peak of the softmax."""
    return Twin(
        "sqrt_dk",
        "Why divide by √d_k",
        controls=[Range("log2dk", "d_k (powers of 2)", 0, 10, 1, 6)],
        readouts=[
            Readout("sd_raw", "std of q·k"),
            Readout("sd_scaled", "std of q·k/√d_k"),
            Readout("peak_raw", "mean largest weight, unscaled"),
            Readout("peak_scaled", "scaled"),
        ],
        data=dict(SQRT_DK),
        note=f"{SQRT_DK['n_queries']} random queries, {SQRT_DK['n_keys']} random keys "
        "each, entries N(0, 1), drawn in your browser from a fixed seed.",
        head=HEAD,  # it follows a static figure, not a widget
    )


def _sqrt_dk_reference(settings: dict, data: dict) -> dict:
    d_k = 2 ** int(settings["log2dk"])
    out = sqrt_dk_stats(d_k, data["n_queries"], data["n_keys"], data["seed"])
    out["log2dk"] = d_k
    return out


register_check(
    "sqrt_dk",
    TwinCheck(
        cases=[{"log2dk": 0}, {"log2dk": 6}, {"log2dk": 10}],
        reference=_sqrt_dk_reference,
        default_tol=1e-9,
    ),
)


# ------------------------------------------------------------ 5. positional enc.
def positional_twin(n_positions: int = 64, d_model: int = 32, base: float = 10000.0):
    """Chapter 7: the sinusoidal table; sliders pick a position and a feature."""
    if n_positions < 2 or d_model < 2:
        raise ValueError(
            f"positional_twin needs n_positions >= 2 and d_model >= 2, got "
            f"{n_positions}, {d_model}"
        )
    return Twin(
        "positional",
        "Sinusoidal positional encoding",
        controls=[
            Range("position", "position", 0, n_positions - 1, 1, 10),
            Range("dim", "feature", 0, d_model - 1, 1, 4),
        ],
        readouts=[
            Readout("value", "PE[position, feature]"),
            Readout("wavelength", "wavelength"),
        ],
        data={"n_positions": n_positions, "d_model": d_model, "base": base},
        note="Red is +1, blue −1. Low features turn fast (short wavelengths), high "
        "features slowly: together they give every position a distinct code.",
    )


def _positional_reference(settings: dict, data: dict) -> dict:
    pos, dim = int(settings["position"]), int(settings["dim"])
    P, D, base = data["n_positions"], data["d_model"], data["base"]
    pe = sinusoidal_encoding(P, D, base=base, dtype=torch.float64)
    return {
        "value": float(pe[pos, dim]),
        "wavelength": 2 * math.pi * base ** ((dim - dim % 2) / D),
        "position": pos,
        "dim": dim,
    }


register_check(
    "positional",
    TwinCheck(
        cases=[
            {"position": 10, "dim": 4},
            {"position": 0, "dim": 1},
            {"position": 63, "dim": 0},
            {"position": 37, "dim": 31},
        ],
        reference=_positional_reference,
        default_tol=1e-12,
    ),
)


# ------------------------------------------------------- 6. attention maps (model)
def attention_maps_twin(examples: dict, title: str = "Attention maps") -> Twin:
    """Precomputed attention maps of a trained model, chosen by a selector.

    ``examples``: ``{label: {"src": [source tokens], "out": [output tokens, one per
    row], "weights": (T, S) nested list or tensor, "text": the output string}}``, e.g.
    from ``Seq2Seq.translate``. The model does not run in the browser; the page says so.
    """
    if not examples:
        raise ValueError("attention_maps_twin needs at least one example")
    exs = []
    for label, e in examples.items():
        w = torch.as_tensor(e["weights"], dtype=torch.float64)
        if w.dim() != 2 or w.shape != (len(e["out"]), len(e["src"])):
            raise ValueError(
                f"example {label!r}: weights must be (len(out), len(src)) = "
                f"({len(e['out'])}, {len(e['src'])}), got {tuple(w.shape)}"
            )
        exs.append(
            {
                "label": str(label),
                "src": [str(s) for s in e["src"]],
                "out": [str(s) for s in e["out"]],
                "text": str(e.get("text", "")),
                "weights": [[round(float(x), 5) for x in row] for row in w],
            }
        )
    return Twin(
        "attention_maps",
        title,
        controls=[
            Select(
                "example",
                "input",
                tuple((str(i), e["label"]) for i, e in enumerate(exs)),
                "0",
            ),
            Range("step", "output step", 0, max(len(e["out"]) for e in exs) - 1, 1, 0),
        ],
        readouts=[
            Readout("output", "output"),
            Readout("writing", "writing"),
            Readout("focus", "looks most at"),
            Readout("focus_weight", "with weight"),
        ],
        data={"examples": exs},
        note="The trained model cannot run in your browser: these maps were computed "
        "by it when this page was built, for the inputs in the list.",
    )


def translation_maps(model, task, texts) -> dict:
    """``{text: example}`` for :func:`attention_maps_twin` from a seq2seq model's
    ``translate(task, text)`` (rows: the output tokens, then ``<eos>``)."""
    out = {}
    for text in texts:
        r = model.translate(task, text)
        if r["weights"] is None:
            raise ValueError("translation_maps needs a model with attention")
        rows = (list(r["out"]) + ["<eos>"])[: r["weights"].shape[0]]
        out[text] = {"src": r["src"], "out": rows, "weights": r["weights"],
                     "text": r["text"]}  # fmt: skip
    return out


def _attention_maps_reference(settings: dict, data: dict) -> dict:
    e = data["examples"][int(settings["example"])]
    w = torch.tensor(e["weights"], dtype=torch.float64)
    step = min(int(settings["step"]), w.shape[0] - 1)
    f = int(w[step].argmax())
    return {
        "output": e["text"],
        "writing": e["out"][step],
        "focus": e["src"][f],
        "focus_weight": float(w[step, f]),
        "step": step,
    }


def _attention_maps_cases(data: dict) -> list:
    cases = []
    for i, e in enumerate(data["examples"][:3]):
        T = len(e["out"])
        cases += [{"example": str(i), "step": s} for s in (0, T // 2, T - 1, 99)]
    return cases


register_check(
    "attention_maps",
    TwinCheck(cases=_attention_maps_cases, reference=_attention_maps_reference),
)
