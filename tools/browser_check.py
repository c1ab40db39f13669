"""Open the built site in headless Chromium, with no network, and check what a reader sees.

    python tools/browser_check.py _build/html _build/shots

For every page of the book it asserts, in the DOM after JavaScript ran:
  * math is typeset by the vendored MathJax (no raw ``\\(...\\)`` left in math spans);
  * every page that stores widgets shows rendered widget views;
  * chapter pages carry the Colab launch button; exercise pages show exercise boxes and
    solutions collapsed in dropdowns; the bibliography lists entries;
  * no page loads a script or stylesheet from another host (it must work offline).
Screenshots go to the shots folder: the top of each page, and each page's first widget
and first exercise (scrolled there through their anchors).

Chromium is Debian's ``chromium`` package; if it is missing and we are root with apt-get,
it is installed, otherwise the check stops with a message saying how (never passes).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

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
]


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print(
            "chromium not found: installing Debian's chromium package ...", flush=True
        )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env
        )
        path = shutil.which("chromium")
        if path:
            return path
    sys.exit(
        "error: the browser check needs Chromium and it is not installed.\n"
        "       Install it with:  sudo apt-get install chromium   (Debian/Ubuntu)\n"
        "       then run `make test` again."
    )


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def chromium(exe: str, url: str, *extra: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [exe, *FLAGS, f"--user-data-dir={profile}", *extra, url]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return res.stdout


def dom(exe: str, url: str) -> str:
    return chromium(exe, url, "--virtual-time-budget=20000", "--dump-dom")


def shot(exe: str, url: str, png: Path, height: int = 1400) -> None:
    chromium(
        exe,
        url,
        "--virtual-time-budget=20000",
        f"--window-size=1280,{height}",
        f"--screenshot={png}",
    )


def external_assets(html: str) -> list[str]:
    """Scripts and stylesheets a page would fetch from another host."""
    found = re.findall(r'<script[^>]+src="(https?://[^"]+)"', html)
    found += re.findall(r'<link[^>]+rel="stylesheet"[^>]+href="(https?://[^"]+)"', html)
    found += re.findall(r'<link[^>]+href="(https?://[^"]+)"[^>]+rel="stylesheet"', html)
    return found


def check_page(exe: str, base: str, rel: str, source: str, shots: Path) -> list[str]:
    errors: list[str] = []
    url = f"{base}/{rel}"
    name = rel.replace("/", "_").removesuffix(".html")
    d = dom(exe, url)
    if "</html>" not in d:
        return [f"{rel}: Chromium returned no DOM"]
    for asset in external_assets(source):
        errors.append(f"{rel}: loads {asset} from the network")

    math_spans = re.findall(r'class="math[^"]*"[^>]*>(.*?)</(?:span|div)>', d, re.S)
    has_math = 'class="math' in source
    typeset = d.count("<mjx-container")
    raw = [s for s in math_spans if "\\(" in s or "\\[" in s]
    if has_math and (typeset == 0 or raw):
        errors.append(f"{rel}: math not typeset ({typeset} typeset, {len(raw)} raw)")

    n_views = source.count("application/vnd.jupyter.widget-view+json")
    rendered = len(
        re.findall(
            r'class="[^"]*\bwidget-(?:slider|dropdown|toggle|'
            r"interact|hbox|vbox|inline-hbox|box|label)\b",
            d,
        )
    )
    if n_views and rendered == 0:
        errors.append(f"{rel}: {n_views} widget views stored, none rendered")

    is_chapter = rel.startswith("chapters/")
    if is_chapter and "colab.research.google.com" not in d:
        errors.append(f"{rel}: no Colab launch button")
    n_ex = len(re.findall(r'class="[^"]*\bexercise\b', d))
    n_sol = len(re.findall(r'class="[^"]*\bsolution\b[^"]*\bdropdown\b', d))
    if is_chapter and n_ex == 0:
        errors.append(f"{rel}: no exercise box")
    if n_ex and n_sol == 0:
        errors.append(f"{rel}: exercises without collapsed (dropdown) solutions")
    if (
        rel == "bibliography.html"
        and d.count('class="citation')
        + d.count('role="doc-biblioentry"')
        + d.count("<dt")
        < 5
    ):
        errors.append(f"{rel}: the bibliography lists almost nothing")

    shot(exe, url, shots / f"{name}.png")
    anchors = {}
    m = re.search(
        r'<section id="([^"]+)">(?:(?!<section).)*?widget-view\+json', source, re.S
    )
    if n_views and m:
        anchors["widget"] = m.group(1)
    m = re.search(r'<div class="exercise[^"]*" id="([^"]+)"', source)
    if m:
        anchors["exercise"] = m.group(1)
    for what, anchor in anchors.items():
        shot(exe, f"{url}#{anchor}", shots / f"{name}-{what}.png", height=1000)
    print(
        f"{'FAIL' if errors else 'ok  '} {rel:45s} math {typeset:4d}  widgets "
        f"{rendered:3d}/{n_views:<3d} exercises {n_ex:2d} solutions(dropdown) {n_sol:2d}"
    )
    return errors


def main(site: str, shots_dir: str) -> int:
    root = Path(site)
    if not (root / "index.html").exists():
        sys.exit(f"error: {root}/index.html not found; run `make book` first")
    shots = Path(shots_dir)
    shots.mkdir(parents=True, exist_ok=True)
    exe = find_chromium()
    pages = ["index.html", "bibliography.html"] + sorted(
        str(p.relative_to(root)) for p in (root / "chapters").glob("*.html")
    )
    server, base = serve(root)
    errors: list[str] = []
    try:
        for rel in pages:
            source = (root / rel).read_text(encoding="utf-8")
            errors += check_page(exe, base, rel, source, shots)
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
