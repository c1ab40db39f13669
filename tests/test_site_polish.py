"""The site's accessibility and phone fixes (tools/figure_alt.py, tools/site_polish.py)
and the browser check's verdicts on console errors, requests and the phone layout
(tools/browser_check.py), without a browser."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt  # conftest.py has set the Agg backend
import pytest

from tools import browser_check as bc
from tools import figure_alt, site_polish


def test_alt_from_output_metadata():
    meta = {"image/png": {"alt": "Softmax weights:\n key 3 takes 0.99", "width": 300}}
    assert figure_alt.alt_of(meta, "image/png") == "Softmax weights: key 3 takes 0.99"
    assert figure_alt.alt_of({}, "image/png") is None
    assert figure_alt.alt_of({"image/png": {"alt": "  "}}, "image/png") is None


@pytest.mark.parametrize(
    "alt,bad",
    [
        (None, True),
        ("", True),
        ("../_images/3f9a0c2b7d1e4f5a6b7c8d9e0f1a2b3c.png", True),
        ("0123456789abcdef0123456789abcdef", True),
        ("figure.png", True),
        ("Softmax weights at scale x1 and x100: at x100 key 3 takes 0.99", False),
    ],
)
def test_hash_like_alt(alt, bad):
    assert figure_alt.looks_like_a_file_name(alt) is bad


def test_myst_nb_image_gets_the_alt():
    pytest.importorskip("myst_nb")
    from myst_nb.core.render import MimeData, NbElementRenderer

    figure_alt._patch_myst_nb()
    figure_alt._patch_myst_nb()  # idempotent
    assert NbElementRenderer.render_image._attnlab_alt

    class Fake:  # what render_image uses of the renderer
        def write_file(self, path, content, overwrite=False, exists_ok=False):
            return "img.png"

        class renderer:
            @staticmethod
            def get_cell_level_config(*a, **k):
                return {}

    data = MimeData(
        "image/png",
        "iVBORw0KGgo=",
        output_metadata={"image/png": {"alt": "Two bars: 0.7 and 0.3"}},
    )
    node = NbElementRenderer.render_image(Fake(), data)[0]
    assert node["alt"] == "Two bars: 0.7 and 0.3"


def _png(tmp_path: Path, w_in=6.0, h_in=3.0) -> Path:
    fig = plt.figure(figsize=(w_in, h_in), dpi=100)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    (tmp_path / "_images").mkdir(exist_ok=True)
    path = tmp_path / "_images" / "abc.png"
    path.write_bytes(buf.getvalue())
    return path


def test_polish_html(tmp_path):
    _png(tmp_path)
    page = tmp_path / "chapters" / "x.html"
    page.parent.mkdir()
    html = (
        '<head><script src="../vendor/require.js"></script>'
        '<script src="../vendor/embed-amd.js" data-x="1"></script>'
        '<script>const THEBE_JS_URL = "u"; const a = 1</script>'
        '<script>const THEBE_JS_URL = "u"; const a = 1</script></head>'
        '<img alt="A figure" src="../_images/abc.png" />'
        '<div class="citation-list" role="list"><div role="doc-biblioentry">x</div></div>'
        '<summary aria-label="Toggle hidden content"><span>Show code cell source</span>'
        '<i class="theme-switch fa-solid fa-sun" data-mode="light" title="Light"></i>'
    )
    out = site_polish.polish_html(html, page)
    assert 'width="600" height="300" style="min-width:408px"' in out
    assert 'role="listitem"' in out and "doc-biblioentry" not in out
    assert "Toggle hidden content" not in out
    assert 'title="Light"' not in out and 'data-mode="light"' in out
    assert out.count("THEBE_JS_URL") == 1
    assert out.count("<script defer ") == 2
    assert site_polish.polish_html(out, page) == out  # idempotent
    # 10-pt text (13.9 px at 100 dpi) at the minimum width stays >= 9 px.
    assert 10 * 100 / 72 * site_polish.MIN_SCALE >= 9


def test_load_problems():
    base = "http://127.0.0.1:8000"
    ev = [
        {"method": "Network.requestWillBeSent",
         "params": {"requestId": "1", "request": {"url": base + "/a.js"}}},
        {"method": "Network.requestWillBeSent",
         "params": {"requestId": "2", "request": {"url": "https://cdn.example/x.js"}}},
        {"method": "Network.responseReceived",
         "params": {"response": {"status": 404, "url": base + "/f.woff2"}}},
        {"method": "Runtime.exceptionThrown", "params": {"exceptionDetails": {
            "exception": {"description": "TypeError: reading 'Queue'\n at x"}}}},
        {"method": "Runtime.consoleAPICalled",
         "params": {"type": "error", "args": [{"value": "Got invalid theme mode"}]}},
        {"method": "Runtime.consoleAPICalled", "params": {"type": "log", "args": []}},
        {"method": "Log.entryAdded", "params": {"entry": {
            "level": "error", "source": "network", "text": "Failed to load resource"}}},
    ]  # fmt: skip
    problems, counts = bc.load_problems("p.html", ev, base)
    assert counts == {"console": 2, "failed": 1, "outside": 1}
    assert any("Queue" in p for p in problems)
    assert any("404" in p and "f.woff2" in p for p in problems)
    assert bc.load_problems("p.html", [], base) == (
        [],
        {"console": 0, "failed": 0, "outside": 0},
    )


def test_phone_problems():
    ok = {"vw": 390, "width": 390, "wide": [], "figs": [{"src": "a.png", "scale": 0.7}],
          "svgs": [{"twin": "t", "px": 10.0}],
          "targets": [{"twin": "t", "name": "n", "w": 200, "h": 44}]}  # fmt: skip
    assert bc.phone_problems("p", ok) == []
    bad = dict(
        ok,
        width=463,
        figs=[{"src": "a.png", "scale": 0.3}],
        svgs=[{"twin": "t", "px": 4.2}],
        targets=[{"twin": "t", "name": "n", "w": 158, "h": 16}],
    )
    assert len(bc.phone_problems("p", bad)) == 4
