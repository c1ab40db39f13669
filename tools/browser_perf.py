"""Load the built site as a mid-range phone would, and time it.

    python tools/browser_perf.py _build/html          (make browser-perf)

Every chapter page and the home page are loaded three times in headless Chromium, each
time cold (cache cleared and disabled), from a local server that gzips every response
(gzip -6), with DevTools throttling: 4x slower CPU, 9 Mbit/s down and up, 60 ms of
latency on every request; a 390 x 844 px phone screen. Per page, the median of the three
loads of:

* **first paint**: first-contentful-paint (budget :data:`MAX_FIRST_PAINT_S`);
* **long tasks**: the total duration of the main thread's long tasks (> 50 ms), from
  the navigation until the page has been quiet (no long task) for
  :data:`QUIET_S` after its load event (budget :data:`MAX_LONG_TASKS_S`);
* load: the load event, and the bytes transferred (what the server sent, gzip).

Timings depend on the machine and on what else it runs: the budgets hold on an idle
runner (the workflow job `browser-perf`); on a loaded machine read them as upper bounds.
``make test`` checks the deterministic part, each page's bytes, in tools/browser_check.py.
``BROWSER_CHECK_PAGES="chapters/03_smoothed_max.html ..."`` limits the pages.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import http.server
import os
import statistics
import sys
import threading
import time
from pathlib import Path

try:
    from tools.browser_check import PHONE, Browser, find_chromium
except ImportError:  # run as a script: tools/ itself is on sys.path
    from browser_check import PHONE, Browser, find_chromium

MAX_FIRST_PAINT_S = 1.2
MAX_LONG_TASKS_S = 2.0
RUNS = 3
QUIET_S = 3.0
CPU_SLOWDOWN = 4
MBIT = 9
LATENCY_MS = 60

# Installed before any script of the page runs: collects the long tasks.
OBSERVE = r"""
window.__attnlabLong = [];
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__attnlabLong.push([e.startTime, e.duration]);
  }).observe({type: 'longtask', buffered: true});
} catch (e) {}
"""

MEASURE = r"""
(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const lt = window.__attnlabLong || [];
  return {
    ready: document.readyState,
    load: nav && nav.loadEventEnd ? nav.loadEventEnd : null,
    fcp: fcp ? fcp.startTime : null,
    long_total: lt.reduce((s, e) => s + e[1], 0),
    long_after_load: lt.filter((e) => nav && e[0] >= nav.loadEventEnd)
        .reduce((s, e) => s + e[1], 0),
    last_long_end: lt.length ? Math.max(...lt.map((e) => e[0] + e[1])) : 0,
    now: performance.now(),
  };
})()
"""


class _Gzip(http.server.SimpleHTTPRequestHandler):
    """Serves the site as a production server would: gzip -6 when asked."""

    def log_message(self, *args):
        pass

    @functools.lru_cache(maxsize=4096)  # noqa: B019 (a few hundred files, one run)
    def _compressed(self, path: str, mtime: float) -> bytes:
        return gzip.compress(Path(path).read_bytes(), compresslevel=6, mtime=0)

    def do_GET(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if "gzip" not in self.headers.get("Accept-Encoding", "") or not os.path.isfile(
            path
        ):
            return super().do_GET()
        body = _Gzip._compressed(self, path, os.path.getmtime(path))
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve_gzip(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Gzip, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


async def one_load(browser: Browser, url: str) -> dict:
    await browser.call("Network.clearBrowserCache")
    browser.take_events()
    t0 = time.monotonic()
    await browser.call("Page.navigate", url=url)
    m: dict = {}
    while time.monotonic() - t0 < 60:
        await asyncio.sleep(0.5)
        m = await browser.evaluate(MEASURE) or {}
        if (
            m.get("load")
            and m["now"] - max(m["load"], m["last_long_end"]) > QUIET_S * 1000
        ):
            break
    sent = 0
    for e in browser.take_events():
        if e["method"] == "Network.loadingFinished":
            sent += e["params"].get("encodedDataLength", 0)
    m["transferred"] = sent
    return m


async def measure(exe: str, base: str, pages: list[str]) -> list[tuple[str, dict]]:
    browser = Browser(exe)
    results = []
    try:
        await browser.connect()
        await browser.call("Emulation.setDeviceMetricsOverride", **PHONE)
        await browser.call("Emulation.setTouchEmulationEnabled", enabled=True)
        await browser.call("Emulation.setCPUThrottlingRate", rate=CPU_SLOWDOWN)
        await browser.call(
            "Network.emulateNetworkConditions",
            offline=False,
            latency=LATENCY_MS,
            downloadThroughput=MBIT * 1e6 / 8,
            uploadThroughput=MBIT * 1e6 / 8,
        )
        await browser.call("Page.addScriptToEvaluateOnNewDocument", source=OBSERVE)
        for rel in pages:
            runs = [await one_load(browser, f"{base}/{rel}") for _ in range(RUNS)]

            def med(key, runs=runs):
                vals = [r[key] for r in runs if r.get(key) is not None]
                return statistics.median(vals) if vals else None

            res = {
                k: med(k)
                for k in ("fcp", "load", "long_total", "long_after_load", "transferred")
            }
            results.append((rel, res))
            print(
                f"{rel:38s} {res['transferred'] / 1e6:6.2f} MB  first paint "
                f"{(res['fcp'] or 0) / 1000:5.2f} s  load {(res['load'] or 0) / 1000:5.2f} s"
                f"  long tasks {res['long_total'] / 1000:5.2f} s "
                f"({res['long_after_load'] / 1000:.2f} s after load)",
                flush=True,
            )
    finally:
        if browser.ws is not None:
            browser.ws.close()
        browser.close()
    return results


def problems(results: list[tuple[str, dict]]) -> list[str]:
    out = []
    for rel, r in results:
        if r["fcp"] is None or r["fcp"] / 1000 > MAX_FIRST_PAINT_S:
            fcp = "never" if r["fcp"] is None else f"{r['fcp'] / 1000:.2f} s"
            out.append(f"{rel}: first paint {fcp} (budget {MAX_FIRST_PAINT_S} s)")
        if r["long_total"] / 1000 > MAX_LONG_TASKS_S:
            out.append(
                f"{rel}: {r['long_total'] / 1000:.2f} s of long tasks (budget "
                f"{MAX_LONG_TASKS_S} s)"
            )
    return out


def main(site: str) -> int:
    root = Path(site)
    if not (root / "index.html").exists():
        sys.exit(f"error: {root}/index.html not found; run `make book` first")
    pages = ["index.html"] + sorted(
        str(p.relative_to(root)) for p in (root / "chapters").glob("*.html")
    )
    only = os.environ.get("BROWSER_CHECK_PAGES", "").split()
    if only:
        pages = [p for p in pages if p in only]
    exe = find_chromium()
    print(
        f"throttled phone: {CPU_SLOWDOWN}x CPU, {MBIT} Mbit/s, {LATENCY_MS} ms latency, "
        f"gzip server, cold cache; median of {RUNS} loads"
    )
    server, base = serve_gzip(root)
    try:
        results = asyncio.run(measure(exe, base, pages))
    finally:
        server.shutdown()
    errors = problems(results)
    for e in errors:
        print("error:", e)
    print(f"browser perf: {len(pages)} pages, {len(errors)} over budget")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
