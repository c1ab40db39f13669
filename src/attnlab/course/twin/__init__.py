"""Static twins: widgets that keep working on the website, with no Python kernel.

An ipywidget needs a kernel; on the static site its sliders are frozen. A *twin* is a
``text/html`` output holding plain HTML controls and a short inline script that
recomputes and redraws in the browser (SVG), offline and with no dependency. The same
output works in Jupyter, JupyterLab, Colab and on the built site.

What a twin is made of:

* controls, declared in Python (:class:`Range`, :class:`Select`, :class:`Checkbox`,
  :class:`Text`), rendered as labelled ``<input type="range">``, ``<select>``, ``<input
  type="checkbox">``, ``<input type="text">`` (keyboard-operable as they are);
* readouts (:class:`Readout`): every number the twin displays sits in an element with
  ``data-readout="<name>"``, whose text the script rewrites on every ``input`` event and
  whose ``data-value`` attribute holds the exact value (for the tests);
* a JSON payload (``data``): the numbers the script needs (scores, weights, examples);
* the script: the shared runtime ``core.js`` beside this module (mappings, float16
  rounding, a seeded normal generator, SVG helpers, mounting) plus the twin's own
  ``<kind>.js`` in its chapter's folder (``attnlab/course/chNN_topic/``), which calls
  ``attnlabTwin.define(kind, setup)``.

The root element carries ``data-twin="<kind>"``. Each chapter's ``twins.py`` builds its
twins and, for each, a Python *reference* computed with attnlab and the control
settings the browser check tries (:data:`CHECKS`); ``tools/browser_check.py`` sets the
controls in headless Chromium and compares the readouts with the reference.

The script is inlined, not loaded from a file the site serves: one output then works
unchanged in a notebook and on the site, and a plain script is immune to the require.js
pitfall of UMD bundles on Jupyter Book pages (they register as anonymous AMD modules and
never define their global). The runtime is about 9 KB and defined once per page.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Range",
    "Select",
    "Checkbox",
    "Text",
    "Readout",
    "Twin",
    "TwinCheck",
    "CHECKS",
    "HEAD",
    "HEAD_AFTER_WIDGET",
    "register_check",
    "import_all_twins",
    "js_source",
]

# core.js is here; a twin's own script sits in its chapter's folder (js_scripts)
JS_DIR = Path(__file__).parent
_ids = itertools.count()
# JupyterLab binds the arrow keys to cell navigation in command mode; Lumino skips its
# shortcuts for a key pressed in an element carrying this attribute, so a focused
# slider or drop-down keeps its arrow keys (the runtime also stops those key events at
# the twin, for clients that ignore the attribute).
_KEEP_KEYS = 'data-lm-suppress-shortcuts="true"'


@dataclass(frozen=True)
class Range:
    """A slider ``<input type="range">`` with its value shown next to it.

    The value is shown in a readout named like the control; a twin's script may
    rewrite it (a log-scale slider shows ``×100``, not ``2``).
    """

    name: str
    label: str
    min: float
    max: float
    step: float
    value: float

    def html(self, uid: str) -> str:
        cid = f"{uid}-{self.name}"
        return (
            f'<label for="{cid}">{html.escape(self.label)}</label>'
            f'<input type="range" id="{cid}" name="{self.name}" min="{self.min}" {_KEEP_KEYS} '
            f'max="{self.max}" step="{self.step}" value="{self.value}">'
            f'<output for="{cid}" data-readout="{self.name}" aria-live="off" '
            f'aria-hidden="true"></output>'
        )


@dataclass(frozen=True)
class Select:
    """A drop-down ``<select>``; ``options`` are (value, label) pairs or strings."""

    name: str
    label: str
    options: tuple
    value: str | None = None

    def html(self, uid: str) -> str:
        cid = f"{uid}-{self.name}"
        opts = []
        for opt in self.options:
            val, text = (opt, opt) if isinstance(opt, str) else opt
            sel = " selected" if str(val) == str(self.value) else ""
            opts.append(
                f'<option value="{html.escape(str(val))}"{sel}>'
                f"{html.escape(str(text))}</option>"
            )
        return (
            f'<label for="{cid}">{html.escape(self.label)}</label>'
            f'<select id="{cid}" name="{self.name}" {_KEEP_KEYS}>{"".join(opts)}</select>'
        )


@dataclass(frozen=True)
class Checkbox:
    """A checkbox ``<input type="checkbox">`` with its label after it."""

    name: str
    label: str
    value: bool = False

    def html(self, uid: str) -> str:
        cid = f"{uid}-{self.name}"
        checked = " checked" if self.value else ""
        return (
            f'<span class="twin-check"><input type="checkbox" id="{cid}" '
            f'name="{self.name}"{checked} {_KEEP_KEYS}><label for="{cid}">'
            f"{html.escape(self.label)}</label></span>"
        )


@dataclass(frozen=True)
class Text:
    """A one-line text box ``<input type="text">`` with its label before it; every
    keystroke fires ``input`` (the twin recomputes as the reader types)."""

    name: str
    label: str
    value: str = ""
    maxlength: int = 200

    def html(self, uid: str) -> str:
        cid = f"{uid}-{self.name}"
        return (
            f'<label for="{cid}">{html.escape(self.label)}</label>'
            f'<input type="text" id="{cid}" name="{self.name}" '
            f'value="{html.escape(self.value)}" maxlength="{self.maxlength}" '
            f'autocomplete="off" autocapitalize="off" spellcheck="false" {_KEEP_KEYS}>'
        )


@dataclass(frozen=True)
class Readout:
    """A labelled number below the plot: ``label <output data-readout=name>``.

    The ``<output>`` is named by ``label`` and is not a live region of its own: the
    twin's one status line says every readout once the reader stops moving a control
    (core.js). ``announce=False`` leaves a readout out of it (a readout named ``time``
    is always left out: timings change on every keystroke).
    """

    name: str
    label: str
    announce: bool = True

    def html(self) -> str:
        quiet = "" if self.announce else ' data-announce="false"'
        return (
            f'<span class="twin-readout">{html.escape(self.label)} '
            f'<output data-readout="{self.name}" aria-label="{html.escape(self.label)}" '
            f'aria-live="off"{quiet}>–</output></span>'
        )


# Colours come from the site theme's variables (pydata-sphinx-theme), with fallbacks for
# Jupyter and Colab. In its dark theme the site paints every HTML output on a light box
# (for tables styled for light pages); the rule on div.text_html undoes that for twins.
_CSS = """
.attnlab-twin{--tw-fg:var(--pst-color-text-base,currentColor);
 --tw-muted:var(--pst-color-text-muted,#5b6270);--tw-border:var(--pst-color-border,#c8ccd2);
 --tw-a1:#b35900;--tw-a2:#1f6fb5;--tw-a3:#1e7b4f;--tw-a4:#8a3fa8;--tw-a5:#b8324f;
 color:var(--tw-fg);border:1px solid var(--tw-border);border-radius:6px;
 padding:.6em .9em;margin:.6em 0 1.2em;font-size:.9rem;line-height:1.4;max-width:100%;
 box-sizing:border-box}
html[data-theme=dark] .attnlab-twin{--tw-a1:#f0a060;--tw-a2:#7fb8f0;--tw-a3:#5cc98f;
 --tw-a4:#cf8fe6;--tw-a5:#f07f9a}
.attnlab-twin .twin-head{margin:0 0 .4em;font-size:.85rem;color:var(--tw-muted)}
.attnlab-twin .twin-head b{color:var(--tw-fg)}
.attnlab-twin .twin-controls{display:flex;flex-wrap:wrap;gap:.2em 1.4em;align-items:center;
 margin-bottom:.4em}
.attnlab-twin .twin-controls>span{display:inline-flex;flex-wrap:wrap;gap:0 .4em;
 align-items:center;max-width:100%}
.attnlab-twin input[type=range]{width:min(11em,100%);height:44px;margin:0;
 accent-color:var(--tw-a1);touch-action:pan-y}
.attnlab-twin select{color:inherit;background:transparent;border:1px solid var(--tw-border);
 border-radius:4px;padding:.1em .3em;min-height:44px;min-width:44px;max-width:100%}
.attnlab-twin select option{color:#111;background:#fff}
.attnlab-twin .twin-check{min-height:44px}
.attnlab-twin input[type=text]{color:inherit;background:transparent;font:inherit;
 border:1px solid var(--tw-border);border-radius:4px;padding:.1em .4em;min-height:44px;
 box-sizing:border-box;width:min(16em,100%)}
.attnlab-twin input[type=checkbox]{width:44px;height:44px;margin:0;accent-color:var(--tw-a1)}
.attnlab-twin :focus-visible{outline:2px solid var(--tw-a2);outline-offset:2px}
.attnlab-twin output{font-variant-numeric:tabular-nums;min-width:3.5em;display:inline-block}
.attnlab-twin .twin-plot{overflow-x:auto;max-width:100%}
.attnlab-twin .twin-svg{height:auto;display:inline-block;vertical-align:top}
.attnlab-twin .twin-readouts{display:flex;flex-wrap:wrap;gap:.2em 1.4em;margin-top:.3em}
.attnlab-twin .twin-note{margin:.4em 0 0;font-size:.8rem;color:var(--tw-muted)}
.attnlab-twin table{border-collapse:collapse;font-size:.8rem;margin:.3em 0}
.attnlab-twin td,.attnlab-twin th{padding:.1em .5em;text-align:right;
 border-bottom:1px solid var(--tw-border);font-variant-numeric:tabular-nums}
html[data-theme=dark] body .bd-content div.cell_output div.text_html:has(div.attnlab-twin){
 background:transparent;color:inherit;padding:0}
.attnlab-twin{position:relative}
.attnlab-twin .twin-status{position:absolute;width:1px;height:1px;overflow:hidden;
 clip:rect(0 0 0 0);white-space:nowrap;margin:-1px}
.attnlab-twin .twin-canvas{display:inline-block;vertical-align:top}
.attnlab-twin[data-twin-error]::after{content:"This widget failed: " attr(data-twin-error);
 color:var(--tw-a5)}
"""

HEAD = "<b>Runs in your browser</b> (works on the website too)."
# For a twin shown right after the ipywidget it mirrors: worded for both readers, the
# one with a kernel (the widget above is live) and the one on the website (it is not).
HEAD_AFTER_WIDGET = (
    "<b>Runs in your browser</b>: on the website, where the widget above is a "
    "snapshot, this panel recomputes."
)


def import_all_twins() -> list[str]:
    """Import every chapter's ``twins.py`` (``attnlab/course/chNN_topic/twins.py``), so
    that each registers its browser checks in :data:`CHECKS`; returns their names."""
    import importlib

    names = [
        f"attnlab.course.{p.parent.name}.twins"
        for p in sorted(JS_DIR.parent.glob("ch*/twins.py"))
    ]
    for name in names:
        importlib.import_module(name)
    return names


def js_scripts() -> dict[str, Path]:
    """``{kind: path}`` of every twin's script (``<chapter folder>/<kind>.js``)."""
    return {p.stem: p for p in sorted(JS_DIR.parent.glob("ch*/*.js"))}


def js_source(kind: str, libs: tuple = ()) -> str:
    """The runtime, the libraries ``course/twin/<lib>.js`` named in ``libs`` (e.g.
    ``("nn",)``: the float32 inference runtime of the live models), then the script of
    twin ``kind`` (``chNN_topic/<kind>.js``)."""
    scripts = js_scripts()
    if kind not in scripts:
        raise ValueError(f"no twin script {kind}.js; known twins: {sorted(scripts)}")
    parts = [JS_DIR / "core.js", *(JS_DIR / f"{lib}.js" for lib in libs), scripts[kind]]
    return "\n".join(p.read_text() for p in parts)


def _json_for_script(data) -> str:
    # Inside <script type="application/json">: "</script>" must not appear.
    text = json.dumps(data, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass
class Twin:
    """One twin: ``kind`` names its script, the rest is what the page shows.

    Display it (it is the last expression of a cell, or pass it to ``display``) to
    emit the ``text/html`` output; :meth:`html` returns the same string.
    """

    kind: str
    title: str
    controls: list = field(default_factory=list)
    readouts: list = field(default_factory=list)
    data: dict = field(default_factory=dict)
    note: str = ""
    head: str = HEAD_AFTER_WIDGET
    libs: tuple = ()  # libraries in course/twin/ the script needs, e.g. ("nn",)

    def html(self) -> str:
        uid = f"attnlab-twin-{self.kind}-{os.getpid():x}-{next(_ids)}"
        controls = "".join(f"<span>{c.html(uid)}</span>" for c in self.controls)
        readouts = "".join(r.html() for r in self.readouts)
        note = f'<p class="twin-note">{self.note}</p>' if self.note else ""
        return (
            f'<div class="attnlab-twin tex2jax_ignore mathjax_ignore" '
            f'data-twin="{self.kind}" id="{uid}" role="group" '
            f'aria-label="{html.escape(self.title)}">'
            f"<style>{_CSS}</style>"
            f'<p class="twin-head">{html.escape(self.title)} · {self.head}</p>'
            f'<div class="twin-controls">{controls}</div>'
            f'<div class="twin-plot"></div>'
            f'<div class="twin-readouts">{readouts}</div>{note}'
            f'<div class="twin-status" role="status" aria-atomic="true"></div>'
            f'<script type="application/json" class="twin-data">'
            f"{_json_for_script(self.data)}</script></div>"
            f"<script>{js_source(self.kind, self.libs)}\nattnlabTwin.mount({json.dumps(uid)});"
            f"</script>"
        )

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {
            "text/html": self.html(),
            "text/plain": f"<{self.title}: an interactive twin; open in a browser>",
        }


# ------------------------------------------------------------------ browser checks
@dataclass
class TwinCheck:
    """How the browser check tests one kind of twin.

    ``cases``: control settings to try (``{control name: value}``; values as the
    control takes them), or a function of the twin's payload that returns them. ``reference(settings, data)``: the readouts attnlab expects,
    ``{readout name: number, bool or str}`` (``data`` is the twin's payload read back
    from the page). ``tol``: absolute tolerance per readout name prefix (the part
    before the first ``:``), default ``default_tol``.
    """

    cases: list | Callable[[dict], list]
    reference: Callable[[dict, dict], dict]
    tol: dict = field(default_factory=dict)
    default_tol: float = 1e-9

    def cases_for(self, data: dict) -> list:
        return self.cases(data) if callable(self.cases) else self.cases

    def tolerance(self, readout: str, settings: dict) -> float:
        tol = self.tol.get(readout.split(":")[0], self.default_tol)
        return tol(settings) if callable(tol) else tol


CHECKS: dict[str, TwinCheck] = {}


def register_check(kind: str, check: TwinCheck) -> None:
    """Tell the browser check how to test twins of ``kind``."""
    CHECKS[kind] = check


def close(got, expected, tol: float) -> bool:
    """Does a readout's exact value ``got`` (a string) match ``expected``?"""
    if isinstance(expected, bool):
        return got in ("true", "1", "yes") if expected else got in ("false", "0", "no")
    if isinstance(expected, str):
        return got == expected
    try:
        g = float(got)
    except (TypeError, ValueError):
        return False
    e = float(expected)
    if math.isnan(e) or math.isnan(g):
        return math.isnan(e) and math.isnan(g)
    if math.isinf(e) or math.isinf(g):
        return e == g
    return abs(g - e) <= tol
