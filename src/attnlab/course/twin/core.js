/* attnlab static twins: the shared runtime (no dependencies, no network).
 *
 * Inlined by attnlab/widgets/twin.py into every twin's output, guarded so a page with
 * several twins defines it once. A plain script, not a UMD/AMD module: on a Jupyter
 * Book page require.js is present, and a UMD bundle would register itself with it and
 * never define its global. Nothing here calls define() or require().
 *
 * A twin kind registers with  attnlabTwin.define(name, setup)  where setup(t) returns
 * an update() function called once and on every `input`/`change` event of the twin's
 * controls. t gives: t.root, t.data (the JSON payload), t.value(name) (a number for a
 * range, the string of a select, a boolean for a checkbox), t.control(name),
 * t.readout(name, value, text) (writes the text and the exact value into every element
 * with data-readout=name), t.exact(name, value) (an exact value for the tests only,
 * kept in attnlabTwin.exact[id], no element: e.g. every cell of a big heatmap),
 * t.plot (an empty <div> to draw in), and the helpers below (t.heatmap draws a
 * labelled heatmap, on a <canvas> when it is big).
 *
 * What every twin gets from the runtime, with no code of its own (CONTRIBUTING, "Twins"):
 *  - updates coalesced: input events schedule one update() per animation frame; a text
 *    box waits until the reader pauses (DEBOUNCE_MS), so a keystroke costs ~nothing;
 *    attnlabTwin.flush(id) runs a pending update now (the browser check does);
 *  - accessibility: readouts are named by their label and are not live regions; one
 *    visually hidden role=status summary per twin says every readout once, after the
 *    reader stops moving a control (ANNOUNCE_MS); a readout named "time" or marked
 *    data-announce="false" is left out; a slider whose readout text differs from its raw
 *    value (a log slider showing ×1.00) gets that text as aria-valuetext;
 *  - lazy payloads: when the payload <script class="twin-data"> has a data-src (the
 *    website moves model weights to a cacheable file, tools/site_polish.py), the twin
 *    mounts when it comes within LAZY_MARGIN of the viewport, after fetching the file;
 *    attnlabTwin.load(id) fetches it now. Notebook outputs keep the payload inline.
 */
(function () {
  if (window.attnlabTwin) return;
  var T = { kinds: {}, timings: {}, exact: {}, data: {}, pending: {}, lazy: {} };
  // A text box recomputes once the reader pauses for DEBOUNCE_MS: longer than the
  // 250 ms between an ordinary typist's keys, so a live model decodes once per pause,
  // not under every keystroke (each decode at a phone's speed blocked the next key).
  var DEBOUNCE_MS = 300, ANNOUNCE_MS = 700, LAZY_MARGIN = '1200px 0px';

  // ------------------------------------------------------------------- mappings
  T.max = function (z) { var m = -Infinity; for (var i = 0; i < z.length; i++) if (z[i] > m) m = z[i]; return m; };
  T.sum = function (z) { var s = 0; for (var i = 0; i < z.length; i++) s += z[i]; return s; };
  // softmax as attnlab.mappings.softmax: a fully -inf row gives zeros, not NaN.
  T.softmax = function (z) {
    var m = T.max(z); if (!isFinite(m)) m = 0;
    var e = z.map(function (v) { return Math.exp(v - m); }), s = T.sum(e);
    return e.map(function (v) { return s > 0 ? v / s : 0; });
  };
  function sortedDesc(z) { return z.filter(function (v) { return v > -Infinity; }).sort(function (a, b) { return b - a; }); }
  // sparsemax (Martins & Astudillo 2016): p = [z - tau]_+, tau from the sorted scores.
  T.sparsemax = function (z) {
    var s = sortedDesc(z); if (!s.length) return z.map(function () { return 0; });
    var cs = 0, k = 0, csk = 0;
    for (var i = 0; i < s.length; i++) { cs += s[i]; if (1 + (i + 1) * s[i] > cs) { k = i + 1; csk = cs; } }
    var tau = (csk - 1) / k;
    return z.map(function (v) { return Math.max(v - tau, 0); });
  };
  // 1.5-entmax (Peters, Niculae & Martins 2019): p = [z/2 - tau]_+^2, exact sort-based tau.
  T.entmax15 = function (z) {
    var m = T.max(z); if (!isFinite(m)) return z.map(function () { return 0; });
    var x = z.map(function (v) { return (v - m) / 2; }), s = sortedDesc(x);
    var c1 = 0, c2 = 0, tau = 0;
    for (var i = 0; i < s.length; i++) {
      var r = i + 1; c1 += s[i]; c2 += s[i] * s[i];
      var mean = c1 / r, ss = r * (c2 / r - mean * mean), delta = (1 - ss) / r;
      var t = mean - Math.sqrt(Math.max(delta, 0));
      if (t <= s[i]) tau = t; else break;
    }
    return x.map(function (v) { var d = Math.max(v - tau, 0); return d * d; });
  };
  T.entropy = function (p) { var h = 0; p.forEach(function (v) { if (v > 0) h -= v * Math.log(v); }); return h + 0; };
  T.support = function (p) { return p.filter(function (v) { return v > 0; }).length; };
  T.argmax = function (z) { var j = 0; for (var i = 1; i < z.length; i++) if (z[i] > z[j]) j = i; return j; };

  // ------------------------------------------------------------ number formats
  // float32 and float16 rounding (round to nearest, ties to even), to emulate torch.
  T.f32 = Math.fround;
  T.f16 = function (x) {
    if (!isFinite(x) || x === 0) return x;
    var a = Math.abs(x), sign = x < 0 ? -1 : 1;
    if (a >= 65520) return sign * Infinity; // above the largest half + half an ulp
    var e = Math.floor(Math.log2(a));
    if (Math.pow(2, e) > a) e -= 1; else if (Math.pow(2, e + 1) <= a) e += 1;
    if (e < -14) e = -14; // subnormals share the smallest exponent
    var ulp = Math.pow(2, e - 10), q = a / ulp, f = Math.floor(q), d = q - f;
    if (d > 0.5 || (d === 0.5 && f % 2 === 1)) f += 1;
    return sign * f * ulp;
  };

  // --------------------------------------------------------- random numbers
  // mulberry32 uniforms and Box-Muller normals; attnlab.widgets.twins mirrors them.
  T.uniforms = function (seed, n) {
    var a = seed >>> 0, out = new Float64Array(n);
    for (var i = 0; i < n; i++) {
      a = (a + 0x6D2B79F5) >>> 0;
      var t = Math.imul(a ^ (a >>> 15), a | 1);
      t = ((t + Math.imul(t ^ (t >>> 7), t | 61)) ^ t) >>> 0;
      out[i] = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    }
    return out;
  };
  T.normals = function (seed, n) {
    var u = T.uniforms(seed, 2 * n), out = new Float64Array(n);
    for (var i = 0; i < n; i++) { var u1 = 1 - u[2 * i], u2 = u[2 * i + 1]; out[i] = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2); }
    return out;
  };

  // ---------------------------------------------------------------- drawing
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]; }); }
  T.esc = esc;
  // el('rect', {x: 1}) -> '<rect x="1"></rect>'; children are strings.
  T.el = function (tag, attrs, children) {
    var s = '<' + tag;
    for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) s += ' ' + k + '="' + esc(attrs[k]) + '"';
    return s + '>' + (children || '') + '</' + tag + '>';
  };
  // Never drawn smaller than its natural size (its 9-11 px text stays legible on a
  // phone): the plot box scrolls sideways instead.
  T.svg = function (w, h, body, label) {
    return T.el('svg', { viewBox: '0 0 ' + w + ' ' + h, width: w, height: h, role: 'img', 'aria-label': label || '', class: 'twin-svg', style: 'min-width:' + w + 'px' }, body);
  };
  T.text = function (x, y, s, attrs) {
    var a = { x: x, y: y, fill: 'currentColor', 'font-size': 11 };
    for (var k in attrs || {}) a[k] = attrs[k];
    return T.el('text', a, esc(s));
  };
  // Viridis, interpolated from 6 stops: readable on light and dark backgrounds.
  var VIR = [[68, 1, 84], [65, 68, 135], [42, 120, 142], [34, 168, 132], [122, 209, 81], [253, 231, 37]];
  T.color = function (v) {
    v = Math.min(1, Math.max(0, isFinite(v) ? v : 0)) * (VIR.length - 1);
    var i = Math.min(Math.floor(v), VIR.length - 2), f = v - i, a = VIR[i], b = VIR[i + 1];
    return 'rgb(' + [0, 1, 2].map(function (c) { return Math.round(a[c] + f * (b[c] - a[c])); }).join(',') + ')';
  };
  // Text on a heatmap cell of value v: black or white, whichever contrasts more with
  // T.color(v) (WCAG contrast; >= 4.58:1 on every viridis colour).
  T.luminance = function (rgb) {
    var c = String(rgb).match(/[\d.]+/g).slice(0, 3).map(function (x) {
      x = +x / 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  T.contrast = function (a, b) {
    var la = T.luminance(a), lb = T.luminance(b);
    return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
  };
  T.inkOn = function (v) {
    var bg = T.color(v);
    return T.contrast(bg, 'rgb(0,0,0)') >= T.contrast(bg, 'rgb(255,255,255)') ? '#000' : '#fff';
  };
  T.fmt = function (v, d) {
    if (typeof v !== 'number') return String(v);
    if (isNaN(v)) return 'NaN';
    if (!isFinite(v)) return v > 0 ? '∞' : '−∞';
    var s = v.toFixed(d === undefined ? 3 : d);
    return s.charAt(0) === '-' ? '−' + s.slice(1) : s;
  };
  T.num = function (s) { return parseFloat(String(s).replace('−', '-').replace('∞', 'Infinity')); };

  // A heatmap of W (rows x cols, values in [0, 1]) with row labels on the left, column
  // labels on top and an optional text per row on the right. Small ones are SVG with a
  // <title> per cell; above HEATMAP_SVG_CELLS cells it is a <canvas> on a light panel
  // (thousands of SVG nodes made every keystroke of a live model cost 100+ ms). Every
  // cell's exact value goes to t.exact(prefix + i + ':' + j) either way.
  // o: {rows, cols, W, label, x0, y0, cw, ch, right, caption, prefix, colText}
  var HEATMAP_SVG_CELLS = 400;
  T.heatmapInto = function (t, o) {
    var R = o.W.length, C = o.cols.length, prefix = o.prefix || 'w:', i, j;
    var x0 = o.x0 || 40, y0 = o.y0 || 28, cw = o.cw, ch = o.ch, rw = o.right ? 40 : 10;
    var w = Math.max(x0 + C * cw + rw, o.minWidth || 200), h = y0 + R * ch + 6;
    var colText = o.colText || function (s) { return s; };
    for (i = 0; i < R; i++) for (j = 0; j < C; j++) t.exact(prefix + i + ':' + j, o.W[i][j]);
    if (R * C <= HEATMAP_SVG_CELLS) {
      var b = '';
      for (i = 0; i < R; i++) {
        for (j = 0; j < C; j++) {
          var v = o.W[i][j];
          b += '<rect x="' + (x0 + j * cw) + '" y="' + (y0 + i * ch) + '" width="' + (cw - 1) + '" height="' + (ch - 1) + '" fill="' + T.color(v) + '">'
            + '<title>' + esc(o.rows[i]) + ' ← ' + esc(o.cols[j]) + ': ' + v.toFixed(3) + '</title></rect>';
        }
        b += T.text(x0 - 4, y0 + i * ch + ch - 4, o.rows[i], { 'text-anchor': 'end', 'font-size': 10 });
        if (o.right) b += T.text(x0 + C * cw + 4, y0 + i * ch + ch - 4, o.right[i], { 'font-size': 10 });
      }
      for (j = 0; j < C; j++) b += T.text(x0 + j * cw + cw / 2, y0 - 6, colText(o.cols[j]), { 'text-anchor': 'middle', 'font-size': 10 });
      if (o.caption) b += T.text(0, 11, o.caption, { 'font-size': 10 });
      t.plot.innerHTML = T.svg(w, h, b, o.label);
      return;
    }
    var dpr = Math.min(2, window.devicePixelRatio || 1), cv = document.createElement('canvas');
    cv.width = Math.ceil(w * dpr); cv.height = Math.ceil(h * dpr);
    cv.style.width = w + 'px'; cv.style.height = h + 'px'; cv.style.minWidth = w + 'px';
    cv.className = 'twin-canvas'; cv.setAttribute('role', 'img'); cv.setAttribute('aria-label', o.label || '');
    var g = cv.getContext('2d');
    g.scale(dpr, dpr);
    g.fillStyle = '#fff'; g.fillRect(0, 0, w, h); // a light panel in both themes
    for (i = 0; i < R; i++) for (j = 0; j < C; j++) {
      g.fillStyle = T.color(o.W[i][j]);
      g.fillRect(x0 + j * cw, y0 + i * ch, cw - 1, ch - 1);
    }
    g.fillStyle = '#111'; g.font = '10px sans-serif'; g.textBaseline = 'alphabetic';
    g.textAlign = 'end';
    for (i = 0; i < R; i++) g.fillText(o.rows[i], x0 - 4, y0 + i * ch + ch - 4);
    g.textAlign = 'start';
    if (o.right) for (i = 0; i < R; i++) g.fillText(o.right[i], x0 + C * cw + 4, y0 + i * ch + ch - 4);
    g.textAlign = 'center';
    for (j = 0; j < C; j++) g.fillText(colText(o.cols[j]), x0 + j * cw + cw / 2, y0 - 6);
    g.textAlign = 'start';
    if (o.caption) g.fillText(o.caption, 0, 11);
    t.plot.innerHTML = '';
    t.plot.appendChild(cv);
  };

  // -------------------------------------------------------------- mounting
  T.define = function (name, setup) { T.kinds[name] = setup; };
  // The readouts said in the twin's one live region: the ones below the plot, not a
  // slider's own value (the slider says it), not timings.
  function summaryOf(root) {
    var parts = [], els = root.querySelectorAll('.twin-readouts [data-readout]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      if (el.dataset.readout === 'time' || el.getAttribute('data-announce') === 'false') continue;
      var name = el.getAttribute('aria-label') || '';
      parts.push((name ? name + ': ' : '') + el.textContent);
    }
    // A twin whose numbers sit in a table of its plot (no readout line): the plot's
    // name, which carries its data, is what is said.
    if (!parts.length) {
      var img = root.querySelector('.twin-plot [role=img][aria-label]');
      if (img) parts.push(img.getAttribute('aria-label'));
    }
    return parts.join('; ');
  }
  // The payload: inline, or (data-src, the website) fetched once the twin nears the
  // viewport. Calls back with the parsed JSON.
  function withPayload(id, root, go) {
    var el = root.querySelector('script.twin-data');
    if (!el) return go({});
    var src = el.getAttribute('data-src');
    if (!src) return go(JSON.parse(el.textContent));
    var started = false, io = null;
    var fetchIt = function () {
      if (started) return; started = true;
      if (io) io.disconnect();
      root.setAttribute('aria-busy', 'true');
      fetch(src).then(function (r) {
        if (!r.ok) throw new Error('HTTP ' + r.status + ' for ' + src);
        return r.json();
      }).then(function (data) { root.removeAttribute('aria-busy'); go(data); })
        .catch(function (err) { root.setAttribute('data-twin-error', 'could not load ' + src + ': ' + err); });
    };
    T.lazy[id] = fetchIt;
    var ph = root.querySelector('.twin-plot');
    if (ph && !ph.textContent) ph.innerHTML = '<p class="twin-note">Loading the trained model…</p>';
    if (window.IntersectionObserver) {
      io = new IntersectionObserver(function (es) {
        for (var i = 0; i < es.length; i++) if (es[i].isIntersecting) fetchIt();
      }, { rootMargin: LAZY_MARGIN });
      io.observe(root);
    } else fetchIt();
  }
  // Fetch a lazy twin's payload now (the browser check; a reader never needs it).
  T.load = function (id) { if (T.lazy[id]) T.lazy[id](); };
  // Run a twin's pending update now.
  T.flush = function (id) { var f = T.pending[id]; if (f) f(); };
  T.mount = function (id, tries) {
    var root = document.getElementById(id);
    if (!root) { // a notebook may run the script before attaching the output: wait 10 s
      if ((tries || 0) < 200) setTimeout(function () { T.mount(id, (tries || 0) + 1); }, 50);
      return;
    }
    if (root.dataset.twinReady || root.dataset.twinMounting) return;
    root.dataset.twinMounting = '1';
    withPayload(id, root, function (data) { start(id, root, data); });
  };
  function start(id, root, data) {
    var t0 = performance.now();
    var kind = T.kinds[root.dataset.twin];
    T.data[id] = data;
    var exact = T.exact[id] = {};
    var t = {
      root: root,
      data: data,
      plot: root.querySelector('.twin-plot'),
      control: function (name) { return root.querySelector('[name="' + name + '"]'); },
      value: function (name) {
        var c = t.control(name);
        if (c.type === 'checkbox') return c.checked;
        if (c.type === 'range' || c.type === 'number') return +c.value;
        return c.value;
      },
      readout: function (name, value, text) {
        var els = root.querySelectorAll('[data-readout="' + name + '"]');
        for (var i = 0; i < els.length; i++) {
          els[i].textContent = text === undefined ? T.fmt(value) : text;
          els[i].setAttribute('data-value', typeof value === 'number' ? String(value) : value);
        }
      },
      exact: function (name, value) { exact[name] = typeof value === 'number' ? String(value) : value; },
      heatmap: function (o) { T.heatmapInto(t, o); },
    };
    for (var k in T) if (typeof T[k] === 'function' && !(k in t)) t[k] = T[k];
    // Readouts: named by their label (pages built before the runtime named them), and
    // silent: the summary below speaks for them.
    var outs = root.querySelectorAll('.twin-readouts [data-readout]');
    for (var i = 0; i < outs.length; i++) {
      var o = outs[i];
      o.setAttribute('aria-live', 'off');
      if (!o.getAttribute('aria-label') && o.parentNode && o.parentNode.firstChild && o.parentNode.firstChild.nodeType === 3)
        o.setAttribute('aria-label', o.parentNode.firstChild.textContent.trim());
    }
    var ranges = root.querySelectorAll('input[type=range]');
    for (i = 0; i < ranges.length; i++) {
      var ro = root.querySelector('output[for="' + ranges[i].id + '"]');
      if (ro) { ro.setAttribute('aria-live', 'off'); ro.setAttribute('aria-hidden', 'true'); }
    }
    var status = root.querySelector('.twin-status');
    if (!status) {
      status = document.createElement('div');
      status.className = 'twin-status';
      status.setAttribute('role', 'status');
      status.setAttribute('aria-atomic', 'true');
      status.style.cssText = 'position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;margin:-1px';
      root.appendChild(status);
    }
    var update = kind(t);
    var announceTimer = null, frame = null, timer = null;
    var run = function () {
      if (frame !== null) { (window.cancelAnimationFrame || clearTimeout)(frame); frame = null; }
      if (timer !== null) { clearTimeout(timer); timer = null; }
      delete T.pending[id];
      for (var i = 0; i < ranges.length; i++) t.readout(ranges[i].name, +ranges[i].value, String(+ranges[i].value));
      try { update(); root.removeAttribute('data-twin-error'); }
      catch (err) { root.setAttribute('data-twin-error', String(err)); throw err; }
      // A slider whose shown value is not its raw value says what is shown.
      for (i = 0; i < ranges.length; i++) {
        var r = ranges[i], shown = root.querySelector('output[for="' + r.id + '"]');
        var text = shown ? shown.textContent.trim() : '';
        if (text && text !== String(+r.value)) r.setAttribute('aria-valuetext', text);
        else r.removeAttribute('aria-valuetext');
      }
    };
    var announce = function () {
      if (announceTimer !== null) clearTimeout(announceTimer);
      announceTimer = setTimeout(function () { announceTimer = null; status.textContent = summaryOf(root); }, ANNOUNCE_MS);
    };
    var schedule = function (e) {
      T.pending[id] = run;
      var typing = e && e.target && e.target.type === 'text';
      if (typing) {
        if (frame !== null) { (window.cancelAnimationFrame || clearTimeout)(frame); frame = null; }
        if (timer !== null) clearTimeout(timer);
        timer = setTimeout(run, DEBOUNCE_MS);
      } else if (frame === null && timer === null) {
        frame = (window.requestAnimationFrame || setTimeout)(run);
      }
      announce();
    };
    root.addEventListener('input', schedule);
    root.addEventListener('change', schedule);
    // Keys that move a control stay with it: JupyterLab would take the arrows for
    // cell navigation (the controls also carry data-lm-suppress-shortcuts).
    root.addEventListener('keydown', function (e) {
      if (/^(Arrow|Page|Home$|End$)/.test(e.key) && e.target && e.target.matches && e.target.matches('input, select')) e.stopPropagation();
    });
    run();
    root.dataset.twinReady = '1';
    delete root.dataset.twinMounting;
    T.timings[id] = performance.now() - t0;
  }
  window.attnlabTwin = T;
})();
