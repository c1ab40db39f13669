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
    assert 'loading="lazy" decoding="async"' in out
    assert 'role="listitem"' in out and "doc-biblioentry" not in out
    assert "Toggle hidden content" not in out
    assert 'title="Light"' not in out and 'data-mode="light"' in out
    assert out.count("THEBE_JS_URL") == 1
    # No widget runtime on the website (issue 41): its snapshots are static images.
    assert "require.js" not in out and "embed-amd.js" not in out
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


# ------------------------------------------------------------ issue 41: page weight
def _widget_page(twin_after: bool) -> str:
    import base64
    import json

    png = base64.b64encode(
        b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (640).to_bytes(4, "big")
        + (320).to_bytes(4, "big") + b"rest"
    ).decode()  # fmt: skip
    state = {
        "state": {
            "box": {
                "model_name": "VBoxModel",
                "state": {"children": ["IPY_MODEL_s", "IPY_MODEL_o"]},
            },
            "s": {"model_name": "FloatSliderModel",
                  "state": {"description": "scale", "value": 2.5}},
            "o": {"model_name": "OutputModel", "state": {"outputs": [{
                "output_type": "display_data",
                "data": {"image/png": png, "text/plain": "<Figure>"},
                "metadata": {"image/png": {"alt": "Weights at scale 2.5: key 3 wins"}},
            }]}},
        },
        "version_major": 2,
        "version_minor": 0,
    }  # fmt: skip
    view = json.dumps({"model_id": "box", "version_major": 2, "version_minor": 0})
    twin = (
        '<div class="cell docutils container"><div class="attnlab-twin" '
        'data-twin="k"><p class="twin-head">T · <b>Runs in your browser</b>: on the '
        "website, where the widget above is a snapshot, this panel recomputes.</p>"
        "</div></div>"
    )
    return (
        '<head><script src="../vendor/require.js"></script></head><section>'
        '<div class="cell docutils container"><div class="cell_output docutils '
        f'container"><script type="application/vnd.jupyter.widget-view+json">{view}'
        "</script></div></div>" + (twin if twin_after else "<h2>Next</h2>")
        + "</section>"
        '<script type="application/vnd.jupyter.widget-state+json">'
        f"{json.dumps(state)}</script>"
    )  # fmt: skip


def test_widget_becomes_a_static_snapshot(tmp_path):
    page = tmp_path / "chapters" / "x.html"
    page.parent.mkdir()
    out = site_polish.polish_html(_widget_page(twin_after=False), page, tmp_path)
    assert "widget-state" not in out and "widget-view" not in out
    assert "require.js" not in out
    assert "Snapshot of a notebook widget (scale = 2.5)" in out
    assert 'alt="Weights at scale 2.5: key 3 wins"' in out
    pngs = list((tmp_path / "_images").glob("widget-*.png"))
    assert len(pngs) == 1
    assert f'src="../_images/{pngs[0].name}"' in out
    assert 'width="640" height="320"' in out  # sized like every figure
    assert site_polish.polish_html(out, page, tmp_path) == out


def test_snapshot_above_a_twin_is_dropped(tmp_path):
    page = tmp_path / "chapters" / "x.html"
    page.parent.mkdir()
    out = site_polish.polish_html(_widget_page(twin_after=True), page, tmp_path)
    assert "Snapshot of a notebook widget" not in out and "<img" not in out
    assert "widget above" not in out  # the twin's head no longer points at it
    assert "(works on the website too)" in out and 'data-twin="k"' in out


def test_big_twin_payload_moves_to_a_file(tmp_path):
    import json

    page = tmp_path / "chapters" / "x.html"
    page.parent.mkdir()
    big = json.dumps({"blob": "A" * (site_polish.LAZY_PAYLOAD_BYTES + 1)})
    small = json.dumps({"scores": [1, 2]})
    html = "".join(
        f'<script type="application/json" class="twin-data">{d}</script>'
        for d in (big, small)
    )
    out = site_polish.polish_html(html, page, tmp_path)
    files = list((tmp_path / "_static" / "twin-data").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text()) == json.loads(big)
    assert f'data-src="../_static/twin-data/{files[0].name}">{{}}</script>' in out
    assert small in out  # small payloads stay inline
    assert site_polish.polish_html(out, page, tmp_path) == out


def test_lighter_theme(tmp_path):
    html = (
        "<title>Attention &#8212; Attention</title>"
        '<link rel="preload" as="script" href="_static/scripts/fontawesome.js?digest=1" />'
        '<script defer src="_static/scripts/fontawesome.js?digest=1"></script>'
        '<script src="searchindex.js"></script><p>x</p>'
        '<div id="jb-print-docs-body" class="onlyprint">\n <h1>Attention</h1></div>'
        "<h1>Attention</h1>"
    )
    out = site_polish.polish_html(html, tmp_path / "index.html", tmp_path)
    assert "<title>Attention</title>" in out
    assert "fontawesome" not in out and "searchindex" not in out
    assert out.count("<h1>") == 1 and '<p class="attnlab-print-title">Attention' in out
    search = site_polish.polish_html(html, tmp_path / "search.html", tmp_path)
    assert "searchindex.js" in search  # the search page loads its index


def test_scripts_deferred_and_search_tools_on_the_search_page_only(tmp_path):
    html = (
        '<head><script src="../_static/documentation_options.js?v=1"></script>'
        '<script src="../_static/doctools.js?v=2"></script>'
        '<script src="../_static/searchtools.js"></script>'
        '<script src="../_static/language_data.js"></script></head>'
    )
    out = site_polish.polish_html(html, tmp_path / "chapters" / "x.html", tmp_path)
    assert '<script src="../_static/documentation_options.js' in out  # used inline
    assert '<script defer src="../_static/doctools.js' in out
    assert "searchtools" not in out and "language_data" not in out


def test_links_to_the_twins_under_the_title():
    html = (
        '<section><h1>5. Self-attention<a class="headerlink" href="#s">#</a></h1><p>x</p>'
        '<div class="attnlab-twin tex2jax_ignore mathjax_ignore" data-twin="sqrt_dk" '
        'id="tw-1" role="group" aria-label="Why divide by √d_k">'
        '<div class="attnlab-twin tex2jax_ignore mathjax_ignore" data-twin="mask_lab" '
        'id="tw-2" role="group" aria-label="Mask lab">'
    )
    out = site_polish.jump_to_twins(html)
    line = out[out.index("</h1>") + 5 : out.index("<p>x</p>")]
    assert '<a href="#tw-1">Why divide by √d_k</a>' in line
    assert '<a href="#tw-2">Mask lab</a>' in line
    assert site_polish.jump_to_twins(out) == out
    assert site_polish.jump_to_twins("<h1>No twin</h1>") == "<h1>No twin</h1>"


@pytest.mark.skipif(
    not (site_polish.MATHJAX_NODE / "node-main.js").exists(),
    reason="tools/vendor_js.sh has not vendored MathJax for Node.js",
)
def test_formulas_typeset_at_build_time(tmp_path):
    pytest.importorskip("shutil").which("node") or pytest.skip("no Node.js")
    page = tmp_path / "chapters" / "x.html"
    page.parent.mkdir()
    (tmp_path / "vendor" / "mathjax" / "output").mkdir(parents=True)
    (tmp_path / "vendor" / "mathjax" / "tex-mml-chtml.js").write_text("//")
    html = (
        "<html><head><script>window.MathJax = {}</script>"
        '<script defer="defer" src="../vendor/mathjax/tex-mml-chtml.js?v=1"></script>'
        "</head><body>"
        '<p><span class="math notranslate nohighlight">\\(\\alpha &lt; 1\\)</span></p>'
        '<div class="math notranslate nohighlight">\n\\[\\sum_j p_j = 1\\]</div>'
        "</body></html>"
    )
    page.write_text(html)
    site_polish.polish_dir(tmp_path)
    out = page.read_text()
    # MathML Core, drawn by the browser (and read by screen readers): no MathJax
    assert out.count("<math") == 2 and '<math display="block">' in out
    assert "<mi>α</mi><mo>&lt;</mo><mn>1</mn>" in out
    assert (
        "mjx-" not in out and "tex-mml-chtml" not in out and "window.MathJax" not in out
    )
    assert not (tmp_path / "vendor" / "mathjax").exists()  # nor its fonts
    assert not (tmp_path / "_static" / "mathjax-chtml.css").exists()
    site_polish.polish_dir(tmp_path)
    assert page.read_text() == out  # idempotent


# ------------------------------------------ a build that cannot publish half-done
UNPOLISHED = (
    "<html><head><title>Attention &#8212; Attention</title>"
    "<script>window.MathJax = {options: {}}</script>"
    '<script defer src="../vendor/mathjax/tex-mml-chtml.js"></script>'
    '<script defer src="../_static/scripts/fontawesome.js?digest=1"></script>'
    '<script src="../searchindex.js"></script>'
    '<script src="../vendor/require.js"></script></head><body>'
    '<div id="jb-print-docs-body" class="onlyprint">\n <h1>Attention</h1></div>'
    "<h1>Attention</h1>"
    '<script type="application/vnd.jupyter.widget-view+json">{"model_id": "m"}'
    "</script></body></html>"
)


def test_site_audit_fails_an_unpolished_page_and_passes_the_polished_one(tmp_path):
    from tools import site_audit

    found = site_audit.page_problems("chapters/x.html", UNPOLISHED)
    for what in ("MathJax runtime", "configures the MathJax", "Font Awesome",
                 "search index", "2 <h1>", "require.js", "embedded widget"):  # fmt: skip
        assert any(what in p for p in found), (what, found)
    page = tmp_path / "chapters" / "x.html"
    page.parent.mkdir()
    page.write_text(UNPOLISHED)
    (tmp_path / "index.html").write_text("<html><h1>Home</h1></html>")
    assert len(site_audit.site_problems(tmp_path)) == len(found)
    assert site_audit.main(str(tmp_path)) == 1
    # the search page may load the index; an <h1> in a script or comment is no heading
    assert (
        site_audit.page_problems(
            "search.html",
            '<script src="searchindex.js"></script><h1>S</h1><!-- <h1>x</h1> -->'
            "<script>const t = '<h1>y</h1>';</script>",
        )
        == []
    )


@pytest.mark.skipif(
    not (site_polish.MATHJAX_NODE / "node-main.js").exists(),
    reason="tools/vendor_js.sh has not vendored MathJax for Node.js",
)
def test_polished_page_passes_the_audit(tmp_path):
    from tools import site_audit

    page = tmp_path / "chapters" / "x.html"
    page.parent.mkdir()
    page.write_text(UNPOLISHED.replace("<h1>Attention</h1></div>", "<h1>A</h1></div>"))
    (tmp_path / "index.html").write_text("<html><h1>Home</h1></html>")
    site_polish.polish_dir(tmp_path)
    assert site_audit.site_problems(tmp_path) == []


def test_polish_runs_before_a_check_that_raises(tmp_path):
    """A build-finished check that raises (the notebook budget) no longer leaves the
    site unpolished: the polish runs first, and the build still fails."""
    from sphinx.application import Sphinx
    from sphinx.errors import ExtensionError

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        "extensions = ['tools.site_polish']\n"
        "def _budget(app, exc):\n"
        "    if exc is None:\n"
        "        raise __import__('sphinx.errors').errors.ExtensionError('over budget')\n"
        "def setup(app):\n"
        "    app.connect('build-finished', _budget)\n"
    )
    (src / "index.rst").write_text(
        "Home\n====\n\n.. raw:: html\n\n"
        '   <script src="_static/scripts/fontawesome.js"></script>\n'
    )
    out = tmp_path / "out"
    app = Sphinx(str(src), str(src), str(out), str(tmp_path / "dt"), "html",
                 status=None, warning=None, freshenv=True)  # fmt: skip
    with pytest.raises(ExtensionError, match="over budget"):
        app.build()
    assert "fontawesome.js" not in (out / "index.html").read_text()


@pytest.mark.skipif(
    not (site_polish.MATHJAX_NODE / "node-main.js").exists(),
    reason="tools/vendor_js.sh has not vendored MathJax for Node.js",
)
def test_mathml_core_letters_and_alignment():
    """What MathML Core lacks is rewritten: styled letters become Unicode mathematical
    letters (ℝ, 𝐖, 𝜶, ℒ), aligned columns get their text-align."""
    import json
    import subprocess

    tex = [
        [r"\mathbb{R}^d \boldsymbol{\alpha} \mathbf{W} \mathcal{L} \mathbf{0}", False],
        [r"\begin{aligned} a &= b \\ cd &= e \end{aligned}", True],
    ]
    res = subprocess.run(
        ["node", str(Path(site_polish.__file__).with_name("mathjax_prerender.js")),
         str(site_polish.MATHJAX_NODE)],
        input=json.dumps(tex), capture_output=True, text=True, check=True,
    )  # fmt: skip
    inline, aligned = json.loads(res.stdout)["html"]
    for ch in "ℝ𝜶𝐖ℒ𝟎":
        assert ch in inline, (ch, inline)
    assert 'mathvariant="bold' not in inline and "double-struck" not in inline
    assert aligned.count('style="text-align:right"') == 2
    assert aligned.count('style="text-align:left"') == 2


def test_icons_are_inline_svg_without_font_awesome():
    html = (
        '<link rel="preload" as="font" type="font/woff2" crossorigin '
        'href="_static/vendor/fontawesome/6.5.2/webfonts/fa-solid-900.woff2" />'
        '<button><i class="theme-switch fa-solid fa-moon fa-lg" data-mode="dark"></i>'
        '<i class="fab fa-github"></i><span class="btn__icon-container">'
        '<i class="fas fa-download"></i></span></button>'
        '<label class="sidebar-toggle"><span class="fa-solid fa-bars"></span></label>'
    )
    out = site_polish.inline_icons(html)
    assert "fontawesome" not in out and "fa-" not in out
    assert out.count('<svg class="attnlab-icon"') == 4
    assert '<span class="attnlab-i" data-icon="bars"><svg' in out
    assert 'class="theme-switch attnlab-i" data-icon="moon" data-mode="dark"' in out
    assert site_polish.inline_icons(out) == out
    from tools import site_audit

    assert site_audit.page_problems("x.html", html)
    assert site_audit.page_problems("x.html", out) == []


@pytest.mark.parametrize("hidden", [True, False])
def test_graded_site_has_no_solutions(tmp_path, monkeypatch, hidden):
    """make book-graded (ATTNLAB_SITE_SOLUTIONS=0): the exercises stay, every solution
    (a gated block with the cells inside it, or a tagged cell) leaves the pages."""
    pytest.importorskip("sphinx_exercise")
    pytest.importorskip("myst_parser")
    from sphinx.application import Sphinx

    monkeypatch.setenv("ATTNLAB_SITE_SOLUTIONS", "0" if hidden else "1")
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        "extensions = ['myst_parser', 'sphinx_exercise', 'tools.site_solutions']\n"
        "myst_enable_extensions = ['colon_fence']\n"
    )
    (src / "index.md").write_text(
        "# Home\n\n```{exercise}\n:label: ex-one\n\nWrite the stub.\n```\n\n"
        "```{solution-start} ex-one\n```\n\nTHE-ANSWER-IS-42\n\n"
        "    print('THE-CODE-ANSWER')\n\n```{solution-end}\n```\n\nAfter the box.\n\n"
        "```{solution} ex-one\n:label: sol-two\n\nSECOND-ANSWER\n```\n"
    )
    out = tmp_path / "out"
    app = Sphinx(str(src), str(src), str(out), str(tmp_path / "dt"), "html",
                 status=None, warning=None, freshenv=True)  # fmt: skip
    app.build()
    html = (out / "index.html").read_text()
    assert "Write the stub." in html and "After the box." in html
    for secret in ("THE-ANSWER-IS-42", "THE-CODE-ANSWER", "SECOND-ANSWER"):
        assert (secret in html) is not hidden, secret
    assert ('class="solution' in html) is not hidden


def test_twins_get_todays_runtime_once_per_page(tmp_path):
    """The website's twins run the runtime as it is now (not as it was when the
    notebook executed), with core.js and the stylesheet once per page."""
    from attnlab.course import twin
    from attnlab.course.ch02_recipe.twins import query_vs_keys_twin
    from attnlab.course.ch03_mappings.twins import mapping_lab_twin

    core = (twin.JS_DIR / "core.js").read_text()
    a, b = mapping_lab_twin().html(), query_vs_keys_twin().html()
    stale = a.replace(core, "/* an old core.js */ window.attnlabTwin = {};", 1)
    page = f"<html><body><h1>T</h1>{stale}<p>x</p>{b}</body></html>"
    out = site_polish.refresh_twin_scripts(page)
    assert out.count(core) == 1 and "an old core.js" not in out
    assert out.index(core) < out.index("attnlabTwin.define('mapping_lab'")
    assert "attnlabTwin.define('query_vs_keys'" in out
    assert out.count("<style>") == 1 and out.count("attnlabTwin.mount(") == 2
    assert site_polish.refresh_twin_scripts(out) == out
