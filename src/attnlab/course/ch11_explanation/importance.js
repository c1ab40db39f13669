/* Chapter 11: one example's tokens under several importance measures (precomputed by
 * the trained model), the true rationale boxed; the k top-ranked tokens of each measure
 * are marked and counted. Ties are broken by position, earlier first. */
attnlabTwin.define('importance', function (t) {
  var ex = t.data.examples, names = t.data.measures;
  function topk(s, k) {
    var idx = s.map(function (_, i) { return i; });
    idx.sort(function (a, b) { return s[b] - s[a] || a - b; });
    return idx.slice(0, Math.min(k, s.length));
  }
  return function () {
    var e = ex[+t.value('example')], k = t.value('k'), n = e.tokens.length;
    var cw = Math.max(18, Math.min(46, 640 / n)), ch = 24, x0 = 78, y0 = 8, b = '';
    names.forEach(function (m, r) {
      var s = e.scores[m], mx = Math.max.apply(null, s) || 1, top = topk(s, k), hits = 0;
      s.forEach(function (v, j) {
        b += t.el('rect', { x: x0 + j * cw, y: y0 + r * ch, width: cw - 1, height: ch - 2, fill: t.color(v / mx) });
      });
      top.forEach(function (j) {
        hits += e.rationale[j];
        b += t.el('circle', { cx: x0 + j * cw + cw / 2, cy: y0 + r * ch + ch / 2 - 1, r: 4, fill: t.inkOn(s[j] / mx) });
      });
      b += t.text(x0 - 6, y0 + r * ch + ch / 2 + 3, m, { 'text-anchor': 'end', 'font-size': 11 });
      t.readout('hits_' + m, hits, hits + ' of ' + top.length);
      t.readout('top_' + m, e.tokens[top[0]], e.tokens[top[0]]);
    });
    var yb = y0 + names.length * ch;
    e.tokens.forEach(function (w, j) {
      var x = x0 + j * cw + cw / 2, y = yb + 6;
      if (e.rationale[j]) b += t.el('rect', { x: x0 + j * cw, y: y0 - 2, width: cw - 1, height: names.length * ch + 2, fill: 'none', stroke: 'var(--tw-a5)', 'stroke-width': 2 });
      b += '<text x="' + x + '" y="' + y + '" font-size="10" text-anchor="end" transform="rotate(-60 ' + x + ' ' + y + ')" fill="' + (e.rationale[j] ? 'var(--tw-a5)' : 'var(--tw-fg)') + '">' + t.esc(w) + '</text>';
    });
    t.plot.innerHTML = t.svg(x0 + n * cw + 10, yb + 70, b, 'importance of each token under each measure');
    t.readout('label', e.label, e.label);
  };
});
