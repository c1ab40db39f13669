/* Chapter 3 mapping lab: one set of scores, scaled (log slider), mapped to weights. */
attnlabTwin.define('mapping_lab', function (t) {
  var z0 = t.data.scores, n = z0.length;
  var maps = { softmax: t.softmax, sparsemax: t.sparsemax, entmax15: t.entmax15 };
  return function () {
    var scale = Math.pow(10, t.value('logscale')), name = t.value('mapping');
    var z = z0.map(function (v) { return scale * v; }), p = maps[name](z);
    t.readout('logscale', scale, '×' + (scale < 1 ? scale.toFixed(2) : scale.toPrecision(3)));
    var W = 70 * n + 50, H = 210, base = 165, top = 22, body = '';
    body += t.el('line', { x1: 40, x2: W - 5, y1: base, y2: base, stroke: 'currentColor', 'stroke-opacity': 0.4 });
    body += t.text(36, top + 4, '1', { 'text-anchor': 'end', 'font-size': 10 });
    body += t.el('line', { x1: 40, x2: W - 5, y1: top, y2: top, stroke: 'currentColor', 'stroke-opacity': 0.15, 'stroke-dasharray': '3 3' });
    p.forEach(function (v, j) {
      var x = 50 + 70 * j, h = (base - top) * v;
      body += t.el('rect', { x: x, y: base - h, width: 46, height: Math.max(h, 0), fill: v > 0 ? 'var(--tw-a1)' : 'none' });
      body += t.el('text', { x: x + 23, y: base - h - 5, 'text-anchor': 'middle', 'font-size': 11, fill: 'currentColor', 'data-readout': 'p:' + j }, '');
      body += t.text(x + 23, base + 15, 'k' + j + (v > 0 ? '' : ' (0)'), { 'text-anchor': 'middle' });
      body += t.text(x + 23, base + 29, 's=' + t.fmt(z[j], 2), { 'text-anchor': 'middle', 'font-size': 10, 'fill-opacity': 0.7 });
    });
    // The plot's name carries its data: which key takes what.
    var spoken = { softmax: 'softmax', sparsemax: 'sparsemax', entmax15: '1.5-entmax' }[name] || name;
    var label = spoken + ' weights of the scores scaled by ' + t.fmt(scale, 3) + ': '
      + p.map(function (v, j) { return 'k' + j + ' ' + t.fmt(v, 2); }).join(', ');
    t.plot.innerHTML = t.svg(W, H + 5, body, label);
    p.forEach(function (v, j) { t.readout('p:' + j, v, t.fmt(v, 3)); });
    t.readout('support', t.support(p), t.support(p) + ' of ' + n);
    t.readout('entropy', t.entropy(p), t.fmt(t.entropy(p), 3) + ' nats');
    t.readout('max', t.max(p), t.fmt(t.max(p), 4));
    t.readout('total', t.sum(p), t.fmt(t.sum(p), 6));
    // The Jacobian dp/ds = diag(u) - u u^T / sum(u) (Martins & Astudillo 2016; Peters et
    // al. 2019): u = p for softmax, the support's indicator for sparsemax, sqrt(p) for
    // 1.5-entmax. Its Frobenius norm, computed entry by entry.
    var u = p.map(function (v) { return name === 'softmax' ? v : name === 'sparsemax' ? (v > 0 ? 1 : 0) : Math.sqrt(v); });
    var su = t.sum(u), jf = 0;
    for (var a = 0; a < n; a++) for (var b = 0; b < n; b++) {
      var e = (a === b ? u[a] : 0) - (su > 0 ? u[a] * u[b] / su : 0);
      jf += e * e;
    }
    jf = Math.sqrt(jf);
    t.readout('jac', jf, jf < 1e-4 ? jf.toExponential(1) : t.fmt(jf, 4));
  };
});
