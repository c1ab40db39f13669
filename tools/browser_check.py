"""Open the built site in headless Chromium, with no network, and check what a reader sees.

    python tools/browser_check.py _build/html _build/shots

The site is served on 127.0.0.1 and driven through the DevTools protocol (tornado's
websocket client, already installed with Jupyter). For every page, after its JavaScript
ran, it asserts:

* math is typeset (MathML Core written at build time, or MathJax's CommonHTML): no
  math element left as TeX;
* every page that stores widgets shows rendered widget views;
* chapter pages carry the Colab launch button, show exercise boxes, and keep every
  solution collapsed in a dropdown; the bibliography lists entries;
* no page loads a script or stylesheet from another host (it must work offline), and
  no page requests anything from another host at all;
* no console error, no uncaught exception and no failed (4xx/5xx) request on any page;
* accessibility: axe-core (vendored by tools/vendor_js.sh into the site's ``check/``;
  no page loads it) finds no serious or critical violation (light and dark theme), and every image has an
  alt text that is not a file name or a hash;
* on a phone (390 x 844 CSS px, touch): no page is wider than the screen, every figure
  shows its 10-pt text at >= 9 CSS px (font size x displayed scale; twins' SVG text
  too), and every control of a twin is a touch target of >= 44 x 44 px (a checkbox
  counts with its label);
* every static twin (``[data-twin]``, attnlab.widgets.twin) responds: its controls are
  set to the settings its registered check lists, and each readout must equal
  attnlab's own number within the check's tolerance; its controls are labelled and
  focusable, it starts in under a second, and its text stands out in the dark theme.
  A twin that runs a trained model (attnlab.course.twin.live) gets its typed inputs
  (>= 50 per model) the same way; its decode time is printed (budget 50 ms, median)
  and its page weight too (budget 1 MB per model).

Screenshots go to the shots folder: the top of each page, and on chapter pages the first
widget and the first exercise with its (collapsed) solution, and every twin in the
light and the dark theme.

Chromium is Debian's ``chromium`` package; if it is missing and we are root with apt-get,
it is installed, otherwise the check stops with a message saying how (never passes).

The student edition: every chapter page must link its student notebook, as a download
(the file is in the site and holds no solution) and in Colab (``student/`` of the
repository must hold the file Colab opens); see :func:`student_link_problems`.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from tornado.websocket import websocket_connect

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--hide-scrollbars",
    "--window-size=1280,1000",
]

# Run in the page: what a reader would see, as numbers.
PROBE = r"""
(() => {
  const q = (s) => Array.from(document.querySelectorAll(s));
  const visible = (el) => !!(el && el.offsetParent !== null);
  const math = q('.math');
  const solutions = q('.solution');
  return {
    math: math.length,
    typeset: math.filter((el) => el.querySelector('math, mjx-container')).length,
    views: q('script[type="application/vnd.jupyter.widget-view+json"]').length,
    rendered: q('.jupyter-widgets.widget-interact, .jupyter-widgets.widget-box,'
              + ' .jupyter-widgets.widget-hbox, .jupyter-widgets.widget-vbox,'
              + ' .jupyter-widgets.widget-slider, .jupyter-widgets.widget-dropdown')
              .filter(visible).length,
    exercises: q('.exercise').length,
    solutions: solutions.length,
    collapsed: solutions.filter((el) => el.classList.contains('dropdown')
        && el.classList.contains('toggle-hidden')).length,
    colab: q('a[href*="colab.research.google.com"]').length,
    // The theme's top bar: sphinx-book-theme puts everything in the sidebars, so
    // on a wide window a visible one means a stray, empty header (search only).
    header: (() => { const h = document.querySelector('#pst-header');
                     return h ? Math.round(h.getBoundingClientRect().height) : 0; })(),
    citations: q('.citation, [role="doc-biblioentry"], dl.citation > dt').length,
    external: q('script[src], link[rel="stylesheet"][href]')
        .map((el) => el.src || el.href)
        .filter((u) => /^https?:/.test(u) && !u.startsWith(location.origin)),
  };
})()
"""

# Run in the page: scroll the first element matching a selector to the top of the
# window (a little above it, for context). False when there is none.
SCROLL_TO = r"""
((sel) => {
  const el = document.querySelector(sel);
  if (!el) return false;
  el.scrollIntoView({block: 'start'});
  window.scrollBy(0, -80);
  return true;
})
"""


def find_chromium() -> str:
    """The Chromium or Google Chrome executable (``$CHROME`` first; hosted CI runners
    have Chrome); never installs one (a test must not change the machine): if none is
    found, say what to install and stop."""
    env = os.environ.get("CHROME") or os.environ.get("CHROMIUM")
    if env and shutil.which(env):
        return shutil.which(env)
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
             "chrome")  # fmt: skip
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    mac = "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"
    if Path(mac).exists():
        return mac
    sys.exit(
        "error: the browser check needs Chromium or Google Chrome and neither is installed.\n"
        "       Debian/Ubuntu:  sudo apt-get install chromium fonts-noto-color-emoji\n"
        "       macOS:          brew install --cask chromium\n"
        "       (or set CHROME=/path/to/chrome), then run `make test` again."
    )


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class Browser:
    """A headless Chromium and one page, driven over the DevTools protocol."""

    def __init__(self, exe: str):
        self.profile = tempfile.mkdtemp(prefix="attnlab-chromium-")
        self.proc = subprocess.Popen(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={self.profile}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and port_file.read_text().strip():
                break
            time.sleep(0.1)
        else:
            self.close()
            sys.exit("error: Chromium did not open its DevTools port")
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws_url = pages[0]["webSocketDebuggerUrl"]
        self.ws = None
        self.next_id = 0
        self.events: list[dict] = []  # DevTools events since the last take_events()

    async def connect(self):
        self.ws = await websocket_connect(self.ws_url, max_message_size=256 << 20)
        await self.call("Page.enable")
        await self.call("Runtime.enable")
        await self.call("Log.enable")
        await self.call("Network.enable")
        await self.call("Network.setCacheDisabled", cacheDisabled=True)

    def take_events(self) -> list[dict]:
        out, self.events = self.events, []
        return out

    async def call(self, method: str, **params):
        self.next_id += 1
        my_id = self.next_id
        await self.ws.write_message(
            json.dumps({"id": my_id, "method": method, "params": params})
        )
        while True:
            msg = json.loads(await self.ws.read_message())
            if "method" in msg and "id" not in msg:
                self.events.append(msg)
                continue
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def evaluate(self, expression: str):
        res = await self.call(
            "Runtime.evaluate",
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        return res.get("result", {}).get("value")

    async def open(self, url: str, settle: float = 20.0) -> dict:
        """Load a page and wait until its math and widgets stop changing."""
        await self.call("Page.navigate", url=url)
        deadline = time.monotonic() + settle
        last, stable = None, 0
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            ready = await self.evaluate("document.readyState")
            probe = await self.evaluate(PROBE) if ready == "complete" else None
            done = (
                probe
                and probe["typeset"] == probe["math"]
                and (probe["rendered"] > 0 or probe["views"] == 0)
            )
            stable = stable + 1 if (probe == last and probe) else 0
            last = probe
            if done and stable >= 2:
                break
        return last or {}

    async def shot(self, png: Path) -> None:
        """Screenshot of what the window shows now."""
        res = await self.call("Page.captureScreenshot", format="png")
        png.write_bytes(base64.b64decode(res["data"]))

    async def shot_of(self, png: Path, selector: str) -> bool:
        """Screenshot with the first element matching ``selector`` near the top."""
        found = await self.evaluate(f"({SCROLL_TO})({json.dumps(selector)})")
        if found:
            await asyncio.sleep(0.3)
            await self.shot(png)
            await self.evaluate("window.scrollTo(0, 0)")
        return bool(found)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


# Run in the page: every link to a student notebook (the header menus).
STUDENT_LINKS = r"""
Array.from(document.querySelectorAll('a[href*="student/"]'))
  .map((a) => ({href: a.href, text: a.textContent.trim()}))
"""


async def student_link_problems(browser: Browser, base: str, rel: str) -> list[str]:
    """A chapter page must link its student notebook twice: a download from the site
    (the file exists and holds no solution) and Colab on the repository's
    ``student/NAME.ipynb`` (the file exists in the repository)."""
    try:
        from tools import student
    except ImportError:  # run as a script: tools/ itself is on sys.path
        import student

    name = Path(rel).stem
    links = await browser.evaluate(STUDENT_LINKS) or []
    wanted = f"student/{name}.ipynb"
    local = [x["href"] for x in links if x["href"].startswith(base)]
    colab = [x["href"] for x in links if "colab.research.google.com" in x["href"]]
    out = []
    if not any(h.endswith(wanted) for h in local):
        out.append(f"{rel}: no download link to its student notebook {wanted}")
    for href in local:
        try:
            with urllib.request.urlopen(href) as r:
                nb = json.load(r)
        except Exception as err:  # a missing file or not a notebook
            out.append(f"{rel}: student notebook link {href} is broken ({err})")
            continue
        out += [f"{rel}: {p}" for p in student.problems(nb, href)]
    if not any(h.endswith("/" + wanted) for h in colab):
        out.append(f"{rel}: no Colab link to the student edition {wanted}")
    repo = Path(__file__).resolve().parents[1]
    if colab and not (repo / wanted).is_file():
        out.append(f"{rel}: Colab would open {wanted}, which the repository lacks")
    return out


def problems(rel: str, p: dict) -> list[str]:
    out = []
    if not p:
        return [f"{rel}: the page did not load"]
    out += [f"{rel}: loads {u} from the network" for u in p["external"]]
    if p["typeset"] < p["math"]:
        out.append(
            f"{rel}: {p['math'] - p['typeset']} of {p['math']} math elements "
            "not typeset"
        )
    if p["views"] and not p["rendered"]:
        out.append(f"{rel}: {p['views']} widget views stored, none rendered")
    if rel.startswith("chapters/"):
        if not p["colab"]:
            out.append(f"{rel}: no Colab launch button")
        if not p["exercises"]:
            out.append(f"{rel}: no exercise box")
    if p["solutions"] != p["collapsed"]:
        out.append(
            f"{rel}: {p['solutions'] - p['collapsed']} solutions are not "
            "collapsed in a dropdown"
        )
    if p["header"] > 0:
        out.append(f"{rel}: a {p['header']} px header bar sits above the page")
    if rel == "bibliography.html" and p["citations"] < 5:
        out.append(f"{rel}: the bibliography lists {p['citations']} entries")
    return out


# ------------------------------------------------------- errors, requests, a11y, phone
# What a reader's browser logs or fetches, read from the DevTools events of one load.
def load_problems(rel: str, events: list[dict], base: str) -> tuple[list[str], dict]:
    """Console errors, uncaught exceptions, failed requests and requests to other hosts
    among ``events``; returns (problems, counts)."""
    urls: dict[str, str] = {}
    console, failed, outside = [], [], []
    for e in events:
        m, p = e["method"], e.get("params", {})
        if m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            urls[p["requestId"]] = url
            if url.startswith(
                ("http:", "https:", "ws:", "wss:")
            ) and not url.startswith(base):
                outside.append(url)
        elif m == "Network.responseReceived" and p["response"]["status"] >= 400:
            failed.append(f"{p['response']['status']} {p['response']['url']}")
        elif m == "Network.loadingFailed" and not p.get("canceled"):
            url = urls.get(p["requestId"], "?")
            if url.startswith(base) and p.get("errorText") != "net::ERR_ABORTED":
                failed.append(f"{p.get('errorText')} {url}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = p.get("args") or [{}]
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in args)
            console.append(f"console.error: {text[:200]}")
        elif m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            text = (d.get("exception") or {}).get("description") or d.get("text", "")
            console.append(f"uncaught: {text.splitlines()[0][:200] if text else '?'}")
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            entry = p["entry"]
            # Network errors are counted as failed requests; console calls and
            # exceptions were already seen through the Runtime domain.
            if entry.get("source") in ("network", "console-api", "javascript"):
                continue
            console.append(f"log: {entry.get('text', '')[:200]}")
    problems = [f"{rel}: {c}" for c in dict.fromkeys(console)]
    problems += [f"{rel}: failed request {f}" for f in dict.fromkeys(failed)]
    problems += [f"{rel}: request to another host {u}" for u in dict.fromkeys(outside)]
    counts = {"console": len(console), "failed": len(failed), "outside": len(outside)}
    return problems, counts


AXE_RUN = r"""
(async () => {
  // axe's experimental rules too (label-content-name-mismatch is one).
  axe.configure({rules: axe.getRules(['experimental'])
      .map((r) => ({id: r.ruleId, enabled: true}))});
  const r = await axe.run(document, {resultTypes: ['violations']});
  return r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.length, targets: v.nodes.slice(0, 3).map((n) => n.target.join(' '))}));
})()
"""

DARK = r"""
(() => { const h = document.documentElement; if (!h.dataset.theme) return false;
         h.dataset.theme = 'dark'; h.dataset.mode = 'dark'; return true; })()
"""
LIGHT = r"""
(() => { const h = document.documentElement; if (!h.dataset.theme) return false;
         h.dataset.theme = 'light'; h.dataset.mode = 'light'; return true; })()
"""

IMAGES = r"""
Array.from(document.querySelectorAll('img')).map((img) => ({
  src: (img.getAttribute('src') || '').slice(0, 90), alt: img.getAttribute('alt'),
  content: !!img.closest('.cell_output, .widget-output, .output'),
  hidden: !!img.closest('[aria-hidden="true"]') || img.getAttribute('role') === 'presentation',
}))
"""


async def a11y_problems(browser: Browser, rel: str, axe_js: str) -> tuple[list, dict]:
    """axe-core's serious and critical violations and images without a real alt."""
    try:
        from tools.figure_alt import looks_like_a_file_name
    except ImportError:  # run as a script: tools/ itself is on sys.path
        from figure_alt import looks_like_a_file_name

    await browser.evaluate(axe_js + "\n;0")
    out, counts = [], {"critical": 0, "serious": 0, "moderate": 0, "minor": 0}
    # The light theme, then the dark one (pydata-sphinx-theme reads data-theme).
    for mode in ("light", "dark"):
        if mode == "dark":
            if not await browser.evaluate(DARK):
                break
            await asyncio.sleep(0.3)
        violations = await browser.evaluate(AXE_RUN) or []
        where = rel if mode == "light" else f"{rel} (dark theme)"
        for v in violations:
            impact = v["impact"] or "minor"
            counts[impact] = counts.get(impact, 0) + v["nodes"]
            if impact in ("serious", "critical"):
                out.append(
                    f"{where}: axe {impact} {v['id']} ({v['help']}) on {v['nodes']} "
                    f"element(s), e.g. {v['targets']}"
                )
    await browser.evaluate(LIGHT)
    bad_alt = 0
    for img in await browser.evaluate(IMAGES) or []:
        if img["hidden"]:
            continue
        alt = img["alt"]
        # alt="" marks a decorative image: never for a figure in a cell's output.
        hashy = bool(alt) and looks_like_a_file_name(alt)
        if alt is None or hashy or (img["content"] and not alt.strip()):
            bad_alt += 1
            out.append(f"{rel}: image {img['src']!r} has no real alt text ({alt!r})")
    counts["bad_alt"] = bad_alt
    return out, counts


# The phone: 390 x 844 CSS px at 2x, touch, like the review's iPhone emulation.
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
DESKTOP = {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
FIG_TEXT_PX = 10 * 100 / 72  # matplotlib's 10-pt text at the course's 100 dpi
MIN_TEXT_PX = 9.0
MIN_TARGET_PX = 44.0

# Run in the page (awaited): scroll through it as a reader would, so that what waits
# for the screen (lazy figures, boxes measured near the screen, content-visibility)
# has happened everywhere; then back to the top.
SCROLL_THROUGH = r"""
(async () => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 30)));
  const h = () => document.documentElement.scrollHeight;
  for (let y = 0; y < h(); y += 1500) { window.scrollTo(0, y); await frame(); }
  window.scrollTo(0, h()); await frame(); await frame();
  const imgs = Array.from(document.images).filter((i) => !i.complete);
  await Promise.race([Promise.all(imgs.map((i) => new Promise((r) => {
    i.addEventListener('load', r, {once: true}); i.addEventListener('error', r, {once: true});
  }))), new Promise((r) => setTimeout(r, 5000))]);
  if (window.attnlabSite) window.attnlabSite.measureAll();
  window.scrollTo(0, 0); await frame();
  return true;
})()
"""

PHONE_PROBE = r"""
(() => {
  const vw = document.documentElement.clientWidth;
  const width = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
  const wide = [];
  if (width > vw) {
    document.querySelectorAll('body *').forEach((el) => {
      const r = el.getBoundingClientRect();
      if (r.right > vw + 1 && el.children.length === 0 && wide.length < 3)
        wide.push(el.tagName.toLowerCase() + '.' + (el.className || '').toString().slice(0, 40)
                  + ' "' + (el.textContent || '').trim().slice(0, 40) + '"');
    });
  }
  const figs = Array.from(document.querySelectorAll('.cell_output img, .widget-output img'))
    .filter((i) => i.naturalWidth > 0 && i.offsetParent !== null)
    .map((i) => ({src: (i.getAttribute('src') || '').slice(-24),
                  scale: i.getBoundingClientRect().width / i.naturalWidth}));
  const svgs = Array.from(document.querySelectorAll('svg.twin-svg')).map((svg) => {
    const vb = svg.viewBox && svg.viewBox.baseVal ? svg.viewBox.baseVal.width : 0;
    const scale = vb ? svg.getBoundingClientRect().width / vb : 1;
    let fs = Infinity;
    svg.querySelectorAll('text').forEach((t) => {
      const f = parseFloat(t.getAttribute('font-size') || getComputedStyle(t).fontSize);
      if (f < fs) fs = f;
    });
    const twin = svg.closest('[data-twin]');
    return {twin: twin ? twin.dataset.twin : '?', px: isFinite(fs) ? fs * scale : null};
  });
  const targets = Array.from(document.querySelectorAll('.attnlab-twin input, .attnlab-twin select'))
    .map((c) => {
      let r = c.getBoundingClientRect(), w = r.width, h = r.height;
      if (c.type === 'checkbox') for (const l of c.labels || []) {
        const q = l.getBoundingClientRect();
        w = Math.max(w, q.right - Math.min(r.left, q.left)); h = Math.max(h, q.height);
      }
      return {twin: c.closest('[data-twin]').dataset.twin, name: c.name, w, h};
    });
  // Every figure and twin plot fits the screen or its box shows that it scrolls.
  const scroller = (el) => { for (let p = el.parentElement; p; p = p.parentElement) {
      if (p.scrollWidth > p.clientWidth + 1 && getComputedStyle(p).overflowX !== 'visible')
        return p;
      if (p === document.body) return null; } return null; };
  const shown = Array.from(document.querySelectorAll(
      '.cell_output img, .attnlab-snapshot img, .twin-plot svg, .twin-plot canvas'))
    .filter((el) => el.getBoundingClientRect().width > 0);
  let fit = 0, cued = 0; const uncued = [];
  for (const el of shown) {
    const box = scroller(el);
    if (!box) { fit++; continue; }
    const hint = box.previousElementSibling;
    if (box.classList.contains('attnlab-scrolls') && hint
        && hint.classList.contains('attnlab-scroll-hint')) cued++;
    else if (uncued.length < 3) uncued.push((el.getAttribute('src') || el.tagName).slice(-30));
    else uncued.push('');
  }
  return {vw, width, wide, figs, svgs, targets, fit, cued, uncued};
})()
"""


def phone_problems(rel: str, p: dict) -> list[str]:
    out = []
    if not p:
        return [f"{rel}: the phone layout could not be measured"]
    if p["width"] > p["vw"]:
        out.append(
            f"{rel}: {p['width']} px wide on a {p['vw']} px phone screen "
            f"(e.g. {p['wide']})"
        )
    for f in p["figs"]:
        px = FIG_TEXT_PX * f["scale"]
        if px < MIN_TEXT_PX:
            out.append(
                f"{rel}: figure ...{f['src']} shows its 10-pt text at {px:.1f} px on a "
                f"phone (scale {f['scale']:.2f}; minimum {MIN_TEXT_PX:g} px)"
            )
    for s in p["svgs"]:
        if s["px"] is not None and s["px"] < MIN_TEXT_PX:
            out.append(
                f"{rel}: twin {s['twin']}'s plot text is {s['px']:.1f} px on a phone"
            )
    if p.get("uncued"):
        out.append(
            f"{rel}: {len(p['uncued'])} figures or twin plots are cropped on a phone "
            f"with no cue that they scroll (e.g. {[u for u in p['uncued'] if u][:3]})"
        )
    for t in p["targets"]:
        if t["w"] < MIN_TARGET_PX or t["h"] < MIN_TARGET_PX:
            out.append(
                f"{rel}: twin {t['twin']} control {t['name']!r} is a "
                f"{t['w']:.0f} x {t['h']:.0f} px touch target (minimum "
                f"{MIN_TARGET_PX:g} px)"
            )
    return out


async def set_viewport(browser: Browser, metrics: dict) -> None:
    await browser.call("Emulation.setDeviceMetricsOverride", **metrics)
    await browser.call("Emulation.setTouchEmulationEnabled", enabled=metrics["mobile"])


# ------------------------------------------------------- weight, keyboard, theme
# Issue 41's figures, measured on every page. Bytes: what a cold-cache load requests
# from the site, each file counted as gzip -6 of its bytes on disk (what a gzip server
# sends; deterministic, unlike timings). Budget per chapter page, at load and again
# after scrolling through it on a phone (lazy figures and a twin's model weights
# fetched):
MAX_PAGE_GZIP = 1_000_000
MAX_TABS_TO_TWIN = 20


@functools.cache
def gzip_size(path: Path) -> int:
    """Bytes of ``path`` compressed with gzip -6 (mtime 0: deterministic)."""
    import gzip

    return len(gzip.compress(path.read_bytes(), compresslevel=6, mtime=0))


def requested_files(events: list[dict], base: str, root: Path) -> list[Path]:
    """The site's files a page load requested (in ``events``), once each."""
    from urllib.parse import unquote, urlsplit

    files: dict[Path, None] = {}
    for e in events:
        if e["method"] != "Network.requestWillBeSent":
            continue
        url = e["params"]["request"]["url"]
        if not url.startswith(base):
            continue
        rel = unquote(urlsplit(url).path).lstrip("/")
        f = root / rel
        if f.is_dir():
            f = f / "index.html"
        if f.is_file():
            files[f] = None
    return list(files)


def page_bytes(events: list[dict], base: str, root: Path) -> tuple[int, list]:
    """(gzip bytes of everything the load requested, the five largest files)."""
    files = requested_files(events, base, root)
    sizes = sorted(((gzip_size(f), f) for f in files), key=lambda x: -x[0])
    return sum(n for n, _ in sizes), [
        (str(f.relative_to(root)), n) for n, f in sizes[:5]
    ]


# Run in the page: the theme's figures (one <h1>, header buttons, fullscreen button,
# the <title>, formulas in the tab order).
THEME_PROBE = r"""
(() => {
  const vis = (el) => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden'; };
  const btns = Array.from(document.querySelectorAll(
      '.bd-header-article button, .bd-header-article a.btn, .bd-header-article .btn'))
    .filter(vis).map((b) => { const r = b.getBoundingClientRect();
      return {name: (b.getAttribute('aria-label') || b.title || b.textContent || '').trim()
              .slice(0, 30), w: r.width, h: r.height}; });
  const fs = Array.from(document.querySelectorAll('.btn-fullscreen-button')).filter(vis);
  return {
    h1: Array.from(document.querySelectorAll('h1')).filter(vis).length,
    h1_all: document.querySelectorAll('h1').length,
    title: document.title,
    buttons: btns, fullscreen: fs.length,
    // (a display formula wider than its column is a tab stop on purpose: it scrolls)
    math_tabstops: document.querySelectorAll(
        'mjx-container[tabindex="0"]:not([data-attnlab-scroller]), '
        + 'math[tabindex="0"], div.math[tabindex="0"]:not([data-attnlab-scroller])').length,
  };
})()
"""

# Run in the page: focus the chapter's title (the first <h1>); true if found.
FOCUS_TITLE = r"""
(() => { const h = document.querySelector('main h1, h1'); if (!h) return false;
  h.setAttribute('tabindex', '-1'); h.focus(); return document.activeElement === h; })()
"""
IN_TWIN = r"""
(() => { const a = document.activeElement;
  if (!a || !a.closest) return null;
  if (a.closest('[data-twin]')) return 'twin';
  if (a.closest('.attnlab-jump')) return 'jump';
  return a.tagName; })()
"""


async def tabs_to_first_twin(
    browser: Browser, via_jump: bool = False, limit: int = 200
) -> int | None:
    """Tab presses from the chapter title to the first twin control (None: no twin).
    ``via_jump``: Tab to the line of links under the title, Enter on its first link,
    then Tab: the presses of Tab counted (not the Enter)."""
    if not await browser.evaluate("!!document.querySelector('[data-twin]')"):
        return None
    if not await browser.evaluate(FOCUS_TITLE):
        return None
    tab = {"key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9}
    enter = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"}
    jumped = False
    for n in range(1, limit + 1):
        await browser.call("Input.dispatchKeyEvent", type="rawKeyDown", **tab)
        await browser.call("Input.dispatchKeyEvent", type="keyUp", **tab)
        where = await browser.evaluate(IN_TWIN)
        if where == "twin":
            return n
        if via_jump and where == "jump" and not jumped:
            jumped = True
            await browser.call("Input.dispatchKeyEvent", type="keyDown", **enter)
            await browser.call("Input.dispatchKeyEvent", type="keyUp", **enter)
            await asyncio.sleep(0.2)
    return limit + 1


def theme_problems(rel: str, t: dict, phone: bool) -> list[str]:
    out = []
    if not t:
        return [f"{rel}: the theme could not be measured"]
    if t["h1_all"] != 1:
        out.append(f"{rel}: {t['h1_all']} <h1> elements (one per page)")
    title = t["title"]
    for sep in (" — ", " &#8212; "):
        if sep in title and len(set(title.split(sep))) < len(title.split(sep)):
            out.append(f"{rel}: the <title> repeats itself: {title!r}")
    if t["math_tabstops"]:
        out.append(f"{rel}: {t['math_tabstops']} formulas are in the tab order")
    if phone:
        if t["fullscreen"]:
            out.append(f"{rel}: a fullscreen button on a phone")
        small = [b for b in t["buttons"] if b["w"] < 43.5 or b["h"] < 43.5]
        if small:
            out.append(
                f"{rel}: header buttons under 44 px on a phone: "
                + ", ".join(
                    f"{b['name']!r} {b['w']:.0f}x{b['h']:.0f}" for b in small[:4]
                )
            )
    return out


# ------------------------------------------------------------------ static twins
# The widgets that run with no kernel (attnlab.widgets.twin): every twin on a page is
# driven like a reader would drive it — set its controls, fire `input` — and what it
# displays is compared with attnlab's own numbers (attnlab.widgets.twin.CHECKS).

# Run in the page: the twins, their payloads, controls and load cost.
TWINS_ON_PAGE = r"""
(() => Array.from(document.querySelectorAll('[data-twin]')).map((root) => {
  const data = root.querySelector('script.twin-data');
  const script = root.nextElementSibling;
  const T = window.attnlabTwin;
  const lazy = !!(data && data.getAttribute('data-src'));
  return {
    id: root.id, kind: root.dataset.twin, ready: root.dataset.twinReady === '1',
    error: root.getAttribute('data-twin-error'), lazy,
    // a payload the website moved to a file (data-src): as the twin fetched it
    data: lazy ? ((T && T.data && T.data[root.id]) || null)
               : (data ? JSON.parse(data.textContent) : null),
    controls: Array.from(root.querySelectorAll('input, select')).map((c) => ({
      name: c.name, type: c.type, labelled: c.labels ? c.labels.length : 0,
      focusable: c.tabIndex >= 0 && !c.disabled})),
    bytes: (data ? data.textContent.length : 0)
        + (script && script.tagName === 'SCRIPT' ? script.textContent.length : 0),
    mount_ms: (window.attnlabTwin && window.attnlabTwin.timings[root.id]) || null,
  };
}))()
"""

# Run in the page: set a twin's controls as a reader would, fire `input` on each, and
# read back the controls (after the browser snapped them to their steps) and readouts.
TWIN_SET = r"""
((id, settings) => {
  const root = document.getElementById(id);
  for (const [name, value] of Object.entries(settings)) {
    const c = root.querySelector(`[name="${name}"]`);
    if (!c) return {missing: name};
    if (c.type === 'checkbox') c.checked = !!value; else c.value = String(value);
    c.dispatchEvent(new Event('input', {bubbles: true}));
  }
  // Updates run on the next frame (a text box: once typing pauses): run it now.
  if (window.attnlabTwin && window.attnlabTwin.flush) window.attnlabTwin.flush(id);
  const actual = {};
  root.querySelectorAll('input, select').forEach((c) => {
    actual[c.name] = c.type === 'checkbox' ? c.checked
        : (c.type === 'range' ? Number(c.value) : c.value);
  });
  const readouts = {};
  root.querySelectorAll('[data-readout]').forEach((el) => {
    readouts[el.dataset.readout] = {text: el.textContent,
                                    value: el.getAttribute('data-value')};
  });
  // Exact values kept without an element (t.exact: every cell of a canvas heatmap).
  const exact = (window.attnlabTwin && window.attnlabTwin.exact
                 && window.attnlabTwin.exact[id]) || {};
  for (const [name, value] of Object.entries(exact))
    if (!(name in readouts)) readouts[name] = {text: '', value, exact: true};
  return {actual, readouts, error: root.getAttribute('data-twin-error'),
          decode_ms: root.dataset.decodeMs ? Number(root.dataset.decodeMs) : null};
})
"""

# Run in the page: switch the theme (pydata-sphinx-theme reads these attributes) and
# report the twin's text colour and the page background, as relative luminances.
THEME = r"""
((id, mode) => {
  const html = document.documentElement;
  if (!html.dataset.theme) return null;  // a page without a light/dark theme
  html.dataset.theme = mode; html.dataset.mode = mode;
  const lum = (css) => { const m = css.match(/[\d.]+/g).map(Number);
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(m[0]) + 0.7152 * f(m[1]) + 0.0722 * f(m[2]); };
  let bg = 'rgb(255, 255, 255)';
  for (let el = document.getElementById(id); el; el = el.parentElement) {
    const c = getComputedStyle(el).backgroundColor;
    if (c && !c.startsWith('rgba(0, 0, 0, 0)') && c !== 'transparent') { bg = c; break; }
  }
  return {text: lum(getComputedStyle(document.getElementById(id)).color), bg: lum(bg)};
})
"""


def _twin_case_problems(where: str, check, case: dict, got: dict, data) -> list[str]:
    from attnlab.course.twin import close

    if "missing" in got:
        return [f"{where}: no control named {got['missing']!r}"]
    if got.get("error"):
        return [f"{where}: the script failed: {got['error']}"]
    expected = check.reference(got["actual"], data)
    out = []
    for name, exp in expected.items():
        r = got["readouts"].get(name)
        if r is None:
            out.append(f"{where}: no readout {name!r} (expected {exp!r})")
            continue
        tol = check.tolerance(name, got["actual"])
        if not close(r["value"], exp, tol):
            out.append(
                f"{where} {case}: readout {name} = {r['value']} ({r['text']!r}), "
                f"attnlab says {exp!r} (tolerance {tol:g})"
            )
    blank = [
        n
        for n, r in got["readouts"].items()
        if not r.get("exact") and r["text"].strip() in ("", "–")
    ]
    if blank:
        out.append(f"{where} {case}: readouts left blank: {blank[:5]}")
    return out


# Run in the page: focus a twin's first slider and return its readouts' texts.
FOCUS_SLIDER = r"""
((id) => {
  const root = document.getElementById(id), r = root.querySelector('input[type=range]');
  if (!r) return null;
  if (Number(r.value) >= Number(r.max)) {  // leave room for one step to the right
    r.value = r.min; r.dispatchEvent(new Event('input', {bubbles: true}));
    if (window.attnlabTwin && window.attnlabTwin.flush) window.attnlabTwin.flush(id);
  }
  r.focus();
  return Array.from(root.querySelectorAll('[data-readout]')).map((e) => e.textContent);
})
"""


# Run in the page: fill a twin's text box to its maxlength (its first value, repeated)
# and time the keystroke (the `input` event) and the update it schedules, apart.
LONGEST_INPUT = r"""
((id) => {
  const root = document.getElementById(id), c = root.querySelector('input[type=text]');
  if (!c) return null;
  const n = c.maxLength > 0 ? c.maxLength : 200, first = c.value || 'abc';
  const text = (first + ' ').repeat(Math.ceil(n / (first.length + 1))).slice(0, n);
  c.value = text;
  const t0 = performance.now();
  c.dispatchEvent(new Event('input', {bubbles: true}));
  const key = performance.now() - t0, t1 = performance.now();
  if (window.attnlabTwin.flush) window.attnlabTwin.flush(id);
  const update = performance.now() - t1;
  c.value = first; c.dispatchEvent(new Event('input', {bubbles: true}));
  if (window.attnlabTwin.flush) window.attnlabTwin.flush(id);
  return {n, key, update};
})
"""
MAX_KEYSTROKE_MS = 16.0


async def _keyboard_moves(browser: Browser, twin_id: str) -> bool:
    """Press the right arrow on the twin's first slider: do its readouts change?"""
    before = await browser.evaluate(f"({FOCUS_SLIDER})({json.dumps(twin_id)})")
    if before is None:
        return True  # no slider: selects and checkboxes are keyboard-operable natively
    key = {"key": "ArrowRight", "code": "ArrowRight", "windowsVirtualKeyCode": 39}
    await browser.call("Input.dispatchKeyEvent", type="keyDown", **key)
    await browser.call("Input.dispatchKeyEvent", type="keyUp", **key)
    await asyncio.sleep(0.1)
    after = await browser.evaluate(
        f"Array.from(document.getElementById({json.dumps(twin_id)})"
        ".querySelectorAll('[data-readout]')).map((e) => e.textContent)"
    )
    return after != before


async def check_twins(
    browser: Browser, rel: str, shots: Path | None
) -> tuple[list, list]:
    """Drive every twin on the open page; return (problems, one line per twin).

    Screenshots of each twin, in the light and the dark theme, go to ``shots``
    (none when it is None).
    """
    from attnlab.course.twin import CHECKS, import_all_twins

    import_all_twins()  # every chapter's twins.py registers its checks

    errors, lines = [], []
    twins = await browser.evaluate(TWINS_ON_PAGE) or []
    if any(tw["lazy"] and not tw["ready"] for tw in twins):
        # Payloads the website fetches when the twin nears the viewport: fetch now.
        await browser.evaluate(
            "document.querySelectorAll('[data-twin]').forEach((r) => "
            "window.attnlabTwin && window.attnlabTwin.load(r.id))"
        )
        for _ in range(100):
            await asyncio.sleep(0.1)
            twins = await browser.evaluate(TWINS_ON_PAGE) or []
            if all(tw["ready"] or tw["error"] for tw in twins):
                break
    name = rel.replace("/", "_").removesuffix(".html")
    for tw in twins:
        where = f"{rel} twin {tw['kind']}"
        if not tw["ready"]:
            errors.append(f"{where}: never mounted ({tw['error'] or 'no error shown'})")
            continue
        bad = [c["name"] for c in tw["controls"] if not c["labelled"]]
        bad += [c["name"] for c in tw["controls"] if not c["focusable"]]
        if bad:
            errors.append(f"{where}: controls without a label or keyboard focus: {bad}")
        check = CHECKS.get(tw["kind"])
        if check is None:
            errors.append(f"{where}: no browser check registered for this kind")
            continue
        cases = check.cases_for(tw["data"])
        seen, n_bad, decode = set(), 0, []
        for case in cases:
            got = await browser.evaluate(
                f"({TWIN_SET})({json.dumps(tw['id'])}, {json.dumps(case)})"
            )
            found = _twin_case_problems(where, check, case, got, tw["data"])
            n_bad += bool(found)
            errors += found
            seen.add(json.dumps(got.get("readouts"), sort_keys=True))
            if got.get("decode_ms") is not None:  # a twin that runs a model
                decode.append(got["decode_ms"])
        if len(cases) > 1 and len(seen) < 2:
            errors.append(f"{where}: readouts did not change as the controls moved")
        if not await _keyboard_moves(browser, tw["id"]):
            errors.append(f"{where}: its first slider does not respond to the keyboard")
        if shots:
            await browser.shot_of(
                shots / f"{name}-twin-{tw['kind']}.png", f"#{tw['id']}"
            )
        dark = await browser.evaluate(f"({THEME})({json.dumps(tw['id'])}, 'dark')")
        await asyncio.sleep(0.3)  # let the page repaint in the new theme
        if shots:
            dark_png = shots / f"{name}-twin-{tw['kind']}-dark.png"
            await browser.shot_of(dark_png, f"#{tw['id']}")
        await browser.evaluate(f"({THEME})({json.dumps(tw['id'])}, 'light')")
        if dark and not (dark["text"] > 0.4 and dark["bg"] < 0.2):
            errors.append(
                f"{where}: in the dark theme its text (luminance {dark['text']:.2f}) "
                f"does not stand out from the background ({dark['bg']:.2f})"
            )
        mount = tw["mount_ms"] or 0.0
        if mount > 1000:
            errors.append(f"{where}: took {mount:.0f} ms to start (budget 1000 ms)")
        timing = ""
        longest = await browser.evaluate(f"({LONGEST_INPUT})({json.dumps(tw['id'])})")
        if longest:
            keys = []
            for _ in range(4):  # the median of 5 keystrokes at the longest input
                again = await browser.evaluate(
                    f"({LONGEST_INPUT})({json.dumps(tw['id'])})"
                )
                keys.append(again)
            keys.append(longest)
            key_ms = sorted(k["key"] for k in keys)[2]
            upd_ms = sorted(k["update"] for k in keys)[2]
            timing += (
                f"; at {longest['n']} characters a keystroke {key_ms:.1f} ms, "
                f"the update after it {upd_ms:.1f} ms"
            )
            if key_ms > MAX_KEYSTROKE_MS:
                errors.append(
                    f"{where}: a keystroke at {longest['n']} characters takes "
                    f"{key_ms:.0f} ms (budget {MAX_KEYSTROKE_MS:g} ms)"
                )
        if decode:  # a trained model in the page: its weight and one decode's time
            decode.sort()
            median = decode[len(decode) // 2]
            timing += (
                f"; one decode {median:.1f} ms (median), {decode[-1]:.1f} ms (max)"
            )
            if median > 50:
                errors.append(f"{where}: a decode takes {median:.0f} ms (budget 50 ms)")
            if tw["bytes"] > 1_000_000 * len(check_models(tw["data"])):
                errors.append(
                    f"{where}: {tw['bytes'] / 1e6:.2f} MB of page weight (budget 1 MB "
                    "per model)"
                )
        lines.append(
            f"{'FAIL' if n_bad else 'ok  '} {where:44s} {len(cases)} settings, "
            f"{n_bad} off; script+data {tw['bytes'] / 1024:.1f} KB, "
            f"starts in {mount:.1f} ms{timing}"
        )
    return errors, lines


def check_models(data: dict) -> list:
    """The trained models a twin's payload carries (attnlab.course.twin.live)."""
    return list(data.get("models", {}).values()) or ([data] if "blob" in data else [])


async def run_twins_only(
    exe: str, url: str, shots: Path | None = None
) -> tuple[list, list]:
    """Open one page (a built chapter or a test page) and check only its twins."""
    browser = Browser(exe)
    try:
        await browser.connect()
        await browser.call("Page.navigate", url=url)
        for _ in range(100):
            await asyncio.sleep(0.1)
            if await browser.evaluate("document.readyState") == "complete":
                break
        return await check_twins(browser, url.rsplit("/", 1)[-1], shots)
    finally:
        if browser.ws is not None:
            browser.ws.close()
        browser.close()


async def run(
    exe: str, base: str, pages: list[str], shots: Path, axe_js: str, root: Path
) -> list[str]:
    browser = Browser(exe)
    errors: list[str] = []
    table = []
    figures: list[tuple] = []
    try:
        await browser.connect()
        for rel in pages:
            await set_viewport(browser, DESKTOP)
            browser.take_events()
            probe = await browser.open(f"{base}/{rel}")
            page_errors = problems(rel, probe)
            events = browser.take_events()
            load_errs, load_counts = load_problems(rel, events, base)
            page_errors += load_errs
            gz, largest = page_bytes(events, base, root)
            if rel.startswith("chapters/") and gz > MAX_PAGE_GZIP:
                page_errors.append(
                    f"{rel}: {gz / 1e6:.2f} MB transferred (gzip -6, cold cache; budget "
                    f"{MAX_PAGE_GZIP / 1e6:.1f} MB); largest: {largest}"
                )
            theme = await browser.evaluate(THEME_PROBE) or {}
            page_errors += theme_problems(rel, theme, phone=False)
            # Tabs from the title to the first twin: straight through the page (every
            # link and copy button before it; printed), and through the line of links
            # under the title (Tab, Enter, Tab: asserted).
            tabs = await tabs_to_first_twin(browser)
            jump = await tabs_to_first_twin(browser, via_jump=True)
            if jump is not None and jump > MAX_TABS_TO_TWIN:
                page_errors.append(
                    f"{rel}: {jump} Tab presses from the title to the first twin, "
                    f"through the links under the title ({tabs} straight through; "
                    f"budget {MAX_TABS_TO_TWIN})"
                )
            await browser.evaluate("window.scrollTo(0, 0)")
            a11y_errs, axe_counts = await a11y_problems(browser, rel, axe_js)
            page_errors += a11y_errs
            if rel.startswith("chapters/"):
                page_errors += await student_link_problems(browser, base, rel)
            name = rel.replace("/", "_").removesuffix(".html")
            await browser.shot(shots / f"{name}.png")
            if probe.get("rendered"):
                await browser.shot_of(
                    shots / f"{name}-widget.png",
                    ".jupyter-widgets.widget-interact, .jupyter-widgets.widget-box",
                )
            if probe.get("exercises"):
                await browser.shot_of(shots / f"{name}-exercise.png", ".exercise")
            twin_errors, twin_lines = await check_twins(browser, rel, shots)
            page_errors += twin_errors
            # The same page on a phone.
            await set_viewport(browser, PHONE)
            browser.take_events()
            await browser.open(f"{base}/{rel}")
            await browser.evaluate(SCROLL_THROUGH)
            phone = await browser.evaluate(PHONE_PROBE) or {}
            page_errors += phone_problems(rel, phone)
            page_errors += theme_problems(
                rel + " (phone)", await browser.evaluate(THEME_PROBE) or {}, phone=True
            )
            phone_events = browser.take_events()
            phone_errs, phone_counts = load_problems(
                rel + " (phone)", phone_events, base
            )
            gz, largest = page_bytes(phone_events, base, root)
            if rel.startswith("chapters/") and gz > MAX_PAGE_GZIP:
                page_errors.append(
                    f"{rel}: {gz / 1e6:.2f} MB after scrolling through it on a phone "
                    f"(gzip -6; budget {MAX_PAGE_GZIP / 1e6:.1f} MB); largest: {largest}"
                )
            page_errors += phone_errs
            await browser.shot(shots / f"{name}-phone.png")
            errors += page_errors
            p = probe or {}
            print(
                f"{'FAIL' if page_errors else 'ok  '} {rel:38s} "
                f"math {p.get('typeset', 0):4d}/{p.get('math', 0):<4d} "
                f"widgets {p.get('rendered', 0):3d} ({p.get('views', 0)} stored) "
                f"exercises {p.get('exercises', 0)} "
                f"collapsed {p.get('collapsed', 0)}/{p.get('solutions', 0)} "
                f"colab {'yes' if p.get('colab') else 'no'}",
                flush=True,
            )
            for line in twin_lines:
                print("     ", line, flush=True)
            table.append(
                (rel, axe_counts, phone.get("width"), load_counts, phone_counts)
            )
            figures.append(
                (rel, gz, tabs, jump, phone.get("fit", 0), phone.get("cued", 0),
                 len(phone.get("uncued", [])))
            )  # fmt: skip
    finally:
        if browser.ws is not None:
            browser.ws.close()
        browser.close()
    print(
        "\npage                                  axe crit/ser/mod/min  bad alt  "
        "width@390  console  failed  outside"
    )
    for rel, ax, width, lc, pc in table:
        print(
            f"{rel:38s} {ax['critical']:4d}/{ax['serious']:3d}/{ax['moderate']:3d}/"
            f"{ax['minor']:3d}   {ax['bad_alt']:6d}  {width or 0:6d} px  "
            f"{lc['console'] + pc['console']:7d}  {lc['failed'] + pc['failed']:6d}  "
            f"{lc['outside'] + pc['outside']:7d}"
        )
    print(
        "\npage                                  KB (gzip -6)  Tabs to twin: via links"
        " / straight  figures@390: fit / scroll, cued / cropped, no cue"
    )
    for rel, gz, tabs, jump, fit, cued, uncued in figures:
        t = "-" if tabs is None else f"{jump} / {tabs}"
        print(
            f"{rel:38s} {gz / 1024:12.0f}  {t:>25}  {fit:5d} / {cued:5d} / {uncued:5d}"
        )
    return errors


def main(site: str, shots_dir: str) -> int:
    root = Path(site)
    if not (root / "index.html").exists():
        sys.exit(f"error: {root}/index.html not found; run `make book` first")
    shots = Path(shots_dir)
    shots.mkdir(parents=True, exist_ok=True)
    exe = find_chromium()
    extra = [
        p
        for p in ("instructors.html", "search.html", "genindex.html")
        if (root / p).exists()
    ]
    chapter_pages = sorted((root / "chapters").glob("*.html"))
    # Pages at the URLs of chapters that moved (_redirects/): no chapter, only a link
    # on; checked here for a target that exists, not driven as chapters.
    for p in chapter_pages:
        found = re.search(
            r'http-equiv="refresh" content="0; url=([^"]+)"', p.read_text()
        )
        if found:
            target = p.parent / found.group(1)
            if not target.exists():
                sys.exit(f"error: {p.relative_to(root)} redirects to a missing page")
            print(f"redirect {p.relative_to(root)} -> {found.group(1)}: ok")
    pages = ["index.html", "bibliography.html", *extra] + [
        str(p.relative_to(root))
        for p in chapter_pages
        if 'http-equiv="refresh"' not in p.read_text()
    ]
    axe = root / "check" / "axe.min.js"
    if not axe.exists():
        sys.exit(
            f"error: {axe} not found: tools/vendor_js.sh vendors axe-core into the site "
            "(`rm -rf _vendor && make book`)"
        )
    only = os.environ.get("BROWSER_CHECK_PAGES", "").split()
    if only:  # while working on a few pages: BROWSER_CHECK_PAGES="index.html ..."
        pages = [p for p in pages if p in only]
    server, base = serve(root)
    try:
        errors = asyncio.run(run(exe, base, pages, shots, axe.read_text(), root))
    finally:
        server.shutdown()
    for e in errors:
        print("error:", e)
    print(
        f"browser check: {len(pages)} pages, {len(errors)} problems; shots in {shots}"
    )
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
