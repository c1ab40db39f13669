"""Is the built site the polished one? A static check over every page, in seconds.

    python tools/site_audit.py _build/html          (make browser-only runs it first)

The polish (tools/site_polish.py) is what makes a chapter page light and accessible; a
build whose polish did not run (a check raising before it, an old re-apply command
forgotten) still looks like a site. This check reads every HTML page of the output and
fails, naming the page, if any:

* loads the MathJax runtime (``tex-mml-chtml.js``, or a ``window.MathJax`` config):
  formulas are typeset at build time;
* loads Font Awesome (``fontawesome.js`` or its stylesheets/webfonts): icons are inline
  SVG;
* loads the search index (``searchindex.js``) anywhere but the search page;
* carries more than one ``<h1>``;
* still holds an embedded widget (a widget view or state, or the widget runtime
  ``embed-amd.js``/``require.js``): on the website those are static snapshots;
* keeps a twin's model weights inline (a payload over the lazy-load threshold).

It reads files only (no browser), so it runs on any machine right after the build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_COMMENTS = re.compile(r"<!--.*?-->", re.S)
_SCRIPT_BODY = re.compile(r"(<script\b[^>]*>).*?(</script>)", re.S)
_TWIN_DATA = re.compile(
    r'<script type="application/json" class="twin-data"[^>]*>(.*?)</script>', re.S
)
LAZY_PAYLOAD_BYTES = 50_000  # as tools/site_polish.py

_RULES = [
    (re.compile(r"<script\b[^>]*\bsrc=\"[^\"]*tex-mml-chtml\.js"), "loads the MathJax runtime (tex-mml-chtml.js)"),
    (re.compile(r"window\.MathJax\s*="), "configures the MathJax runtime in the page"),
    (re.compile(r"<(?:script|link)\b[^>]*fontawesome[^>]*>"), "loads Font Awesome"),
    (
        re.compile(r'<(?:i|span) class="[^"]*\bfa-[a-z]'),
        "draws an icon with Font Awesome's webfont",
    ),
    (re.compile(r"<script\b[^>]*embed-amd\.js"), "loads the ipywidgets runtime (embed-amd.js)"),
    (re.compile(r"<script\b[^>]*require\.js"), "loads require.js"),
    (re.compile(r"application/vnd\.jupyter\.widget-(?:view|state)\+json"), "holds an embedded widget (blank without a kernel)"),
]  # fmt: skip
_SEARCH_INDEX = re.compile(r"<script\b[^>]*\bsrc=\"[^\"]*searchindex\.js")


def page_problems(rel: str, text: str) -> list[str]:
    """What is wrong with one page's HTML (``rel``: its path in the site)."""
    out = []
    plain = _COMMENTS.sub("", text)
    # <h1> inside a script (a template string) is not a heading of the page
    markup = _SCRIPT_BODY.sub(r"\1\2", plain)
    for rule, what in _RULES:
        if rule.search(plain):
            out.append(f"{rel}: {what}")
    if Path(rel).name != "search.html" and _SEARCH_INDEX.search(plain):
        out.append(f"{rel}: loads the search index outside the search page")
    h1 = len(re.findall(r"<h1\b", markup))
    if h1 > 1:
        out.append(f"{rel}: {h1} <h1> elements (one per page)")
    for m in _TWIN_DATA.finditer(plain):
        if len(m.group(1).encode()) > LAZY_PAYLOAD_BYTES:
            out.append(f"{rel}: a twin payload of {len(m.group(1)) // 1000} KB inline")
    return out


def site_problems(site: Path) -> list[str]:
    if not (site / "index.html").exists():
        return [f"{site}/index.html not found: no built site"]
    out = []
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site)
        if rel.parts[0] in ("_static", "vendor", "check", "_sources"):
            continue
        out += page_problems(str(rel), page.read_text(encoding="utf-8"))
    return out


def main(site: str) -> int:
    errors = site_problems(Path(site))
    for e in errors:
        print("error:", e)
    n = sum(1 for _ in Path(site).rglob("*.html"))
    print(f"site audit: {n} pages, {len(errors)} problems", flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
