"""Load the built site as a mid-range phone would, and time it.

    python tools/browser_perf.py _build/html          (make browser-perf)

Every chapter page and the home page are loaded :data:`RUNS` times in headless Chromium,
each time cold (cache cleared and disabled), from a local server that gzips every
response (gzip -6), with DevTools throttling: 4x slower CPU, 9 Mbit/s down and up, 60 ms
of latency on every request; a 390 x 844 px phone screen. The :data:`RUNS` loads are
traced (DevTools tracing: the main thread's tasks with their thread CPU time) at full
CPU speed (Chromium's throttling pauses the thread, which muddles its CPU time), and one
more load runs at the 4x slowdown for the wall-clock figures. Per page, the median of
the traced loads of:

* **long tasks, CPU**: every main-thread task's *CPU* time (the trace's ``tdur``) times
  the slowdown (4), summed over the tasks that then take more than 50 ms, from the
  navigation until the page has been quiet for :data:`QUIET_S` after its load event
  (budget :data:`MAX_LONG_TASKS_S`). CPU time is what the page costs, whatever else the
  machine runs: on a busy machine the wall-clock figure (printed beside it, ``wall``)
  grows 1.5-3x, the CPU figure does not;
* **first paint**: first-contentful-paint, with the main thread's work before it counted
  at its CPU time times 4 instead of the wall time it took (the rest is the network's:
  budget :data:`MAX_FIRST_PAINT_S`); the wall-clock first paint is printed beside it;
* load: the load event, and the bytes transferred (what the server sent, gzip).

Then, on every page with a live model (a twin with a text box, attnlab.course.twin.live):
the twin is scrolled to, and a sentence is typed into its box one key every
:data:`KEY_INTERVAL_S` (an ordinary typist), at 4x CPU. Event Timing (the
browser's own input-to-next-paint of each keystroke, as INP counts it) gives the
**typing p95** over the keystrokes (budget :data:`MAX_KEY_P95_MS`; a keystroke under
Event Timing's 16 ms floor counts as 16 ms); typed again at full speed and traced, it
gives the main-thread CPU time x4 between two keys (p95: the load-independent side of
the same; the verdict when the machine is busy, its load average over its cores).

The load average is printed with each page: timings in wall-clock time are upper bounds
on a busy machine; the verdicts on long tasks and first paint use CPU time.
``make test`` checks the deterministic part, each page's bytes, in tools/browser_check.py.
``BROWSER_CHECK_PAGES="chapters/03_smoothed_max.html ..."`` limits the pages,
``BROWSER_PERF_RUNS=1`` the loads per page.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import http.server
import json
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
MAX_KEY_P95_MS = 50.0
RUNS = int(os.environ.get("BROWSER_PERF_RUNS", "3"))
QUIET_S = 3.0
CPU_SLOWDOWN = 4
MBIT = 9
LATENCY_MS = 60
LONG_TASK_MS = 50.0
KEY_INTERVAL_S = 0.25
EVENT_TIMING_FLOOR_MS = 16.0
# What is typed into each live model's box (its own task's kind of input).
TYPED = {
    "seq2seq_live": "attention reverses every word",
    "date_translator": "14 September 2003",
}
TYPED_DEFAULT = "attention is all we type"
TRACE_CATEGORIES = [
    "toplevel",
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "loading",
    "blink.user_timing",
    "__metadata",
]

# Installed before any script of the page runs: collects the long tasks (wall clock)
# and the Event Timing entries of keystrokes.
OBSERVE = r"""
window.__attnlabLong = [];
window.__attnlabEvents = [];
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__attnlabLong.push([e.startTime, e.duration]);
  }).observe({type: 'longtask', buffered: true});
} catch (e) {}
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      if (e.interactionId) window.__attnlabEvents.push([e.interactionId, e.name, e.duration]);
  }).observe({type: 'event', durationThreshold: 16, buffered: true});
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
    last_long_end: lt.length ? Math.max(...lt.map((e) => e[0] + e[1])) : 0,
    now: performance.now(),
  };
})()
"""

# The live models' text boxes on the page: [twin id, kind].
LIVE_TWINS = r"""
Array.from(document.querySelectorAll('[data-twin]'))
  .filter((t) => t.querySelector('input[type=text]'))
  .map((t) => [t.id, t.dataset.twin])
"""

# Scroll to a twin, fetch its model now, wait until it is mounted; empty its box.
PREPARE_TWIN = r"""
(async (id) => {
  const root = document.getElementById(id);
  root.scrollIntoView({block: 'center'});
  if (window.attnlabTwin && attnlabTwin.load) attnlabTwin.load(id);
  for (let i = 0; i < 400 && !root.dataset.twinReady; i++)
    await new Promise((r) => setTimeout(r, 50));
  const box = root.querySelector('input[type=text]');
  box.focus();
  box.value = '';
  box.dispatchEvent(new Event('input', {bubbles: true}));
  await new Promise((r) => setTimeout(r, 1500));
  window.__attnlabEvents = [];
  return !!root.dataset.twinReady;
})
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


async def _until(browser: Browser, method: str, timeout: float = 60.0) -> None:
    """Read DevTools messages until the event ``method`` arrives (kept in events)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if any(e["method"] == method for e in browser.events):
            return
        msg = json.loads(await asyncio.wait_for(browser.ws.read_message(), timeout))
        if "method" in msg and "id" not in msg:
            browser.events.append(msg)
    raise TimeoutError(f"no {method} from Chromium in {timeout:.0f} s")


async def start_trace(browser: Browser) -> None:
    await browser.call(
        "Tracing.start",
        transferMode="ReportEvents",
        traceConfig={
            "recordMode": "recordAsMuchAsPossible",
            "includedCategories": TRACE_CATEGORIES,
        },
    )


async def stop_trace(browser: Browser) -> list[dict]:
    """The trace events since :func:`start_trace` (other DevTools events stay queued)."""
    await browser.call("Tracing.end")
    await _until(browser, "Tracing.tracingComplete")
    trace, rest = [], []
    for e in browser.events:
        if e["method"] == "Tracing.dataCollected":
            trace += e["params"]["value"]
        elif e["method"] != "Tracing.tracingComplete":
            rest.append(e)
    browser.events = rest
    return trace


def main_thread_tasks(trace: list[dict]) -> list[tuple[float, float, float]]:
    """The page's main-thread top-level tasks as (start ms, wall ms, CPU ms), in trace
    time. The page's main thread is the renderer main thread (CrRendererMain) that ran
    the most."""
    names = {
        (e["pid"], e["tid"])
        for e in trace
        if e.get("ph") == "M"
        and e.get("name") == "thread_name"
        and e.get("args", {}).get("name") == "CrRendererMain"
    }
    by_thread: dict[tuple, list] = {}
    for e in trace:
        key = (e.get("pid"), e.get("tid"))
        if key in names and e.get("ph") == "X" and e.get("name") == "RunTask":
            by_thread.setdefault(key, []).append(e)
    if not by_thread:
        return []
    events = max(by_thread.values(), key=lambda v: sum(e.get("dur", 0) for e in v))
    tasks, end = [], -1.0
    for e in sorted(events, key=lambda e: e["ts"]):
        if e["ts"] < end:
            continue  # a task nested in the previous one
        end = e["ts"] + e.get("dur", 0)
        cpu = e.get("tdur", e.get("dur", 0))
        tasks.append((e["ts"] / 1000, e.get("dur", 0) / 1000, cpu / 1000))
    return tasks


def trace_marks(trace: list[dict], name: str) -> list[float]:
    return sorted(e["ts"] / 1000 for e in trace if e.get("name") == name and "ts" in e)


def long_tasks_cpu(tasks: list[tuple[float, float, float]]) -> float:
    """Sum, in ms, of CPU time x slowdown over the tasks that then exceed 50 ms."""
    est = (cpu * CPU_SLOWDOWN for _, _, cpu in tasks)
    return sum(x for x in est if x > LONG_TASK_MS)


def first_paint_cpu(
    tasks: list[tuple[float, float, float]], nav: float, fcp: float, fcp_wall: float
) -> float:
    """First paint (ms) with the main thread's work before it counted at CPU time x4
    instead of its wall time: what an idle phone would take."""
    before = [(t, w, c) for t, w, c in tasks if nav <= t < fcp]
    wall = sum(min(w, fcp - t) for t, w, _ in before)
    cpu = sum(c * min(1.0, (fcp - t) / w) if w > 0 else c for t, w, c in before)
    return max(fcp_wall - wall, 0.0) + CPU_SLOWDOWN * cpu


def busy() -> bool:
    """More runnable jobs than cores: wall-clock timings say more about the machine
    than about the page, and the typing verdict falls back on CPU time."""
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:
        return False


def loadavg() -> str:
    try:
        return f"load {os.getloadavg()[0]:.1f}"
    except OSError:
        return "load ?"


async def one_load(browser: Browser, url: str, traced: bool = True) -> dict:
    """One cold load. Traced, it runs at full CPU speed (Chromium's CPU throttling
    pauses the thread, which muddles its CPU time) and the CPU figures are computed;
    untraced, it runs at the phone's slowdown and gives the wall-clock figures."""
    await browser.call("Network.clearBrowserCache")
    await browser.call(
        "Emulation.setCPUThrottlingRate", rate=1 if traced else CPU_SLOWDOWN
    )
    browser.take_events()
    if traced:
        await start_trace(browser)
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
    trace = await stop_trace(browser) if traced else []
    sent = 0
    for e in browser.take_events():
        if e["method"] == "Network.loadingFinished":
            sent += e["params"].get("encodedDataLength", 0)
    m["transferred"] = sent
    if not traced:
        return {"wall_" + k: v for k, v in m.items()}
    tasks = main_thread_tasks(trace)
    navs = trace_marks(trace, "navigationStart")
    fcps = trace_marks(trace, "firstContentfulPaint")
    # the page's own navigation: the last one before its first paint (frames inside
    # the page, e.g. an iframe, start navigations of their own later)
    fcp = fcps[0] if fcps else None
    start = [n for n in navs if fcp is None or n <= fcp]
    nav = start[-1] if start else (tasks[0][0] if tasks else 0.0)
    m["long_cpu"] = long_tasks_cpu([t for t in tasks if t[0] >= nav])
    m["fcp_cpu"] = (
        first_paint_cpu(tasks, nav, fcp, m["fcp"])
        if fcp is not None and m.get("fcp") is not None
        else None
    )
    return m


def p95(values: list[float]) -> float:
    """The 95th percentile, nearest rank."""
    v = sorted(values)
    return v[max(0, min(len(v) - 1, -(-95 * len(v) // 100) - 1))] if v else 0.0


async def type_into(browser: Browser, twin_id: str, kind: str, traced: bool) -> dict:
    """Type into a live twin's box, one key every KEY_INTERVAL_S. Untraced, at the
    phone's CPU slowdown: Event Timing per keystroke. Traced, at full speed: the main
    thread's CPU time x4 between one keystroke and the next."""
    await browser.call(
        "Emulation.setCPUThrottlingRate", rate=1 if traced else CPU_SLOWDOWN
    )
    ready = await browser.evaluate(f"({PREPARE_TWIN})({json.dumps(twin_id)})")
    if not ready:
        return {"error": f"twin {twin_id} did not mount"}
    text = TYPED.get(kind, TYPED_DEFAULT)
    if traced:
        await start_trace(browser)
    for ch in text:
        await browser.call("Input.dispatchKeyEvent", type="keyDown", text=ch, key=ch,
                           unmodifiedText=ch)  # fmt: skip
        await browser.call("Input.dispatchKeyEvent", type="keyUp", key=ch)
        await asyncio.sleep(KEY_INTERVAL_S)
    await asyncio.sleep(1.5)
    value = await browser.evaluate(
        f"document.getElementById({json.dumps(twin_id)})"
        ".querySelector('input[type=text]').value"
    )
    out: dict = {"keys": len(text), "typed_ok": value == text}
    if not traced:
        entries = await browser.evaluate("window.__attnlabEvents") or []
        worst: dict[int, float] = {}
        for iid, _name, dur in entries:
            worst[iid] = max(worst.get(iid, 0.0), dur)
        durations = sorted(worst.values(), reverse=True)[: len(text)]
        durations += [EVENT_TIMING_FLOOR_MS] * (len(text) - len(durations))
        out |= {
            "p95": p95(durations),
            "worst": max(durations),
            "over_100": sum(d >= 100 for d in durations),
        }
        return out
    trace = await stop_trace(browser)
    tasks = main_thread_tasks(trace)
    downs = sorted(
        e["ts"] / 1000
        for e in trace
        if e.get("name") == "EventDispatch"
        and e.get("args", {}).get("data", {}).get("type") == "keydown"
    )
    between = []
    for i, t in enumerate(downs):
        nxt = downs[i + 1] if i + 1 < len(downs) else t + KEY_INTERVAL_S * 1000
        between.append(CPU_SLOWDOWN * sum(c for s, _, c in tasks if t <= s < nxt))
    out["cpu_p95"] = p95(between) if between else None
    return out


async def measure(exe: str, base: str, pages: list[str]) -> list[tuple[str, dict]]:
    browser = Browser(exe)
    results = []
    try:
        await browser.connect()
        await browser.call("Emulation.setDeviceMetricsOverride", **PHONE)
        await browser.call("Emulation.setTouchEmulationEnabled", enabled=True)
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
            runs.append(await one_load(browser, f"{base}/{rel}", traced=False))

            def med(key, runs=runs):
                vals = [r[key] for r in runs if r.get(key) is not None]
                return statistics.median(vals) if vals else None

            keys = ("fcp_cpu", "long_cpu", "transferred", "wall_fcp", "wall_load",
                    "wall_long_total")  # fmt: skip
            res = {k: med(k) for k in keys}
            res["typing"] = []
            for twin_id, kind in await browser.evaluate(LIVE_TWINS) or []:
                t = await type_into(browser, twin_id, kind, traced=False)
                if "error" not in t:
                    cpu = await type_into(browser, twin_id, kind, traced=True)
                    t["cpu_p95"] = cpu.get("cpu_p95")
                res["typing"].append((kind, t))
            results.append((rel, res))
            print(
                f"{rel:38s} {res['transferred'] / 1e6:5.2f} MB  first paint "
                f"{_s(res['fcp_cpu'])} (wall {_s(res['wall_fcp'])})  long tasks "
                f"{_s(res['long_cpu'])} CPU x{CPU_SLOWDOWN} (wall "
                f"{_s(res['wall_long_total'])})  load {_s(res['wall_load'])}  "
                f"[{loadavg()}]",
                flush=True,
            )
            for kind, t in res["typing"]:
                if "error" in t:
                    print(f"    typing in {kind}: {t['error']}", flush=True)
                    continue
                print(
                    f"    typing in {kind}: {t['keys']} keys, one every "
                    f"{KEY_INTERVAL_S * 1000:.0f} ms: input to next paint p95 "
                    f"{t['p95']:.0f} ms, worst {t['worst']:.0f} ms, "
                    f"{t['over_100']} >= 100 ms; main-thread CPU x{CPU_SLOWDOWN} "
                    f"between keys p95 {t['cpu_p95'] or 0:.0f} ms  [{loadavg()}]",
                    flush=True,
                )
    finally:
        if browser.ws is not None:
            browser.ws.close()
        browser.close()
    return results


def _s(ms: float | None) -> str:
    return "  n/a" if ms is None else f"{ms / 1000:5.2f} s"


def problems(results: list[tuple[str, dict]]) -> list[str]:
    out = []
    for rel, r in results:
        fcp = r.get("fcp_cpu")
        if fcp is None or fcp / 1000 > MAX_FIRST_PAINT_S:
            shown = "never" if fcp is None else f"{fcp / 1000:.2f} s"
            out.append(f"{rel}: first paint {shown} (budget {MAX_FIRST_PAINT_S} s)")
        if (r.get("long_cpu") or 0) / 1000 > MAX_LONG_TASKS_S:
            out.append(
                f"{rel}: {r['long_cpu'] / 1000:.2f} s of long tasks at "
                f"{CPU_SLOWDOWN}x CPU (budget {MAX_LONG_TASKS_S} s)"
            )
        for kind, t in r.get("typing", []):
            if "error" in t:
                out.append(f"{rel}: {kind}: {t['error']}")
            elif not t["typed_ok"]:
                out.append(f"{rel}: {kind}: the typed text did not reach the box")
            elif busy() and (t.get("cpu_p95") or 0) > MAX_KEY_P95_MS:
                out.append(
                    f"{rel}: typing in {kind}: main-thread CPU x{CPU_SLOWDOWN} between "
                    f"keys p95 {t['cpu_p95']:.0f} ms (budget {MAX_KEY_P95_MS:.0f} ms)"
                )
            elif not busy() and t["p95"] > MAX_KEY_P95_MS:
                out.append(
                    f"{rel}: typing in {kind}: input to next paint p95 "
                    f"{t['p95']:.0f} ms (budget {MAX_KEY_P95_MS:.0f} ms)"
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
        f"gzip server, cold cache; median of {RUNS} loads; {loadavg()}"
    )
    server, base = serve_gzip(root)
    try:
        results = asyncio.run(measure(exe, base, pages))
    finally:
        server.shutdown()
    errors = problems(results)
    if busy():
        print(
            f"(the machine is busy, {loadavg()} on {os.cpu_count()} cores: the typing "
            "verdict uses main-thread CPU time, not Event Timing's wall clock)"
        )
    for e in errors:
        print("error:", e)
    print(f"browser perf: {len(pages)} pages, {len(errors)} over budget")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
