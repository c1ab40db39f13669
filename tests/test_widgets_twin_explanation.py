"""Chapter 11's static twin (attnlab.course.ch11_explanation.twins): the HTML contract,
the reference, and the readouts in headless Chromium when it is there."""

from __future__ import annotations

import asyncio
import shutil

import pytest
import torch

from attnlab.course.ch11_explanation.twins import importance_twin  # noqa: E402
from attnlab.course.twin import CHECKS  # noqa: E402
from attnlab.data import rationale_task  # noqa: E402
from tools.browser_check import run_twins_only  # noqa: E402


def _twin():
    d = rationale_task("focus", "test", n=5)
    g = torch.Generator().manual_seed(0)
    att = torch.rand(d.ids.shape, generator=g) * d.mask
    truth = d.rationale.float()
    ties = torch.ones(d.ids.shape) * d.mask  # every token tied: position decides
    return importance_twin(
        d, {"attention": att, "truth": truth, "flat": ties}, [0, 3, 4]
    ), d


def test_contract_and_reference():
    twin, d = _twin()
    html = twin.html()
    assert 'data-twin="importance"' in html and 'data-readout="hits_attention"' in html
    ref = CHECKS["importance"].reference
    r = ref({"example": "1", "k": 2}, twin.data)
    assert r["hits_truth"] == 2  # the truth's top 2 is the rationale
    assert r["top_truth"] == d.tokens(3)[int(d.rationale[3].nonzero()[0])]
    assert r["top_flat"] == d.tokens(3)[0]  # ties: the earliest token
    assert r["hits_flat"] == int(d.rationale[3, :2].sum())
    assert len(CHECKS["importance"].cases_for(twin.data)) == 9


def test_bad_arguments_raise():
    d = rationale_task("focus", "test", n=3)
    with pytest.raises(ValueError, match="measure"):
        importance_twin(d, {}, [0])
    with pytest.raises(ValueError, match="indices"):
        importance_twin(d, {"a": torch.zeros(d.ids.shape)}, [3])
    with pytest.raises(ValueError, match="scores"):
        importance_twin(d, {"a": torch.zeros(3, 2)}, [0])


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_twin_in_chromium_shows_attnlabs_numbers(tmp_path):
    twin, _ = _twin()
    page = tmp_path / "twin.html"
    page.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'></head><body>{twin.html()}</body></html>"
    )
    errors, lines = asyncio.run(run_twins_only(CHROMIUM, page.as_uri(), None))
    assert len(lines) == 1, lines
    assert errors == [], "\n".join(errors)
