"""The static twins of chapters 4, 8, 9 and 11 (the alignment lab, the tile map, the
attention patterns, the adversary): HTML contract, references equal to attnlab's
widget functions, and the readouts in headless Chromium when it is there."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
import torch

from attnlab.course.ch04_structured import widgets as S  # noqa: E402
from attnlab.course.ch04_structured.twins import alignment_lab_twin  # noqa: E402
from attnlab.course.ch06_multihead.twins import slides_bug_twin  # noqa: E402
from attnlab.course.ch08_fast_attention.twins import tile_map_twin  # noqa: E402
from attnlab.course.ch08_fast_attention.widgets import tile_map  # noqa: E402
from attnlab.course.ch09_subquadratic.twins import attention_pattern_twin  # noqa: E402
from attnlab.course.ch09_subquadratic.widgets import attention_pattern  # noqa: E402
from attnlab.course.ch11_explanation.twins import adversary_twin  # noqa: E402
from attnlab.course.twin import CHECKS  # noqa: E402
from attnlab.course.twin.rng import uniforms  # noqa: E402
from attnlab.explain import jsd  # noqa: E402
from tools.browser_check import run_twins_only  # noqa: E402


def _decode():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(4, generator=g, dtype=torch.float64)

    def decode(h, w):  # h (B, T, 4), w (B, T) -> logit (B,)
        return (w[..., None] * h).sum(1) @ v

    return decode


def _adversary():
    g = torch.Generator().manual_seed(1)
    T = 7
    h = torch.randn(T, 4, generator=g, dtype=torch.float64)
    w = torch.softmax(2 * torch.randn(T, generator=g, dtype=torch.float64), -1)
    toks = ["the", "film", "was", "not", "good", "at", "all"]
    return adversary_twin(_decode(), h, w, toks, eps_steps=(0.0, 0.01, 0.1), steps=30)


def all_twins():
    return [
        alignment_lab_twin(),
        tile_map_twin(),
        attention_pattern_twin(),
        _adversary(),
        slides_bug_twin(),
    ]


@pytest.mark.parametrize("twin", all_twins(), ids=lambda t: t.kind)
def test_contract(twin):
    html = twin.html()
    assert f'data-twin="{twin.kind}"' in html and twin.kind in CHECKS
    assert html.count('data-lm-suppress-shortcuts="true"') == len(twin.controls)
    assert "http://" not in html and "https://" not in html
    assert len(html.encode()) < 40_000
    json.dumps(twin.data, allow_nan=False)


def _settings(twin, **case):
    st = {c.name: c.value for c in twin.controls}
    st.update(case)
    return st


def test_alignment_lab_reference_is_the_widgets_mapping():
    twin = alignment_lab_twin()
    ref = CHECKS["alignment_lab"].reference
    for mapping in ("softmax", "sparsemax", "entmax15", "fusedmax", "CRF marginals"):
        r = ref(_settings(twin, mapping=mapping, target="Vou", logtemp=-0.3), twin.data)
        w = S.map_scores(
            torch.tensor(S.SPAN_SCORES["Vou"], dtype=torch.float64), mapping, 10**-0.3
        )
        got = torch.tensor([r[f"p:{j}"] for j in range(len(S.SOURCE))], dtype=w.dtype)
        torch.testing.assert_close(got, w, atol=0, rtol=0)
        assert r["support"] == int((w > 0).sum())
    # The hard sample is Gumbel-max on the twin's uniforms: one-hot at argmax(x + g).
    r = ref(_settings(twin, mapping="hard sample", seed=4), twin.data)
    x = torch.tensor(S.SPAN_SCORES["à"], dtype=torch.float64)
    u = torch.from_numpy(uniforms(4, len(x) + 1))[: len(x)]
    j = int(torch.argmax(x - torch.log(-torch.log(u))))
    assert r[f"p:{j}"] == 1.0 and r["support"] == 1 and r["sample"] == S.SOURCE[j]


def test_tile_map_and_pattern_references_are_the_widgets():
    r = CHECKS["tile_map"].reference(
        {"n": 512, "block": "64", "causal": True}, {"n_heads": 8, "d_head": 64}
    )
    out = tile_map(512, 64, True, show=False)
    assert (r["full"], r["masked"], r["skip"]) == (28, 8, 28)
    assert r["ratio"] == out["ratio"]
    twin = attention_pattern_twin()
    r = CHECKS["attention_pattern"].reference(_settings(twin), twin.data)
    out = attention_pattern("window", 64, 4, 2, 2, 3, True, show=False)
    assert r["pairs"] == out["pairs"] == int(out["mask"].sum())
    assert r["reach"] == ", ".join(map(str, out["reach_by_layer"]))


def test_adversary_reference():
    twin = _adversary()
    ref = CHECKS["adversary"].reference
    r0 = ref({"step": 0}, twin.data)
    assert r0["step"] == 0.0 and r0["dy"] == 0.0  # eps 0: nothing may move
    r2 = ref({"step": 2}, twin.data)
    a = torch.tensor(twin.data["views"][2]["adversarial"], dtype=torch.float64)
    w = torch.tensor(twin.data["weights"], dtype=torch.float64)
    assert r2["jsd"] == float(jsd(w, a)) and r2["dy"] <= 0.1
    with pytest.raises(ValueError, match="eps_steps"):
        adversary_twin(_decode(), torch.zeros(2, 4), torch.ones(2) / 2, ["a", "b"], [])


def test_slides_bug_reference_is_the_widgets_view():
    reference = CHECKS["slides_bug"].reference

    assert reference({"T": 6, "H": 3}, {}) == {
        "raises": False,
        "rows": 2,
        "seen": "0,3 | 1,4 | 2,5",
    }
    assert reference({"T": 7, "H": 3}, {})["raises"] is True


def test_import_all_twins_registers_every_chapters_checks():
    from attnlab.course.twin import import_all_twins

    names = import_all_twins()
    assert "attnlab.course.ch06_multihead.twins" in names
    assert {"slides_bug", "positional", "tile_map", "adversary"} <= set(CHECKS)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="n_heads"):
        tile_map_twin(n_heads=0)


CHROMIUM = (
    shutil.which("chromium")
    or shutil.which("chromium-browser")
    or shutil.which("google-chrome")
)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_twins_in_chromium_show_attnlabs_numbers(tmp_path):
    twins = all_twins()
    page = tmp_path / "twins.html"
    body = "".join(t.html() for t in twins)
    page.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>"
    )
    errors, lines = asyncio.run(run_twins_only(CHROMIUM, page.as_uri(), None))
    assert len(lines) == len(twins), lines
    assert errors == [], "\n".join(errors)
