"""What every twin gets from the runtime (attnlab/course/twin/core.js), with no code of
its own (issue 41; CONTRIBUTING, "Twins"): readouts named and silent, one debounced
status line per twin, aria-valuetext on sliders that show another value, heatmap ink
with >= 4.5:1 contrast, coalesced/debounced updates and payloads fetched from a file
when the page says so (the website's model weights)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil

import pytest

from attnlab.course.ch03_mappings.twins import mapping_lab_twin
from attnlab.course.twin import Readout, Twin
from tools.browser_check import Browser, serve

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_readouts_are_named_and_silent():
    html = mapping_lab_twin().html()
    outputs = re.findall(r"<output\b[^>]*>", html)
    assert outputs
    for tag in outputs:
        assert 'aria-live="off"' in tag, tag  # no live region per readout
    named = [t for t in outputs if "aria-label=" in t]
    assert len(named) == len(re.findall(r'class="twin-readout"', html))
    assert 'aria-label="entropy"' in html
    # exactly one live region: the twin's status line
    assert html.count('role="status"') == 1 and 'class="twin-status"' in html
    quiet = Readout("time", "decoded in", announce=False).html()
    assert 'data-announce="false"' in quiet


def test_old_readout_signature_still_works():
    # Twins written against the earlier API (Readout(name, label)) keep working.
    r = Readout("x", "the x")
    assert r.announce and 'data-readout="x"' in r.html()


def _page(body: str) -> str:
    return f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>"


async def _drive(url: str, script: str):
    browser = Browser(CHROMIUM)
    try:
        await browser.connect()
        await browser.call("Page.navigate", url=url)
        for _ in range(100):
            await asyncio.sleep(0.1)
            if await browser.evaluate("document.readyState") == "complete":
                break
        return await browser.evaluate(script)
    finally:
        if browser.ws is not None:
            browser.ws.close()
        browser.close()


BEHAVIOUR = r"""
(async () => {
  const T = window.attnlabTwin, root = document.querySelector('[data-twin]');
  const status = root.querySelector('[role=status]');
  let announcements = 0;
  new MutationObserver(() => announcements++).observe(status,
      {childList: true, characterData: true, subtree: true});
  const slider = root.querySelector('input[name=logscale]');
  const entropy = () => root.querySelector('[data-readout=entropy]').textContent;
  const before = entropy();
  // five quick steps: updates wait for the next frame, the status line for a pause
  for (const v of [0.5, 0.8, 1, 1.5, 2]) {
    slider.value = String(v); slider.dispatchEvent(new Event('input', {bubbles: true}));
  }
  const sync = entropy();
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const framed = entropy();
  await new Promise((r) => setTimeout(r, 1500));
  const inks = [];
  for (let v = 0; v <= 1.0001; v += 0.005) {
    const bg = T.color(v), ink = T.inkOn(v) === '#000' ? 'rgb(0,0,0)' : 'rgb(255,255,255)';
    inks.push(T.contrast(bg, ink));
  }
  return {before, sync, framed, announcements, said: status.textContent,
          valuetext: slider.getAttribute('aria-valuetext'),
          shown: root.querySelector('output[for="' + slider.id + '"]').textContent,
          min_contrast: Math.min(...inks)};
})()
"""


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_runtime_accessibility_and_coalescing(tmp_path):
    page = tmp_path / "twin.html"
    page.write_text(_page(mapping_lab_twin().html()))
    got = asyncio.run(_drive(page.as_uri(), BEHAVIOUR))
    assert got["sync"] == got["before"]  # nothing recomputed inside the event
    assert got["framed"] != got["before"]  # one update on the next frame
    assert got["announcements"] == 1, got  # one summary for five steps
    assert "entropy: " in got["said"] and "largest weight: " in got["said"]
    # the log slider shows ×100 (its raw value is 2): that is what it says
    assert got["valuetext"] == got["shown"] and got["shown"] != "2"
    assert got["min_contrast"] >= 4.5


LAZY = r"""
(async () => {
  const root = document.querySelector('[data-twin]');
  const before = root.dataset.twinReady === '1';
  root.scrollIntoView();
  for (let i = 0; i < 50 && root.dataset.twinReady !== '1'; i++)
    await new Promise((r) => setTimeout(r, 100));
  return {before, after: root.dataset.twinReady === '1',
          error: root.getAttribute('data-twin-error'),
          entropy: root.querySelector('[data-readout=entropy]').getAttribute('data-value'),
          data: JSON.stringify(window.attnlabTwin.data[root.id])};
})()
"""


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed")
def test_payload_fetched_when_the_twin_nears_the_viewport(tmp_path):
    twin: Twin = mapping_lab_twin()
    html = twin.html()
    payload = re.search(
        r'<script type="application/json" class="twin-data">(.*?)</script>', html, re.S
    ).group(1)
    (tmp_path / "data.json").write_text(payload)
    lazy = html.replace(
        f'<script type="application/json" class="twin-data">{payload}</script>',
        '<script type="application/json" class="twin-data" data-src="data.json">{}'
        "</script>",
    )
    assert lazy != html
    spacer = '<div style="height:6000px">text</div>'
    (tmp_path / "inline.html").write_text(_page(html))
    (tmp_path / "lazy.html").write_text(_page(spacer + lazy))
    server, base = serve(tmp_path)
    try:
        inline = asyncio.run(_drive(f"{base}/inline.html", LAZY))
        got = asyncio.run(_drive(f"{base}/lazy.html", LAZY))
    finally:
        server.shutdown()
    assert got["before"] is False  # far below the screen: not fetched yet
    assert got["after"] and not got["error"], got
    assert got["entropy"] == inline["entropy"]
    assert json.loads(got["data"]) == json.loads(payload)
