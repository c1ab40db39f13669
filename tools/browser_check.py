"""Open the built site in headless Chromium, with no network, and check what a reader sees.

    python tools/browser_check.py _build/html _build/shots

The site is served on 127.0.0.1 and driven through the DevTools protocol (tornado's
websocket client, already installed with Jupyter). For every page, after its JavaScript
ran, it asserts:

* math is typeset by the vendored MathJax (no math element left untypeset);
* every page that stores widgets shows rendered widget views;
* chapter pages carry the Colab launch button, show exercise boxes, and keep every
  solution collapsed in a dropdown; the bibliography lists entries;
* no page loads a script or stylesheet from another host (it must work offline).

Screenshots go to the shots folder: the top of each page, and on chapter pages the first
widget and the first exercise with its (collapsed) solution.

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
    typeset: math.filter((el) => el.querySelector('mjx-container')).length,
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
    """The Chromium (or Chrome) executable; never installs one (a test must not change
    the machine): if none is found, say what to install and stop."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit(
        "error: the browser check needs Chromium and it is not installed.\n"
        "       Debian/Ubuntu:  sudo apt-get install chromium fonts-noto-color-emoji\n"
        "       macOS:          brew install --cask chromium\n"
        "       then run `make test` again (the README lists the prerequisites)."
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

    async def connect(self):
        self.ws = await websocket_connect(self.ws_url, max_message_size=256 << 20)
        await self.call("Page.enable")
        await self.call("Runtime.enable")

    async def call(self, method: str, **params):
        self.next_id += 1
        my_id = self.next_id
        await self.ws.write_message(
            json.dumps({"id": my_id, "method": method, "params": params})
        )
        while True:
            msg = json.loads(await self.ws.read_message())
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


async def run(exe: str, base: str, pages: list[str], shots: Path) -> list[str]:
    browser = Browser(exe)
    errors: list[str] = []
    try:
        await browser.connect()
        for rel in pages:
            probe = await browser.open(f"{base}/{rel}")
            errors += problems(rel, probe)
            if rel.startswith("chapters/"):
                errors += await student_link_problems(browser, base, rel)
            name = rel.replace("/", "_").removesuffix(".html")
            await browser.shot(shots / f"{name}.png")
            if probe.get("rendered"):
                await browser.shot_of(
                    shots / f"{name}-widget.png",
                    ".jupyter-widgets.widget-interact, .jupyter-widgets.widget-box",
                )
            if probe.get("exercises"):
                await browser.shot_of(shots / f"{name}-exercise.png", ".exercise")
            p = probe or {}
            print(
                f"{'FAIL' if problems(rel, probe) else 'ok  '} {rel:38s} "
                f"math {p.get('typeset', 0):4d}/{p.get('math', 0):<4d} "
                f"widgets {p.get('rendered', 0):3d} ({p.get('views', 0)} stored) "
                f"exercises {p.get('exercises', 0)} "
                f"collapsed {p.get('collapsed', 0)}/{p.get('solutions', 0)} "
                f"colab {'yes' if p.get('colab') else 'no'}",
                flush=True,
            )
    finally:
        if browser.ws is not None:
            browser.ws.close()
        browser.close()
    return errors


def main(site: str, shots_dir: str) -> int:
    root = Path(site)
    if not (root / "index.html").exists():
        sys.exit(f"error: {root}/index.html not found; run `make book` first")
    shots = Path(shots_dir)
    shots.mkdir(parents=True, exist_ok=True)
    exe = find_chromium()
    extra = [p for p in ("instructors.html",) if (root / p).exists()]
    pages = ["index.html", "bibliography.html", *extra] + sorted(
        str(p.relative_to(root)) for p in (root / "chapters").glob("*.html")
    )
    server, base = serve(root)
    try:
        errors = asyncio.run(run(exe, base, pages, shots))
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
