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
 * with data-readout=name), t.plot (an empty <div> to draw in), and the helpers below.
 */
(function () {
  if (window.attnlabTwin) return;
  var T = { kinds: {}, timings: {} };

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
  T.inkOn = function (v) { return v > 0.6 ? '#111' : '#fff'; };
  T.fmt = function (v, d) {
    if (typeof v !== 'number') return String(v);
    if (isNaN(v)) return 'NaN';
    if (!isFinite(v)) return v > 0 ? '∞' : '−∞';
    var s = v.toFixed(d === undefined ? 3 : d);
    return s.charAt(0) === '-' ? '−' + s.slice(1) : s;
  };
  T.num = function (s) { return parseFloat(String(s).replace('−', '-').replace('∞', 'Infinity')); };

  // -------------------------------------------------------------- mounting
  T.define = function (name, setup) { T.kinds[name] = setup; };
  T.mount = function (id, tries) {
    var root = document.getElementById(id);
    if (!root) { // a notebook may run the script before attaching the output: wait 10 s
      if ((tries || 0) < 200) setTimeout(function () { T.mount(id, (tries || 0) + 1); }, 50);
      return;
    }
    if (root.dataset.twinReady) return;
    var t0 = performance.now();
    var kind = T.kinds[root.dataset.twin];
    var payload = root.querySelector('script.twin-data');
    var t = {
      root: root,
      data: payload ? JSON.parse(payload.textContent) : {},
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
    };
    for (var k in T) if (typeof T[k] === 'function' && !(k in t)) t[k] = T[k];
    var update = kind(t);
    var ranges = root.querySelectorAll('input[type=range]');
    var run = function () {
      for (var i = 0; i < ranges.length; i++) t.readout(ranges[i].name, +ranges[i].value, String(+ranges[i].value));
      try { update(); root.removeAttribute('data-twin-error'); }
      catch (err) { root.setAttribute('data-twin-error', String(err)); throw err; }
    };
    root.addEventListener('input', run);
    root.addEventListener('change', run);
    // Keys that move a control stay with it: JupyterLab would take the arrows for
    // cell navigation (the controls also carry data-lm-suppress-shortcuts).
    root.addEventListener('keydown', function (e) {
      if (/^(Arrow|Page|Home$|End$)/.test(e.key) && e.target && e.target.matches && e.target.matches('input, select')) e.stopPropagation();
    });
    run();
    root.dataset.twinReady = '1';
    T.timings[id] = performance.now() - t0;
  };
  window.attnlabTwin = T;
})();
