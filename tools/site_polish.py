"""Sphinx extension: fix what the theme and its extensions write into the built pages.

Loaded by ``_config.yml`` (``sphinx.local_extensions``). After the HTML build, every page
of the site is rewritten in place (each fix is idempotent, and the browser check,
``tools/browser_check.py``, verifies the result with axe-core at 1280 and 390 px):

* **Figures stay legible on a phone.** Each notebook figure (``<img>`` of a PNG in
  ``_images/``) gets its pixel ``width``/``height`` (no layout shift while it loads)
  and a ``min-width`` of :data:`MIN_SCALE` times its natural width: matplotlib's 10-pt
  text is 13.9 px at the course's 100 dpi, so it never shows below 9 CSS px; on a
  narrow screen the output box scrolls sideways instead (``_static/attnlab.css``).
* **The bibliography's list roles.** docutils writes ``role="doc-biblioentry"`` (a
  deprecated ARIA role) on each entry of a ``role="list"``, which then has no list items
  (axe: aria-required-children, critical): entries become ``role="listitem"``.
* **Names that match what is shown.** myst-nb's "Show code cell source" summaries carry
  ``aria-label="Toggle hidden content"``, which does not contain their visible text (axe:
  label-content-name-mismatch): the label is dropped so the visible text names them.
  The same holds for the theme's search and colour-mode buttons (their visible tooltip
  text becomes part of the name).
* **The colour-mode button's name.** Its icons' tooltips ("Light", "Dark", "System
  Settings") count as visible text that its name ("Color mode") lacks: dropped.
* **One thebe configuration.** sphinx-thebe emits its ``const THEBE_JS_URL = ...`` inline
  script twice on a page, a SyntaxError in every page's console: duplicates are
  dropped.
* **Scripts that do not block the first paint.** require.js and the 3.6 MB widget
  manager get ``defer`` if the page still loads them synchronously.

What keeps a chapter page light on a phone (issue 41; the browser check measures each
page's bytes, gzip -6 of every resource, cold cache, and asserts <= 1.5 MB):

* **No widget runtime on the website.** The ipywidgets HTML manager (embed-amd.js, 0.9 MB
  gzip, and require.js) only redrew frozen snapshots: every embedded widget is written
  here as what it showed (its images, as files in ``_images/``, and its settings), under
  a notice that it needs a kernel; a snapshot sitting right above a twin that recomputes
  the same is dropped (the twin's head then says nothing about a widget above). The
  widget state (hundreds of KB of base64 PNGs) and the two scripts go. The notebook
  editions keep their live ipywidgets.
* **Model weights in cacheable files.** A twin payload over :data:`LAZY_PAYLOAD_BYTES`
  (a trained model's weights) moves to ``_static/twin-data/<hash>.json``; the page keeps
  ``data-src`` and the twin runtime (core.js) fetches it when the twin nears the
  viewport. The notebook editions keep their payloads inline (Colab serves no files).
* **The search index on demand.** ``searchindex.js`` loads on the search page only (the
  theme's search box submits to it); other pages no longer fetch it.
* **Icons from the theme's webfonts.** The theme's CSS already draws Font Awesome icons
  from its woff2 fonts; the 1.5 MB fontawesome.js (SVG replacement) is dropped.
* **A twin within reach of the keyboard.** Under the chapter's title, a line links each
  twin on the page (Tab, Enter: the next Tab is in the twin).
* **Theme nits.** One ``<h1>`` per page (the sidebar's site title is not a heading);
  the home page's ``<title>`` does not repeat the site title.
"""

from __future__ import annotations

import base64
import hashlib
import html as _html
import json
import os
import re
import struct
from pathlib import Path

from sphinx.application import Sphinx

# 10-pt text is 13.9 px at 100 dpi; 9 / 13.9 = 0.65: never shrink a figure below this.
MIN_SCALE = 0.68

_IMG = re.compile(r"<img\b[^>]*>", re.S)
_SRC = re.compile(r'\bsrc="([^"]+)"')
_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S)


def png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) of a PNG file from its header, or None if it is not a PNG."""
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def _fix_img(tag: str, page: Path) -> str:
    m = _SRC.search(tag)
    if not m or "_images/" not in m.group(1) or "attnlab-fig" in tag:
        return tag
    size = png_size((page.parent / m.group(1)).resolve())
    if size is None:
        return tag
    w, h = size
    extra = f' width="{w}" height="{h}"' if " width=" not in tag else ""
    style = f"min-width:{round(MIN_SCALE * w)}px"
    if ' style="' in tag:
        tag = tag.replace(' style="', f' style="{style};', 1)
    else:
        extra += f' style="{style}"'
    extra += ' data-attnlab-fig="1"'
    # decoded off the main thread, fetched when near the screen (width and height are
    # set: nothing moves when it arrives)
    if " loading=" not in tag:
        extra += ' loading="lazy"'
    if " decoding=" not in tag:
        extra += ' decoding="async"'
    return tag[:4] + extra + tag[4:]


def _dedupe_scripts(text: str) -> str:
    seen: set[str] = set()

    def keep_first(m: re.Match) -> str:
        s = m.group(0)
        if "THEBE_JS_URL" not in s:
            return s
        if s in seen:
            return ""
        seen.add(s)
        return s

    return _SCRIPT.sub(keep_first, text)


def _defer(text: str) -> str:
    def add(m: re.Match) -> str:
        tag = m.group(0)
        if re.search(r"\b(defer|async)\b", tag):
            return tag
        return tag.replace("<script ", "<script defer ", 1)

    return re.sub(
        r'<script [^>]*src="[^"]*(?:require\.js|embed-amd\.js)"[^>]*>', add, text
    )


# ------------------------------------------------------------- issue 41: weight
LAZY_PAYLOAD_BYTES = 50_000  # a twin payload above this moves to a file (weights)
_TWIN_DATA = re.compile(
    r'<script type="application/json" class="twin-data">(.*?)</script>', re.S
)
_VIEW = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-view\+json">(.*?)</script>', re.S
)
_STATE = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-state\+json">(.*?)</script>\s*',
    re.S,
)
_CELL = '<div class="cell docutils container'
# The twin's head when it follows a widget (attnlab.course.twin.HEAD_AFTER_WIDGET) and
# when it stands alone (HEAD): on the website the widget above is gone.
_HEAD_AFTER_WIDGET = (
    "<b>Runs in your browser</b>: on the website, where the widget above is a "
    "snapshot, this panel recomputes."
)
_HEAD = "<b>Runs in your browser</b> (works on the website too)."
SNAPSHOT_NOTE = (
    "Snapshot of a notebook widget{at}: its controls need a running Python kernel. "
    "Open the notebook (rocket icon at the top of the page) to use them."
)


def _rel(page: Path, target: Path) -> str:
    return os.path.relpath(target, page.parent).replace(os.sep, "/")


def half_weights(body: str) -> str:
    """A twin payload whose trained models (attnlab.course.twin.live) carry float16
    weights: half the bytes (7a's date Transformer: 0.9 MB of JSON before)."""
    try:
        from attnlab.course.twin.live import to_float16
    except ImportError:  # the polish re-applied without the course package
        return body
    data = json.loads(body)

    def walk(x):
        if isinstance(x, dict):
            if {"kind", "blob", "tensors"} <= x.keys():
                return to_float16(x)
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    new = walk(data)
    return body if new == data else json.dumps(new, separators=(",", ":"))


def lazy_twin_payloads(text: str, page: Path, site: Path) -> str:
    """Twin payloads over LAZY_PAYLOAD_BYTES into ``_static/twin-data/<hash>.json``;
    the page keeps an empty payload with ``data-src`` (core.js fetches it)."""

    def move(m: re.Match) -> str:
        body = m.group(1)
        if len(body.encode()) <= LAZY_PAYLOAD_BYTES:
            return m.group(0)
        body = half_weights(body)
        digest = hashlib.sha256(body.encode()).hexdigest()[:20]
        target = site / "_static" / "twin-data" / f"{digest}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.write_text(body, encoding="utf-8")
        src = _html.escape(_rel(page, target))
        return (
            f'<script type="application/json" class="twin-data" data-src="{src}">'
            "{}</script>"
        )

    return _TWIN_DATA.sub(move, text)


def _widget_parts(model_id: str, models: dict, seen: set) -> tuple[list, list]:
    """(settings, outputs) of a widget and its children: settings as (description,
    value) of its controls, outputs as the Output widgets' stored outputs."""
    if model_id in seen or model_id not in models:
        return [], []
    seen.add(model_id)
    m = models[model_id]
    state = m.get("state", {})
    settings, outputs = [], []
    if m.get("model_name") == "OutputModel":
        outputs += state.get("outputs", [])
    desc = state.get("description")
    if desc and "value" in state and not isinstance(state["value"], (dict, list)):
        options = state.get("_options_labels")
        value = state["value"]
        if options and isinstance(value, int) and "index" in state:
            value = options[state["index"]]
        settings.append((str(desc).rstrip(":"), value))
    for child in state.get("children", []):
        if isinstance(child, str) and child.startswith("IPY_MODEL_"):
            s, o = _widget_parts(child[len("IPY_MODEL_") :], models, seen)
            settings += s
            outputs += o
    return settings, outputs


def _snapshot_html(model_id: str, models: dict, page: Path, site: Path) -> str:
    settings, outputs = _widget_parts(model_id, models, set())
    body = []
    for out in outputs:
        data, meta = out.get("data", {}), out.get("metadata", {})
        if out.get("output_type") == "stream":
            body.append(
                f'<pre class="attnlab-snapshot-text">{_html.escape(out.get("text", ""))}</pre>'
            )
        elif "image/png" in data:
            raw = base64.b64decode("".join(data["image/png"]))
            digest = hashlib.sha256(raw).hexdigest()[:20]
            target = site / "_images" / f"widget-{digest}.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.write_bytes(raw)
            alt = (meta.get("image/png") or {}).get("alt") or (
                "Figure the notebook widget drew for its initial settings"
            )
            body.append(
                f'<img src="{_html.escape(_rel(page, target))}" loading="lazy" '
                f'alt="{_html.escape(" ".join(str(alt).split()))}">'
            )
        elif "text/html" in data:
            body.append("".join(data["text/html"]))
        elif "text/plain" in data:
            body.append(f"<pre>{_html.escape(''.join(data['text/plain']))}</pre>")
    at = ""
    if settings:
        at = " (" + ", ".join(f"{d} = {v}" for d, v in settings) + ")"
    note = _html.escape(SNAPSHOT_NOTE.format(at=at))
    return (
        f'<div class="attnlab-snapshot"><p class="attnlab-frozen-note">{note}</p>'
        f"{''.join(body)}</div>"
    )


def _twin_follows(text: str, end: int) -> bool:
    """Does a twin come right after position ``end`` (this cell or the next one, with
    no heading and no prose paragraph in between)?"""
    nxt = text.find(_CELL, end)
    if nxt < 0:
        return "data-twin=" in text[end:]
    after = text.find(_CELL, nxt + len(_CELL))
    region = text[end : after if after > 0 else len(text)]
    k = region.find("data-twin=")
    if k < 0:
        return False
    between = region[:k]
    return not re.search(r"<h[1-6]\b|<section\b|<p>", between)


def drop_widget_runtime(text: str, page: Path, site: Path) -> str:
    """Embedded ipywidgets as static snapshots (or nothing, above a twin), with no
    widget state and no widget runtime scripts."""
    state_m = _STATE.search(text)
    models = {}
    if state_m:
        try:
            models = json.loads(state_m.group(1)).get("state", {})
        except json.JSONDecodeError:
            models = {}
    out, pos, dropped = [], 0, False
    for m in _VIEW.finditer(text):
        out.append(text[pos : m.start()])
        try:
            model_id = json.loads(m.group(1))["model_id"]
        except (json.JSONDecodeError, KeyError, TypeError):
            model_id = ""
        if _twin_follows(text, m.end()):
            dropped = True  # the twin below recomputes what the snapshot showed
        else:
            out.append(_snapshot_html(model_id, models, page, site))
        pos = m.end()
    out.append(text[pos:])
    text = "".join(out)
    if dropped:
        text = text.replace(_html.escape(_HEAD_AFTER_WIDGET, quote=False), _HEAD)
        text = text.replace(_HEAD_AFTER_WIDGET, _HEAD)
    text = _STATE.sub("", text)
    text = re.sub(
        r'<script\b[^>]*src="[^"]*(?:require\.js|embed-amd\.js)"[^>]*>\s*</script>\s*',
        "",
        text,
    )
    return text


# Scripts that may wait for the page to be parsed (defer keeps their order; each only
# acts on DOMContentLoaded or later): a dozen blocking requests no longer hold back the
# first paint. documentation_options.js stays: inline scripts use it at once.
_DEFERRABLE = (
    "doctools.js", "sphinx_highlight.js", "clipboard.min.js", "copybutton.js",
    "sphinx-book-theme.js", "togglebutton.js", "design-tabs.js", "attnlab.js",
)  # fmt: skip


def _defer_head_scripts(text: str) -> str:
    def add(m: re.Match) -> str:
        tag = m.group(0)
        src = re.search(r'src="([^"?]*)', tag)
        if not src or not src.group(1).endswith(_DEFERRABLE):
            return tag
        if re.search(r"\b(defer|async)\b", tag):
            return tag
        return tag.replace("<script ", "<script defer ", 1)

    return re.sub(r"<script [^>]*src=\"[^\"]*\"[^>]*>", add, text)


def lighter_theme(text: str, page: Path) -> str:
    """Search index on the search page only; no fontawesome.js; one <h1>; a home page
    <title> that does not repeat the site title."""
    if page.name != "search.html":
        # the theme's search box submits to search.html (search_as_you_type is off):
        # the index and its tools are needed there only
        text = re.sub(
            r'<script src="[^"]*(?:searchindex|_static/searchtools|_static/language_data)'
            r'\.js"></script>\s*',
            "",
            text,
        )
        text = _defer_head_scripts(text)
    text = re.sub(
        r"<(?:script|link)\b[^>]*_static/scripts/fontawesome\.js[^>]*>(?:\s*</script>)?\s*",
        "",
        text,
    )
    # The print-only copy of the title (sphinx-book-theme) is a second <h1>.
    text = re.sub(
        r'(<div id="jb-print-docs-body" class="onlyprint">\s*)<h1>(.*?)</h1>',
        r'\1<p class="attnlab-print-title">\2</p>',
        text,
        flags=re.S,
    )
    # <title>A &#8212; A</title> (the home page: its title is the site's)
    text = re.sub(
        r"<title>(.+?) (?:&#8212;|—) \1</title>", r"<title>\1</title>", text, count=1
    )
    return text


_TWIN_ROOT = re.compile(
    r'<div class="attnlab-twin[^"]*" data-twin="([^"]+)" id="([^"]+)" role="group" '
    r'aria-label="([^"]*)"'
)


def jump_to_twins(text: str) -> str:
    """Right under the chapter's title, a line linking each twin on the page: from the
    title, Tab then Enter reaches a twin, however much prose and code come before it
    (formulas are out of the tab order; links and copy buttons are not)."""
    if "attnlab-jump" in text:
        return text
    twins = _TWIN_ROOT.findall(text)
    h1 = re.search(r"<h1>.*?</h1>", text, re.S)
    if not twins or not h1:
        return text
    links = " · ".join(f'<a href="#{uid}">{title}</a>' for _, uid, title in twins)
    many = "s" if len(twins) > 1 else ""
    line = (
        f'\n<p class="attnlab-jump">Interactive panel{many} on this page, running in '
        f"your browser: {links}</p>"
    )
    return text[: h1.end()] + line + text[h1.end() :]


# ------------------------------------------------ the twins run today's runtime
# A twin's output carries its scripts inline (core.js, the libraries it needs, its own
# script) and its stylesheet, as they were when the notebook executed. On the website
# each page gets them as they are in attnlab now, once per page: the first twin brings
# the runtime and the stylesheet, the next ones only their own script (core.js and
# the libraries are guarded: a second copy was bytes doing nothing).
_TWIN_SCRIPT = re.compile(
    r"<script>((?:(?!</script>).)*?)\nattnlabTwin\.mount\((\"[^\"]+\")\);</script>",
    re.S,
)
_TWIN_STYLE = re.compile(r'(<div class="attnlab-twin[^>]*>)<style>.*?</style>', re.S)


def _twin_runtime():
    try:
        from attnlab.course import twin
    except ImportError:  # the polish re-applied without the course package
        return None
    return twin


def refresh_twin_scripts(text: str) -> str:
    twin = _twin_runtime()
    if twin is None or "attnlabTwin.mount(" not in text:
        return text
    scripts = twin.js_scripts()
    libs_known = sorted(p.stem for p in twin.JS_DIR.glob("*.js") if p.stem != "core")
    markers = {
        lib: (twin.JS_DIR / f"{lib}.js").read_text().split("\n", 1)[0]
        for lib in libs_known
    }
    sent: set[str] = set()

    def one(m: re.Match) -> str:
        old, uid = m.group(1), m.group(2)
        kind_m = re.fullmatch(r'"attnlab-twin-(.+)-[0-9a-f]+-\d+"', uid)
        kind = kind_m.group(1) if kind_m else None
        if kind not in scripts:
            return m.group(0)
        parts = []
        for name in ["core", *(lib for lib in libs_known if markers[lib] in old)]:
            if name not in sent:
                sent.add(name)
                parts.append((twin.JS_DIR / f"{name}.js").read_text())
        parts.append(scripts[kind].read_text())
        return "<script>" + "\n".join(parts) + f"\nattnlabTwin.mount({uid});</script>"

    text = _TWIN_SCRIPT.sub(one, text)
    first = [True]

    def style(m: re.Match) -> str:
        if first[0]:
            first[0] = False
            return f"{m.group(1)}<style>{twin._CSS}</style>"
        return m.group(1)

    return _TWIN_STYLE.sub(style, text)


# ------------------------------------------------ icons: inline SVG, no Font Awesome
# The theme draws about a dozen icons with Font Awesome: 275 KB of webfonts (gzip) on
# every page for ~8 glyphs. Each <i class="fa-... fa-NAME"> gets a small inline SVG of
# our own drawing inside it (the <i> and its classes stay: the theme's CSS and scripts
# show and hide them, e.g. the colour-mode icons), and the Font Awesome stylesheet and
# font preloads go. The theme's few CSS-drawn icons (admonition titles, external links)
# are redrawn in _static/attnlab.css. 16 x 16 strokes in the text colour.
_ICON_PATHS = {
    "magnifying-glass": "M11 11l3.5 3.5M12 7A5 5 0 1 1 2 7a5 5 0 0 1 10 0z",
    "list": "M5.5 4H14M5.5 8H14M5.5 12H14M2 4h.5M2 8h.5M2 12h.5",
    "bars": "M2 3.5h12M2 8h12M2 12.5h12",
    "sun": "M8 5.2a2.8 2.8 0 1 0 0 5.6 2.8 2.8 0 0 0 0-5.6zM8 1v1.6M8 13.4V15M1 8h1.6"
    "M13.4 8H15M3 3l1.2 1.2M11.8 11.8 13 13M3 13l1.2-1.2M11.8 4.2 13 3",
    "moon": "M13.5 10A6 6 0 0 1 6 2.5a6 6 0 1 0 7.5 7.5z",
    "circle-half-stroke": "M8 2a6 6 0 1 0 0 12A6 6 0 0 0 8 2zM8 2v12",
    "arrow-up": "M8 14V2.5M3.5 7 8 2.5 12.5 7",
    "angle-left": "M10 3 5 8l5 5",
    "angle-right": "M6 3l5 5-5 5",
    "download": "M8 2v8.5M4.5 7 8 10.5 11.5 7M2 14h12",
    "file": "M3.5 1.5H9L12.5 5v9.5h-9zM9 1.5V5h3.5",
    "file-pdf": "M3.5 1.5H9L12.5 5v9.5h-9zM9 1.5V5h3.5",
    "file-lines": "M3.5 1.5H9L12.5 5v9.5h-9zM9 1.5V5h3.5M5.5 8.5h5M5.5 11h5",
    "rocket": "M8 1.5c2.6 2 3.5 5 3 8.5H5c-.5-3.5.4-6.5 3-8.5zM5 10l-2 3.5h3M11 10l2 "
    "3.5h-3M8 5.5v1",
    "code": "M5.5 4 2 8l3.5 4M10.5 4 14 8l-3.5 4",
    "github": "M5.5 4 2 8l3.5 4M10.5 4 14 8l-3.5 4",
    "expand": "M2 6V2h4M10 2h4v4M14 10v4h-4M6 14H2v-4",
    "graduation-cap": "M1 6l7-3.5L15 6 8 9.5zM4 7.5V11c2 1.5 6 1.5 8 0V7.5M15 6v4",
    "pencil": "M11 2l3 3-8.5 8.5H2.5v-3z",
    "pencil-alt": "M11 2l3 3-8.5 8.5H2.5v-3z",
    "lightbulb": "M5.5 11c0-2-2.5-3-2.5-6a5 5 0 0 1 10 0c0 3-2.5 4-2.5 6zM6 13.5h4",
    "play": "M4.5 2.5v11l8.5-5.5z",
    "home": "M2 8l6-5.5L14 8M4 6.5V14h8V6.5",
}
# <i> (buttons) and <span> (the sidebar toggles a phone shows): either draws the glyph
# from the webfont, which the theme's CSS still declares
_FA_I = re.compile(r'<(i|span) class="([^"]*\bfa-[a-z0-9-]+[^"]*)"([^>]*)>\s*</\1>')


def _icon_svg(name: str) -> str:
    d = _ICON_PATHS[name]
    return (
        '<svg class="attnlab-icon" viewBox="0 0 16 16" aria-hidden="true" '
        f'focusable="false"><path d="{d}"/></svg>'
    )


def inline_icons(text: str) -> str:
    """Font Awesome icons as inline SVG, and no Font Awesome stylesheet or font."""

    def one(m: re.Match) -> str:
        tag, classes, attrs = m.group(1), m.group(2).split(), m.group(3)
        names = [c[3:] for c in classes if c.startswith("fa-")]
        name = next((n for n in names if n in _ICON_PATHS), None)
        if name is None:
            return m.group(0)
        # the fa-* classes would draw Font Awesome's glyph too (and fetch its font)
        keep = [c for c in classes if c not in ("fa", "fas", "fab", "far")
                and not c.startswith("fa-")]  # fmt: skip
        cls = " ".join([*keep, "attnlab-i"])
        return (
            f'<{tag} class="{cls}" data-icon="{name}"{attrs}>{_icon_svg(name)}</{tag}>'
        )

    text = _FA_I.sub(one, text)
    return re.sub(
        r"<link\b[^>]*(?:fontawesome|fa-(?:solid|brands|regular)-\d+)[^>]*>\s*",
        "",
        text,
    )


def polish_html(text: str, page: Path, site: Path | None = None) -> str:
    """The fixes of this module applied to one page's HTML (``site``: the site's root,
    where extracted files go; default: the page's folder)."""
    site = site or page.parent
    text = drop_widget_runtime(text, page, site)
    text = refresh_twin_scripts(text)
    text = lazy_twin_payloads(text, page, site)
    text = lighter_theme(text, page)
    text = inline_icons(text)
    text = jump_to_twins(text)
    text = _IMG.sub(lambda m: _fix_img(m.group(0), page), text)
    text = text.replace('role="doc-biblioentry"', 'role="listitem"')
    text = re.sub(
        r'(<summary\b[^>]*?)\s+aria-label="Toggle hidden content"', r"\1", text
    )
    # The theme's colour-mode button is named "Color mode", but the tooltips of its
    # icons ("Light", "Dark") count as its visible text (axe:
    # label-content-name-mismatch): the button's name says it all.
    text = re.sub(r'(<i class="theme-switch [^"]*"[^>]*?)\s+title="[^"]*"', r"\1", text)
    text = _dedupe_scripts(text)
    text = _defer(text)
    return text


# ------------------------------------------------ formulas typeset at build time
# MathJax typesetting hundreds of formulas in the page was most of a chapter's
# main-thread time on a phone (4x CPU: seconds), and its CommonHTML output (a third of a
# chapter's elements, each formula twice with its hidden MathML) most of what was left.
# The formulas are converted once here, with MathJax's TeX parser in Node.js
# (tools/mathjax_prerender.js), to MathML Core, which the browser draws itself: no
# script, no glyph stylesheet, no math webfonts; screen readers read the MathML.
_MATH = re.compile(
    r'<(span|div) class="math notranslate nohighlight"([^>]*)>(.*?)</\1>', re.S
)
MATHJAX_NODE = Path(__file__).resolve().parents[1] / "_vendor.node" / "mathjax-es5"


def _tex_of(kind: str, body: str) -> tuple[str, bool] | None:
    tex = _html.unescape(body).strip()
    if tex.startswith("\\(") and tex.endswith("\\)"):
        return tex[2:-2], False
    if tex.startswith("\\[") and tex.endswith("\\]"):
        return tex[2:-2], True
    if kind == "div" and "<" not in body:  # an amsmath environment
        return tex, True
    return None


def _no_mathjax(text: str) -> str:
    text = re.sub(r"<script>window\.MathJax = .*?</script>\s*", "", text, flags=re.S)
    return re.sub(
        r"<script\b[^>]*mathjax/tex-mml-chtml\.js[^>]*>\s*</script>\s*", "", text
    )


def typeset_formulas(pages: dict[Path, str], site: Path) -> dict[Path, str]:
    """Every page's formulas as MathML Core (see above); pages unchanged when Node.js
    or the MathJax package (tools/vendor_js.sh) is missing."""
    import shutil
    import subprocess

    node = shutil.which("node")
    if not node or not (MATHJAX_NODE / "node-main.js").exists():
        print("site_polish: formulas left to MathJax in the page (no Node.js or no "
              f"{MATHJAX_NODE}; run tools/vendor_js.sh)")  # fmt: skip
        return pages
    formulas: dict[tuple[str, bool], None] = {}
    for text in pages.values():
        for m in _MATH.finditer(text):
            f = _tex_of(m.group(1), m.group(3))
            if f:
                formulas[f] = None
    todo = list(formulas)
    done: dict[tuple[str, bool], str] = {}
    if todo:
        res = subprocess.run(
            [node, str(Path(__file__).with_name("mathjax_prerender.js")),
             str(MATHJAX_NODE)],
            input=json.dumps(todo), capture_output=True, text=True, check=True,
        )  # fmt: skip
        out = json.loads(res.stdout)
        done = {f: h for f, h in zip(todo, out["html"], strict=True) if h}
    result = {}
    for page, text in pages.items():
        missed = []

        def render(m: re.Match, missed: list = missed) -> str:
            if "<math" in m.group(3) or "<mjx-container" in m.group(3):
                return m.group(0)  # typeset already
            f = _tex_of(m.group(1), m.group(3))
            if f is None or f not in done:
                missed.append(m.group(3)[:60])
                return m.group(0)
            tag, attrs = m.group(1), m.group(2)
            return (
                f'<{tag} class="math notranslate nohighlight"{attrs}>{done[f]}</{tag}>'
            )

        new = _MATH.sub(render, text)
        if missed:
            print(f"site_polish: {page.name}: {len(missed)} formulas left to "
                  f"MathJax in the page, e.g. {missed[:2]}")  # fmt: skip
        else:  # every formula typeset (or none at all): no MathJax in this page
            new = _no_mathjax(new)
        result[page] = new
    return result


# Sphinx calls build-finished handlers in priority order (lower first; the default is
# 500) and stops at the first that raises: the budget check (tools/nbtimes.py) or any
# other check raising there would otherwise leave the site unpolished, MathJax runtime,
# fontawesome.js and two <h1>s on every page. The polish runs first, and it also runs
# when the build itself failed (a failing cell, a check raising): whatever is in the
# output folder is then polished, and the build still fails. Sphinx emits the event a
# second time, with the exception, when a handler raised: the polish runs once.
POLISH_PRIORITY = 100


def polish_site(app: Sphinx, exception: Exception | None) -> None:
    if app.builder.format != "html" or getattr(app, "_attnlab_polished", False):
        return
    out = Path(app.outdir)
    if not (out / "index.html").exists():
        return  # the build stopped before writing pages: nothing to polish
    app._attnlab_polished = True  # type: ignore[attr-defined]
    polish_dir(out)


def polish_dir(out: Path) -> None:
    """Apply :func:`polish_html` to every page of a built site, in place, then typeset
    the formulas (:func:`typeset_formulas`) and drop the MathJax runtime from the site
    when no page loads it any more."""
    old: dict[Path, str] = {}
    new: dict[Path, str] = {}
    for page in out.rglob("*.html"):
        if "_static" in page.parts or "vendor" in page.parts:
            continue
        old[page] = page.read_text(encoding="utf-8")
        new[page] = polish_html(old[page], page, out)
    new = typeset_formulas(new, out)
    for page, text in new.items():
        if text != old[page]:
            page.write_text(text, encoding="utf-8")
    mj = out / "vendor" / "mathjax"
    if mj.is_dir() and not any("tex-mml-chtml.js" in t for t in new.values()):
        # No page loads MathJax: the formulas are MathML, the browser draws them.
        import shutil

        shutil.rmtree(mj, ignore_errors=True)
    (out / "_static" / "mathjax-chtml.css").unlink(missing_ok=True)  # older builds


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", polish_site, priority=POLISH_PRIORITY)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if (
    __name__ == "__main__"
):  # re-apply to a built site: python tools/site_polish.py _build/html
    import sys

    polish_dir(Path(sys.argv[1]))
