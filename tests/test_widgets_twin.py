"""Static twins (attnlab.course.twin and each chapter's twins.py).

* the emitted HTML keeps the contract the site's browser check relies on;
* the runtime's math (core.js) equals attnlab's, run with Node.js when it is there;
* every twin, in headless Chromium when it is there, shows attnlab's numbers for the
  control settings of its registered check (the same check ``tools/browser_check.py``
  runs on the built site).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
import torch

import attnlab
from attnlab.course.ch01_seq2seq import twins as tw01
from attnlab.course.ch02_recipe import twins as tw02
from attnlab.course.ch03_mappings import twins as tw03
from attnlab.course.ch04_structured import twins as twins_structured  # noqa: F401
from attnlab.course.ch05_self_attention import twins as tw05
from attnlab.course.ch07_transformer import twins as tw07
from attnlab.course.ch08_fast_attention import twins as twins_fast_attention  # noqa: F401
from attnlab.course.ch09_subquadratic import twins as twins_subquadratic  # noqa: F401
from attnlab.course.ch10_pretrained import twins as twins_pretrained
from attnlab.course.ch11_explanation import twins as twins_explanation  # noqa: F401
from attnlab.course.ch12_circuits import twins as twins_circuits
from attnlab.course.ch13_modern.twins import rope_twin
from attnlab.course.ch14_serving.twins import speculative_twin
from attnlab.course.twin import (
    CHECKS,
    HEAD,
    JS_DIR,
    Readout,
    Twin,
    close,
    js_scripts,
    js_source,
    rng,
)
from tools.browser_check import _twin_case_problems, run_twins_only  # noqa: E402


def _examples():
    g = torch.Generator().manual_seed(0)
    return {
        text: {
            "src": list(text),
            "out": list(text[::-1]) + ["<eos>"],
            "text": text[::-1],
            "weights": torch.softmax(
                3 * torch.randn(len(text) + 1, len(text), generator=g), -1
            ),
        }
        for text in ("abc", "hello", "attention")
    }


def all_twins() -> list[Twin]:
    return [
        tw03.mapping_lab_twin(),
        tw02.query_vs_keys_twin(),
        tw05.mask_lab_twin(),
        tw05.sqrt_dk_twin(),
        tw07.positional_twin(),
        tw01.attention_maps_twin(_examples()),
        twins_pretrained.head_view_twin(_head_maps()),
        twins_circuits.induction_twin(_induction_maps()),
        rope_twin(),
        speculative_twin(),
    ]


def _induction_maps():
    from attnlab.circuits import AttentionOnly, InductionConfig

    torch.manual_seed(2)
    model = AttentionOnly(InductionConfig(vocab_size=9, half=4, d_model=8, n_heads=2))
    seqs = {"repeated": [0, 3, 5, 3, 2, 3, 5, 3, 2], "short": [0, 4, 1, 4, 1]}
    return twins_circuits.induction_maps(model.eval(), seqs)


def _head_maps():
    g = torch.Generator().manual_seed(1)
    return {
        " ".join(toks): {
            "tokens": toks,
            "weights": torch.softmax(
                3 * torch.randn(2, 3, len(toks), len(toks), generator=g), -1
            ),
        }
        for toks in (
            ["[CLS]", "a", "b", "[SEP]"],
            ["[CLS]", "x", "y", "z", "w", "[SEP]"],
        )
    }


class _Parse(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements, self.stack, self.text = [], [], {}

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self.stack.append(len(self.elements) - 1)

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack:
            self.text[self.stack[-1]] = self.text.get(self.stack[-1], "") + data


@pytest.mark.parametrize("twin", all_twins(), ids=lambda t: t.kind)
def test_html_contract(twin):
    html = twin.html()
    p = _Parse()
    p.feed(html)
    els = p.elements
    roots = [a for t, a in els if "data-twin" in a]
    assert len(roots) == 1 and roots[0]["data-twin"] == twin.kind
    # Controls: only standard inputs, each with an id and a <label for=...>.
    inputs = [a for t, a in els if t in ("input", "select")]
    assert inputs, "a twin has controls"
    labels = {a.get("for") for t, a in els if t == "label"}
    for a in inputs:
        assert a.get("type", "select") in ("range", "checkbox", "select")
        assert a["id"] in labels, f"control {a['name']} has no label"
        assert "tabindex" not in a  # keyboard order left to the browser
    # Every declared readout and every range's value have a data-readout element.
    readouts = {a["data-readout"] for t, a in els if "data-readout" in a}
    declared = {r.name for r in twin.readouts}
    ranges = {a["name"] for a in inputs if a.get("type") == "range"}
    assert declared | ranges <= readouts
    # The payload round-trips; the script is inline, offline, and not an AMD module.
    payload = [i for i, (t, a) in enumerate(els) if a.get("class") == "twin-data"]
    assert len(payload) == 1
    assert json.loads(p.text[payload[0]]) == json.loads(json.dumps(twin.data))
    scripts = [a for t, a in els if t == "script"]
    assert all("src" not in a for a in scripts)
    assert not re.search(r"https?://", html)
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", js_source(twin.kind), flags=re.S)
    assert not re.search(r"(?<![.\w])(define|require)\s*\(", code)
    assert len(html.encode()) < 40_000, "a twin should stay light"
    assert "attnlabTwin.mount(" in html


def test_each_display_gets_a_fresh_id_and_a_check():
    a, b = tw03.mapping_lab_twin().html(), tw03.mapping_lab_twin().html()
    ida, idb = (re.search(r'data-twin="\w+" id="([^"]+)"', h).group(1) for h in (a, b))
    assert ida != idb
    for twin in all_twins():
        assert twin.kind in CHECKS, f"twin {twin.kind} has no browser check"
    from attnlab.course.twin import import_all_twins

    import_all_twins()  # every chapter's twins.py registers its checks
    scripts = js_scripts()  # every chapter folder's twin scripts
    assert len(scripts) >= 12 and "core" not in scripts
    assert set(scripts) <= set(CHECKS)


def test_payload_cannot_close_the_script():
    t = Twin("mapping_lab", "x", data={"s": "</script><script>alert(1)"})
    assert "</script><script>alert" not in t.html()


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="known twins"):
        js_source("nope")
    with pytest.raises(ValueError, match="finite scores"):
        tw03.mapping_lab_twin([1.0, float("inf")])
    with pytest.raises(ValueError, match="at least one example"):
        tw01.attention_maps_twin({})
    bad = {"x": {"src": ["a"], "out": ["b", "c"], "weights": [[1.0]]}}
    with pytest.raises(ValueError, match=r"\(len\(out\), len\(src\)\)"):
        tw01.attention_maps_twin(bad)
    assert "readout" in Readout("a", "b").html()


def test_references_are_attnlabs_numbers():
    data = tw03.mapping_lab_twin().data
    ref = CHECKS["mapping_lab"].reference
    r = ref({"logscale": 2, "mapping": "sparsemax"}, data)  # x100
    assert r["support"] == 1 and r["max"] == 1.0 and r["entropy"] == 0.0
    r = ref({"logscale": 2, "mapping": "softmax"}, data)
    assert r["max"] > 0.99 and r["support"] == 6
    r = ref({"logscale": 0, "mapping": "entmax15"}, data)
    p = attnlab.entmax15(torch.tensor(data["scores"], dtype=torch.float64))
    assert r["support"] == int((p > 0).sum()) < 6
    # mask lab: -1e9 is -inf in float16; a fully masked -inf row is NaN.
    ref = CHECKS["mask_lab"].reference
    r = ref({"mask": "-1e9", "logscale": 0, "dtype": "float16", "whole_row": False}, {})
    assert r["mask_value"] == float("-inf") and r["nan"] == "no"
    r = ref({"mask": "-inf", "logscale": 0, "dtype": "float32", "whole_row": True}, {})
    assert r["nan"] == "yes"


def test_close():
    assert close("0.5", 0.5, 0) and not close("0.5001", 0.5, 1e-6)
    assert close("NaN", float("nan"), 0) and not close("1", float("nan"), 1)
    assert close("-Infinity", float("-inf"), 0) and close("yes", "yes", 0)
    assert close("true", True, 0) and not close("0", True, 0)


def test_failing_readouts_are_reported():
    check = CHECKS["mapping_lab"]
    data = tw03.mapping_lab_twin().data
    case = {"logscale": 2, "mapping": "sparsemax"}
    good = check.reference(case, data)
    readouts = {k: {"text": str(v), "value": str(v)} for k, v in good.items()}
    got = {"actual": case, "readouts": readouts}
    assert _twin_case_problems("t", check, case, got, data) == []
    readouts["support"] = {"text": "2", "value": "2"}
    assert "readout support" in _twin_case_problems("t", check, case, got, data)[0]
    del readouts["max"]
    assert any(
        "no readout 'max'" in e
        for e in _twin_case_problems("t", check, case, got, data)
    )


def _mulberry32_normals(seed, n):  # the straightforward loop, as written in core.js
    a, out = seed & 0xFFFFFFFF, []

    def u():
        nonlocal a
        a = (a + 0x6D2B79F5) & 0xFFFFFFFF
        t = ((a ^ (a >> 15)) * (a | 1)) & 0xFFFFFFFF
        t = ((t + (((t ^ (t >> 7)) * (t | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF) ^ t
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    for _ in range(n):
        u1, u2 = 1 - u(), u()
        out.append(np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2))
    return np.array(out)


def test_normals_mirror_the_browser_generator():
    np.testing.assert_allclose(
        rng.normals(7, 500), _mulberry32_normals(7, 500), rtol=1e-12
    )
    g = rng.normals(0, 200_000)
    assert abs(g.mean()) < 0.01 and abs(g.std() - 1) < 0.01
    s1, s64 = tw05.sqrt_dk_stats(1), tw05.sqrt_dk_stats(64)
    assert 0.8 < s64["sd_raw"] / 8 < 1.2 and 0.8 < s64["sd_scaled"] < 1.2
    assert s64["peak_raw"] > s64["peak_scaled"] and s1["sd_raw"] == s1["sd_scaled"]


NODE = shutil.which("node")

_NODE_SCRIPT = r"""
globalThis.window = globalThis;
globalThis.performance = globalThis.performance || {now: () => 0};
eval(require('fs').readFileSync(process.argv[2], 'utf8'));
const T = window.attnlabTwin, inp = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = {softmax: [], sparsemax: [], entmax15: [], f16: inp.f16.map(T.f16),
             normals: Array.from(T.normals(3, 50))};
for (const z of inp.rows) for (const k of ['softmax', 'sparsemax', 'entmax15'])
  out[k].push(T[k](z));
process.stdout.write(JSON.stringify(out, (k, v) => (typeof v === 'number' && !isFinite(v))
  ? String(v) : v));
"""


@pytest.mark.skipif(NODE is None, reason="Node.js not installed")
def test_core_math_equals_attnlab(tmp_path):
    g = torch.Generator().manual_seed(0)
    rows = [
        torch.randn(n, generator=g, dtype=torch.float64) * s
        for n in (1, 2, 6, 12)
        for s in (0.1, 1, 10, 1000)
    ]
    rows.append(torch.tensor([0.5, float("-inf"), 0.2], dtype=torch.float64))
    halves = torch.cat(
        [
            torch.randn(2000, generator=g, dtype=torch.float64)
            * 10 ** torch.randint(-8, 6, (2000,), generator=g),
            torch.tensor(
                [
                    65504.0,
                    65519.0,
                    65520.0,
                    1e9,
                    -1e9,
                    2.0**-24,
                    2.0**-25,
                    3 * 2.0**-26,
                    1 + 2.0**-11,
                    1 + 3 * 2.0**-11,
                    0.0,
                ]
            ),
        ]
    )
    halves = halves.float().double()  # the twin rounds float32 values to half
    inp = {"rows": [[v if np.isfinite(v) else None for v in r.tolist()] for r in rows],
           "f16": halves.tolist()}  # fmt: skip
    script = tmp_path / "run.js"
    script.write_text(_NODE_SCRIPT)
    text = json.dumps(inp).replace(
        "null", "-1e999"
    )  # JSON has no -inf; JS parses -1e999
    res = subprocess.run(
        [NODE, str(script), str(JS_DIR / "core.js")],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    out = json.loads(res.stdout)
    for k, fn in (
        ("softmax", attnlab.softmax),
        ("sparsemax", attnlab.sparsemax),
        ("entmax15", attnlab.entmax15),
    ):
        for z, got in zip(rows, out[k]):
            torch.testing.assert_close(
                torch.tensor(got, dtype=torch.float64), fn(z), atol=1e-12, rtol=1e-9
            )
    want = halves.half().double()
    got = torch.tensor([float(v) for v in out["f16"]], dtype=torch.float64)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    np.testing.assert_allclose(out["normals"], rng.normals(3, 50), rtol=1e-12)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_twins_in_chromium_show_attnlabs_numbers(tmp_path):
    page = tmp_path / "twins.html"
    body = "".join(t.html() for t in all_twins())
    page.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>"
    )
    errors, lines = asyncio.run(run_twins_only(CHROMIUM, page.as_uri(), None))
    assert len(lines) == len(all_twins()), lines
    assert errors == [], "\n".join(errors)


def test_head_view_twin_reads_its_thousandths():
    maps = _head_maps()
    twin = twins_pretrained.head_view_twin(maps)
    ref = CHECKS["head_view"].reference
    r = ref({"sentence": "1", "layer": 1, "head": 2, "query": 99}, twin.data)
    second = list(maps.values())[1]
    row = second["weights"][1, 2, 5]  # the query is clamped to the last token
    assert r["query"] == 5 and r["focus"] == second["tokens"][int(row.argmax())]
    assert abs(r["focus_weight"] - float(row.max())) <= 5e-4
    assert abs(r["sink"] - float(row[0] + row[-1])) <= 1e-3
    with pytest.raises(ValueError, match="at least one"):
        twins_pretrained.head_view_twin({})
    with pytest.raises(ValueError, match="3 tokens"):
        twins_pretrained.head_view_twin(
            {"s": {"tokens": ["a", "b", "c"], "weights": torch.ones(1, 1, 2, 2)}}
        )


def test_positional_dot_depends_only_on_the_offset():
    """The twin's bottom panel: PE[p] . PE[p + k] read from attnlab's table equals the
    identity the reference uses (a sum of cos(w_i k)), at every position p."""
    reference = CHECKS["positional"].reference

    data = {"n_positions": 64, "d_model": 32, "base": 10000.0}
    pe = attnlab.sinusoidal_encoding(128, 32, dtype=torch.float64)  # (P, D)
    for pos, k in ((10, 4), (40, -7), (50, 32), (0, 0), (33, 1)):
        ref = reference({"position": pos, "dim": 0, "offset": k}, data)
        assert abs(float(pe[pos] @ pe[pos + k]) - ref["dot"]) < 1e-9
    assert tw07.positional_twin().head == HEAD  # it follows a static figure
