/* attnlab site fixes, loaded on every page (jupyter-book adds every _static/*.js).
 *
 * 1. The ipywidgets HTML manager (embed-amd.js) typesets widget labels with the
 *    MathJax 2 API, MathJax.Hub.Queue, whenever window.MathJax exists; the site loads
 *    MathJax 3, which has no Hub, so every widget page threw "Cannot read properties of
 *    undefined (reading 'Queue')" (jupyter-widgets/ipywidgets#3829). A Hub whose Queue
 *    hands the element to MathJax 3's typesetPromise is installed on MathJax as soon
 *    as it is assigned.
 * 2. Images that embedded widgets draw get the alt text their output carries
 *    (attnlab.plotting.show puts it in the output metadata, which the widget manager
 *    ignores): it is looked up in the page's widget state by the image's bytes.
 * 3. The embedded widgets are snapshots: their controls cannot recompute without a
 *    Python kernel. Each gets a visible notice and its controls are made inert, so
 *    nothing on the page looks alive that is not.
 * 4. Accessible names: ipywidgets' slider handles get their label's text, and
 *    sphinx-togglebutton's buttons say what they show ("Show code cell source") instead
 *    of an aria-label that does not match it.
 */
(function () {
  'use strict';

  // ------------------------------------------------ 1. MathJax 2 API for the widgets
  function addHub(mj) {
    if (!mj || typeof mj !== 'object' || mj.Hub) return;
    if (!mj.version) return; // still the configuration object: MathJax 3 replaces it
    mj.Hub = {
      Queue: function () {
        for (var i = 0; i < arguments.length; i++) {
          var a = arguments[i], el = Array.isArray(a) ? a[2] : null;
          if (!(el instanceof Element)) continue;
          var go = function (node) {
            if (window.MathJax.typesetPromise) window.MathJax.typesetPromise([node]).catch(function () {});
          };
          if (mj.startup && mj.startup.promise) mj.startup.promise.then(go.bind(null, el)).catch(function () {});
          else go(el);
        }
      },
    };
  }
  try {
    var current = window.MathJax;
    Object.defineProperty(window, 'MathJax', {
      configurable: true,
      enumerable: true,
      get: function () { return current; },
      set: function (v) { current = v; addHub(v); },
    });
    addHub(current);
  } catch (e) { /* a browser that refuses: the DOMContentLoaded pass below still runs */ }
  document.addEventListener('DOMContentLoaded', function () { addHub(window.MathJax); });

  // ---------------------------------------------------------- 2-4. after rendering
  var altByData = null;
  function widgetAlts() {
    if (altByData) return altByData;
    altByData = {};
    var states = document.querySelectorAll('script[type="application/vnd.jupyter.widget-state+json"]');
    for (var s = 0; s < states.length; s++) {
      var st;
      try { st = JSON.parse(states[s].textContent); } catch (e) { continue; }
      var models = (st && st.state) || {};
      for (var id in models) {
        var outs = (models[id].state && models[id].state.outputs) || [];
        for (var o = 0; o < outs.length; o++) {
          var out = outs[o], data = out.data || {}, meta = out.metadata || {};
          var png = data['image/png'];
          var alt = meta['image/png'] && meta['image/png'].alt;
          if (png && alt) altByData[String(png).replace(/\s+/g, '')] = String(alt);
        }
      }
    }
    return altByData;
  }
  var FALLBACK_ALT = 'Figure drawn by the notebook widget for its initial settings';
  var NOTICE = 'Snapshot of a notebook widget: its controls need a running Python '
    + 'kernel. Open the notebook (rocket icon at the top of the page) to use them.';

  function fixImages(root) {
    var imgs = root.querySelectorAll('.jupyter-widgets img, .widget-output img');
    var i;
    for (i = 0; i < imgs.length; i++) {
      var img = imgs[i];
      if (img.hasAttribute('alt') && img.getAttribute('alt')) continue;
      var src = img.getAttribute('src') || '', k = src.indexOf('base64,');
      var alt = k >= 0 ? widgetAlts()[src.slice(k + 7).replace(/\s+/g, '')] : null;
      img.setAttribute('alt', alt || FALLBACK_ALT);
    }
    // Never shrunk below 0.68 of their natural width, like the page's own figures
    // (tools/site_polish.py): 10-pt text stays >= 9 CSS px; the output box scrolls.
    for (i = 0; i < imgs.length; i++) sizeFigure(imgs[i]);
  }
  function sizeFigure(img) {
    if (img.dataset.attnlabFig) return;
    if (!img.complete || !img.naturalWidth) {
      img.addEventListener('load', function () { sizeFigure(img); }, { once: true });
      return;
    }
    img.dataset.attnlabFig = '1';
    img.style.minWidth = Math.round(0.68 * img.naturalWidth) + 'px';
  }
  function freezeWidgets(root) {
    var boxes = root.querySelectorAll('.cell_output .jupyter-widgets.widget-interact');
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      if (!box.dataset.attnlabFrozen) {
        box.dataset.attnlabFrozen = '1';
        var note = document.createElement('p');
        note.className = 'attnlab-frozen-note';
        note.textContent = NOTICE;
        box.parentNode.insertBefore(note, box);
      }
      // The controls render after the box: every pass makes the new ones inert.
      var controls = box.querySelectorAll('.widget-slider, .widget-dropdown, .widget-checkbox, '
        + '.widget-toggle-buttons, .widget-text, .widget-button, .widget-select, '
        + '.widget-hslider, .widget-vslider');
      for (var c = 0; c < controls.length; c++) {
        if (controls[c].closest('.widget-output') || controls[c].hasAttribute('inert')) continue;
        controls[c].setAttribute('inert', '');
        controls[c].classList.add('attnlab-frozen');
      }
    }
  }
  function nameHandles(root) {
    var handles = root.querySelectorAll('.noUi-handle');
    for (var i = 0; i < handles.length; i++) {
      var h = handles[i];
      if (h.getAttribute('aria-label')) continue;
      var w = h.closest('.widget-slider, .widget-hslider, .widget-vslider, .jupyter-widgets');
      var lab = w && w.querySelector('.widget-label');
      var text = lab && lab.textContent.trim();
      h.setAttribute('aria-label', text || 'slider');
    }
  }
  function nameToggles(root) {
    // Buttons and summaries whose aria-label ("Toggle hidden content") does not contain
    // their visible text: the visible text becomes the name.
    var els = root.querySelectorAll('[aria-label="Toggle hidden content"]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i], text = (el.textContent || '').replace(/\s+/g, ' ').trim();
      if (text) el.removeAttribute('aria-label');
      else el.setAttribute('aria-label', el.getAttribute('data-toggle-hint') || 'Show or hide content');
    }
  }
  function nameMismatches(root) {
    // Buttons whose aria-label does not contain their visible text ("Search" on a
    // button that shows "Search Ctrl+K"): the visible text becomes the name.
    var els = root.querySelectorAll('button[aria-label], a[aria-label], summary[aria-label]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i], text = (el.innerText || '').replace(/\s+/g, ' ').trim();
      var label = el.getAttribute('aria-label').toLowerCase();
      if (text && label.indexOf(text.toLowerCase()) < 0) el.removeAttribute('aria-label');
    }
  }
  // A box that scrolls sideways (a wide figure on a phone) must be reachable by
  // keyboard to be scrolled without a pointer, and must show that it scrolls: a
  // "scroll sideways" line above it and a faded right edge until its end is reached.
  // Boxes are measured once the page has painted (not before its first paint), and
  // again when a twin redraws inside one or the window is resized.
  var BOXES = 'div.cell_output, .widget-output, .jp-RenderedImage, .twin-plot, .attnlab-snapshot, div.math';
  function fadeEdge(b) {
    b.classList.toggle('attnlab-more-right', b.scrollLeft + b.clientWidth < b.scrollWidth - 2);
  }
  function checkBox(b) {
    if (b.querySelector('div.cell_output, .twin-plot')) return; // the inner box scrolls
    var hint = b.previousElementSibling;
    if (!(hint && hint.classList.contains('attnlab-scroll-hint'))) hint = null;
    if (b.scrollWidth > b.clientWidth + 1) {
      if (!b.hasAttribute('tabindex')) {
        b.setAttribute('tabindex', '0');
        b.setAttribute('role', 'region');
        b.setAttribute('aria-label', (b.classList.contains('math') ? 'Formula' : 'Output') + ' (scrolls sideways)');
        b.dataset.attnlabScroller = '1';
      }
      b.classList.add('attnlab-scrolls');
      if (!hint) {
        hint = document.createElement('p');
        hint.className = 'attnlab-scroll-hint';
        hint.setAttribute('aria-hidden', 'true'); // the region's name says it
        hint.textContent = '⇆ wider than the screen: scroll sideways';
        b.parentNode.insertBefore(hint, b);
      }
      if (!b.dataset.attnlabFade) {
        b.dataset.attnlabFade = '1';
        b.addEventListener('scroll', function () { fadeEdge(this); }, { passive: true });
      }
      fadeEdge(b);
    } else {
      if (b.dataset.attnlabScroller) {
        delete b.dataset.attnlabScroller;
        b.removeAttribute('tabindex'); b.removeAttribute('role'); b.removeAttribute('aria-label');
      }
      b.classList.remove('attnlab-scrolls', 'attnlab-more-right');
      if (hint) hint.parentNode.removeChild(hint);
    }
  }
  function watchScrollers(root) {
    var boxes = root.querySelectorAll(BOXES);
    for (var i = 0; i < boxes.length; i++) checkBox(boxes[i]);
  }
  function fixAll() {
    var root = document.body;
    if (!root) return;
    fixImages(root);
    freezeWidgets(root);
    nameHandles(root);
    nameToggles(root);
    nameMismatches(root);
    watchScrollers(root);
  }
  // What changed since the last frame: new elements get the fixes, and a box whose
  // content changed (a twin redrawn) is measured again.
  var pendingNodes = [], pending = false;
  function flush() {
    pending = false;
    var nodes = pendingNodes; pendingNodes = [];
    var seen = new Set();
    for (var i = 0; i < nodes.length; i++) {
      var n = nodes[i];
      if (n.nodeType !== 1) n = n.parentElement;
      if (!n || !n.isConnected || seen.has(n)) continue;
      seen.add(n);
      var box = n.closest(BOXES);
      if (box) checkBox(box);
      if (n.querySelector && n.firstElementChild) {
        fixImages(n); freezeWidgets(n); nameHandles(n); nameToggles(n); watchScrollers(n);
      }
    }
  }
  function onMutations(records) {
    for (var i = 0; i < records.length; i++) {
      var r = records[i];
      pendingNodes.push(r.target);
      for (var j = 0; j < r.addedNodes.length; j++) pendingNodes.push(r.addedNodes[j]);
    }
    if (pending) return;
    pending = true;
    (window.requestAnimationFrame || setTimeout)(flush);
  }
  function remeasure() { watchScrollers(document.body); }
  // For checks and tests: measure every box now.
  window.attnlabSite = { measureAll: remeasure };
  document.addEventListener('DOMContentLoaded', function () {
    fixImages(document.body); freezeWidgets(document.body); nameHandles(document.body);
    nameToggles(document.body); nameMismatches(document.body);
    // after the first paint: measuring the boxes forces a layout
    (window.requestAnimationFrame || setTimeout)(function () { setTimeout(fixAll, 0); });
    new MutationObserver(onMutations).observe(document.body, { childList: true, subtree: true });
  });
  window.addEventListener('load', fixAll);
  var resizing = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizing); resizing = setTimeout(remeasure, 150);
  });
})();
