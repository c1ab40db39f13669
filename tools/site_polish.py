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
"""

from __future__ import annotations

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


def polish_html(text: str, page: Path) -> str:
    """The fixes of this module applied to one page's HTML."""
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


def polish_site(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    polish_dir(Path(app.outdir))


def polish_dir(out: Path) -> None:
    """Apply :func:`polish_html` to every page of a built site, in place."""
    for page in out.rglob("*.html"):
        if "_static" in page.parts or "vendor" in page.parts:
            continue
        old = page.read_text(encoding="utf-8")
        new = polish_html(old, page)
        if new != old:
            page.write_text(new, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", polish_site)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if (
    __name__ == "__main__"
):  # re-apply to a built site: python tools/site_polish.py _build/html
    import sys

    polish_dir(Path(sys.argv[1]))
