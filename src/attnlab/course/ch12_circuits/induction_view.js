/* A trained attention-only model's heads over a repeated sequence (maps precomputed
 * in Python; the model does not run here). Pick a head and a query: the heatmap shows
 * the head's (T, T) weights, the induction pattern's cells outlined in red. */
attnlabTwin.define('induction_view', function (t) {
  var seqs = t.data.sequences;
  return function () {
    var s = seqs[+t.value('sequence')], ids = s.ids, Tn = ids.length;
    var lh = t.value('head').split('.'), W = s.weights[+lh[0]][+lh[1]];  // per mille
    var slider = t.control('query');
    slider.max = String(Tn - 1);
    var q = Math.min(t.value('query'), Tn - 1);
    if (+slider.value !== q) slider.value = String(q);
    // induction pattern: key j + 1 for each earlier j < i with ids[j] == ids[i]
    var pat = function (i) {
      var keys = [];
      for (var j = 0; j < i; j++) if (ids[j] === ids[i] && j + 1 <= i) keys.push(j + 1);
      return keys;
    };
    var c = 12, x0 = 34, y0 = 34, b = '', hit = 0, total = 0;
    for (var i = 0; i < Tn; i++) {
      var keys = pat(i);
      for (var j = 0; j <= i; j++) {
        var w = W[i][j] / 1000;
        total += w;
        b += t.el('rect', { x: x0 + j * c, y: y0 + i * c, width: c, height: c, fill: t.color(w) });
      }
      keys.forEach(function (k) {
        hit += W[i][k] / 1000;
        b += t.el('rect', { x: x0 + k * c + 0.75, y: y0 + i * c + 0.75, width: c - 1.5, height: c - 1.5, fill: 'none', stroke: 'crimson', 'stroke-width': 1.5 });
      });
    }
    b += t.el('rect', { x: x0 - 1, y: y0 + q * c, width: Tn * c + 2, height: c, fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5 });
    ids.forEach(function (v, i) {
      var label = i === 0 ? 'B' : String(v);
      b += t.text(x0 - 4, y0 + i * c + 9, label, { 'text-anchor': 'end', 'font-size': 9 });
      b += t.text(x0 + i * c + 6, y0 - 4, label, { 'text-anchor': 'middle', 'font-size': 9 });
    });
    t.plot.innerHTML = t.svg(x0 + Tn * c + 8, y0 + Tn * c + 8, b, 'attention of layer ' + lh[0] + ', head ' + lh[1] + ' on a repeated sequence');
    var row = W[q].map(function (v) { return v / 1000; }), f = t.argmax(row);
    t.readout('query', q, ids[q] + ' @ ' + q);
    t.readout('focus', ids[f] + ' @ ' + f);
    t.readout('focus_weight', row[f], t.fmt(row[f], 3));
    var keys = pat(q), tw = 0;
    keys.forEach(function (k) { tw += row[k]; });
    t.readout('target', keys.length ? keys.map(function (k) { return ids[k] + ' @ ' + k; }).join(', ') : 'none');
    t.readout('target_weight', tw, t.fmt(tw, 3));
    var score = hit / total;
    t.readout('score', score, t.fmt(score, 3));
  };
});
