/* Chapter 2: one 2-D query against four fixed keys, scored by five scorers. */
attnlabTwin.define('query_vs_keys', function (t) {
  var d = t.data, K = d.keys, names = d.scorers, S = K.length;
  function dot(a, b) { return a[0] * b[0] + a[1] * b[1]; }
  function matvec(M, x) { return M.map(function (row) { return row[0] * x[0] + row[1] * x[1]; }); }
  var score = {
    'dot': function (q, k) { return dot(q, k); },
    'scaled dot': function (q, k) { return dot(q, k) / Math.sqrt(2); },
    'bilinear': function (q, k) { return dot(matvec(d.bilinear_W, q), k); },       // (W q) . k
    'additive': function (q, k) {                                                  // v . tanh(W2 q + W1 k)
      var a = matvec(d.additive_W2, q), b = matvec(d.additive_W1, k), s = 0;
      for (var h = 0; h < a.length; h++) s += d.additive_v[h] * Math.tanh(a[h] + b[h]);
      return s;
    },
    'mlp': function (q, k) {                                                       // w . relu(Wq q + Wk k + b) + c
      var a = matvec(d.mlp_Wq, q), b = matvec(d.mlp_Wk, k), s = d.mlp_c;
      for (var h = 0; h < a.length; h++) s += d.mlp_w[h] * Math.max(a[h] + b[h] + d.mlp_b[h], 0);
      return s;
    },
  };
  var colors = ['var(--tw-a1)', 'var(--tw-a2)', 'var(--tw-a3)', 'var(--tw-a4)', 'var(--tw-a5)'];
  return function () {
    var ang = t.value('angle') * Math.PI / 180, len = t.value('length');
    var q = [len * Math.cos(ang), len * Math.sin(ang)];
    t.readout('angle', t.value('angle'), t.value('angle') + '°');
    t.readout('length', len, len.toFixed(1));
    // Left: the plane with the keys and the query.
    var R = 95, cx = 110, cy = 110, lim = Math.max(2.4, 1.15 * len), sc = R / lim, b = '';
    b += t.el('line', { x1: cx - R, x2: cx + R, y1: cy, y2: cy, stroke: 'currentColor', 'stroke-opacity': 0.25 });
    b += t.el('line', { x1: cx, x2: cx, y1: cy - R, y2: cy + R, stroke: 'currentColor', 'stroke-opacity': 0.25 });
    K.forEach(function (k, j) {
      b += t.el('line', { x1: cx, y1: cy, x2: cx + sc * k[0], y2: cy - sc * k[1], stroke: 'currentColor', 'stroke-opacity': 0.6, 'stroke-width': 1.5 });
      b += t.text(cx + sc * k[0] * 1.12, cy - sc * k[1] * 1.12 + 4, 'k' + j, { 'text-anchor': 'middle' });
    });
    b += t.el('line', { x1: cx, y1: cy, x2: cx + sc * q[0], y2: cy - sc * q[1], stroke: 'var(--tw-a5)', 'stroke-width': 3 });
    b += t.el('circle', { cx: cx + sc * q[0], cy: cy - sc * q[1], r: 4, fill: 'var(--tw-a5)' });
    b += t.text(cx + sc * q[0] + 6, cy - sc * q[1] - 6, 'q', { fill: 'var(--tw-a5)', 'font-weight': 'bold' });
    // Right: the softmax weights, grouped by key, one bar per scorer.
    var x0 = 250, bw = 13, gw = bw * names.length + 16, base = 190, top = 20, body = '';
    var rows = '';
    names.forEach(function (name, i) {
      var s = K.map(function (k) { return score[name](q, k); }), w = t.softmax(s);
      w.forEach(function (v, j) {
        var h = (base - top) * v;
        body += t.el('rect', { x: x0 + j * gw + i * bw, y: base - h, width: bw - 2, height: h, fill: colors[i] });
      });
      rows += '<tr><th scope="row" style="text-align:left;color:' + colors[i] + '">' + t.esc(name) + '</th>'
        + s.map(function (v, j) { return '<td><span data-readout="score:' + name + ':' + j + '"></span></td>'; }).join('')
        + w.map(function (v, j) { return '<td><span data-readout="weight:' + name + ':' + j + '"></span></td>'; }).join('')
        + '<td data-readout="winner:' + name + '"></td></tr>';
      score[name]._last = [s, w];
    });
    K.forEach(function (k, j) { body += t.text(x0 + j * gw + gw / 2 - 8, base + 14, 'k' + j, { 'text-anchor': 'middle' }); });
    body += t.el('line', { x1: x0 - 4, x2: x0 + S * gw, y1: base, y2: base, stroke: 'currentColor', 'stroke-opacity': 0.4 });
    body += t.text(x0 - 6, top + 4, '1', { 'text-anchor': 'end', 'font-size': 10 });
    body += t.text(x0, 12, 'softmax weights per key (one bar per scorer)', { 'font-size': 10 });
    var head = '<tr><th></th>' + K.map(function (k, j) { return '<th>score k' + j + '</th>'; }).join('')
      + K.map(function (k, j) { return '<th>weight k' + j + '</th>'; }).join('') + '<th>winner</th></tr>';
    // The plot's name carries its data (the twin's announcement reads it: its
    // readouts sit in the table): the query, and the key each scorer picks.
    var label = 'Query at ' + t.value('angle') + '°, length ' + len.toFixed(1) + '. Winning key: '
      + names.map(function (name) {
        var w = score[name]._last[1], j = t.argmax(w);
        return name + ' k' + j + ' (' + t.fmt(w[j], 2) + ')';
      }).join(', ');
    t.plot.innerHTML = t.svg(x0 + S * gw + 10, 215, b + body, label) + '<table>' + head + rows + '</table>';
    names.forEach(function (name) {
      var sw = score[name]._last;
      sw[0].forEach(function (v, j) { t.readout('score:' + name + ':' + j, v, t.fmt(v, 3)); });
      sw[1].forEach(function (v, j) { t.readout('weight:' + name + ':' + j, v, t.fmt(v, 3)); });
      var win = t.argmax(sw[1]);
      t.readout('winner:' + name, win, 'k' + win);
    });
  };
});
