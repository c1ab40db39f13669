/* Chapter 4 alignment lab: one target word's scores over the source, mapped six ways. */
attnlabTwin.define('alignment_lab', function (t) {
  var d = t.data, words = d.source, n = words.length;
  // prox of lam * TV (1-D total variation) by FISTA on its dual, then sparsemax: fusedmax.
  function proxTV(x, lam) {
    var m = x.length; if (m < 2 || lam <= 0) return x.slice();
    var u = new Float64Array(m - 1), y = new Float64Array(m - 1), prev = new Float64Array(m - 1), tk = 1;
    var p = new Float64Array(m);
    function primal(v) { // p = x - D^T v
      for (var j = 0; j < m; j++) p[j] = x[j] - ((j > 0 ? v[j - 1] : 0) - (j < m - 1 ? v[j] : 0));
    }
    for (var it = 0; it < 20000; it++) {
      primal(y);
      var change = 0;
      for (var j = 0; j < m - 1; j++) {
        prev[j] = u[j];
        u[j] = Math.min(lam, Math.max(-lam, y[j] + 0.25 * (p[j + 1] - p[j])));
        change = Math.max(change, Math.abs(u[j] - prev[j]));
      }
      var tn = (1 + Math.sqrt(1 + 4 * tk * tk)) / 2;
      for (j = 0; j < m - 1; j++) y[j] = u[j] + ((tk - 1) / tn) * (u[j] - prev[j]);
      tk = tn;
      if (change < 1e-14) break;
    }
    primal(u);
    return Array.prototype.slice.call(p);
  }
  function crf(x, strength) { // exact marginals and the labellings' probabilities
    var K = 1 << x.length, logp = new Float64Array(K), a = strength / 2, mx = -Infinity;
    for (var k = 0; k < K; k++) {
      var s = 0, prevz = -1;
      for (var i = 0; i < x.length; i++) {
        var z = (k >> (x.length - 1 - i)) & 1;
        if (z) s += x[i];
        if (prevz >= 0) s += prevz === z ? a : -a;
        prevz = z;
      }
      logp[k] = s; if (s > mx) mx = s;
    }
    var tot = 0, prob = new Float64Array(K);
    for (k = 0; k < K; k++) { prob[k] = Math.exp(logp[k] - mx); tot += prob[k]; }
    var marg = x.map(function () { return 0; });
    for (k = 0; k < K; k++) {
      prob[k] /= tot;
      for (i = 0; i < x.length; i++) if ((k >> (x.length - 1 - i)) & 1) marg[i] += prob[k];
    }
    return { marg: marg, prob: prob };
  }
  return function () {
    var target = t.value('target'), mapping = t.value('mapping');
    var temp = Math.pow(10, t.value('logtemp')), strength = t.value('strength'), lam = t.value('lam');
    var u = t.uniforms(t.value('seed'), n + 1);
    var x = d.scores[target].map(function (v) { return v / temp; }), w, sample, soft = null, configs = null;
    if (mapping === 'softmax') w = t.softmax(x);
    else if (mapping === 'sparsemax') w = t.sparsemax(x);
    else if (mapping === 'entmax15') w = t.entmax15(x);
    else if (mapping === 'fusedmax') w = t.sparsemax(proxTV(x, lam));
    else if (mapping === 'CRF marginals') { configs = crf(x, strength); w = configs.marg; }
    else { // hard sample: Gumbel-max, argmax(x + g) ~ softmax(x)
      var g = x.map(function (v, j) { var uj = Math.min(Math.max(u[j], 1e-12), 1 - 1e-12); return v - Math.log(-Math.log(uj)); });
      var jmax = t.argmax(g); w = x.map(function (v, j) { return j === jmax ? 1 : 0; });
      soft = t.softmax(x);
    }
    if (mapping === 'hard sample') sample = [t.argmax(w)];
    else if (configs) {
      var c = 0, k = 0;
      for (k = 0; k < configs.prob.length - 1; k++) { c += configs.prob[k]; if (c > u[n]) break; }
      sample = []; for (var i = 0; i < n; i++) if ((k >> (n - 1 - i)) & 1) sample.push(i);
    } else {
      var total = t.sum(w), cs = 0, j = 0;
      for (j = 0; j < n - 1; j++) { cs += w[j]; if (cs > u[n] * total) break; }
      sample = [j];
    }
    t.readout('logtemp', temp, '×' + (temp < 1 ? temp.toFixed(3) : temp.toPrecision(3)));
    // The plot: one bar per source word, the sampled alignment marked above.
    var W = 62 * n + 50, base = 175, top = 40, body = '';
    body += t.el('line', { x1: 40, x2: W - 5, y1: base, y2: base, stroke: 'currentColor', 'stroke-opacity': 0.4 });
    body += t.text(36, top + 4, '1', { 'text-anchor': 'end', 'font-size': 11 });
    body += t.el('line', { x1: 40, x2: W - 5, y1: top, y2: top, stroke: 'currentColor', 'stroke-opacity': 0.15, 'stroke-dasharray': '3 3' });
    w.forEach(function (v, j) {
      var xx = 50 + 62 * j, h = (base - top) * v;
      body += t.el('rect', { x: xx, y: base - h, width: 42, height: Math.max(h, 0), fill: v > 0 ? 'var(--tw-a1)' : 'none', stroke: v > 0 ? 'none' : 'currentColor', 'stroke-opacity': 0.3 });
      if (soft) body += t.el('rect', { x: xx, y: base - (base - top) * soft[j], width: 42, height: (base - top) * soft[j], fill: 'none', stroke: 'currentColor', 'stroke-dasharray': '4 3' });
      body += t.el('text', { x: xx + 21, y: base - h - 6, 'text-anchor': 'middle', 'font-size': 11, fill: 'currentColor', 'data-readout': 'p:' + j }, '');
      body += t.text(xx + 21, base + 16, words[j], { 'text-anchor': 'middle', 'font-size': 12 });
      if (sample.indexOf(j) >= 0) body += t.text(xx + 21, 20, '▼', { 'text-anchor': 'middle', 'font-size': 14, fill: 'var(--tw-a5)' });
    });
    var picked = sample.map(function (j) { return words[j]; }).join(' ') || '(nothing)';
    t.plot.innerHTML = t.svg(W, base + 26, body, "'" + target + "' with " + mapping + ': weights ' + w.map(function (v, j) { return words[j] + ' ' + t.fmt(v, 2); }).join(', ') + '; sampled ' + picked);
    w.forEach(function (v, j) { t.readout('p:' + j, v, t.fmt(v, 2)); });
    t.readout('support', t.support(w), t.support(w) + ' of ' + n);
    t.readout('total', t.sum(w), t.fmt(t.sum(w), 3));
    t.readout('sample', picked, picked);
  };
});
