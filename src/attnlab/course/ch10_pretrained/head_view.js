/* Precomputed attention maps of MiniLM (it does not run in the browser): pick a
 * sentence, a layer, a head and a query; lines go from each query (left) to the keys
 * (right), thicker where the weight is larger, the chosen query's lines in colour. */
attnlabTwin.define('head_view', function (t) {
  var ex = t.data.sentences;
  return function () {
    var e = ex[+t.value('sentence')], tok = e.tokens, Tn = tok.length;
    var W = e.weights[t.value('layer')][t.value('head')];  // (T, T), per mille
    var slider = t.control('query');
    slider.max = String(Tn - 1);
    var q = Math.min(t.value('query'), Tn - 1);
    if (+slider.value !== q) slider.value = String(q);
    var row = W[q].map(function (v) { return v / 1000; }), f = t.argmax(row);
    var xl = 110, xr = 290, y0 = 18, dy = 19, b = '';
    W.forEach(function (r, i) {
      r.forEach(function (v, j) {
        var w = v / 1000;
        if (w < 0.02) return;
        var on = i === q;
        b += t.el('line', { x1: xl, y1: y0 + i * dy, x2: xr, y2: y0 + j * dy,
          stroke: on ? 'var(--tw-a1)' : 'var(--tw-a2)', 'stroke-width': 0.5 + 5 * w,
          'stroke-opacity': on ? 0.3 + 0.7 * w : 0.5 * w, 'stroke-linecap': 'round' });
      });
    });
    tok.forEach(function (s, i) {
      b += t.text(xl - 6, y0 + i * dy + 4, s, { 'text-anchor': 'end', 'font-weight': i === q ? 'bold' : 'normal' });
      b += t.text(xr + 6, y0 + i * dy + 4, s, { 'font-weight': i === f ? 'bold' : 'normal' });
    });
    t.plot.innerHTML = t.svg(420, y0 + Tn * dy, b, 'head view of MiniLM, layer ' + t.value('layer') + ', head ' + t.value('head'));
    t.readout('query', q, tok[q] + ' (position ' + q + ')');
    t.readout('focus', tok[f], tok[f] + ' (position ' + f + ')');
    t.readout('focus_weight', row[f], t.fmt(row[f], 3));
    var sink = row[0] + row[Tn - 1];
    t.readout('sink', sink, t.fmt(sink, 3));
  };
});
