/* Chapter 9 attention patterns: the mask of a sparse pattern and what it reaches. */
attnlabTwin.define('attention_pattern', function (t) {
  return function () {
    var pattern = t.value('pattern'), n = t.value('n'), win = t.value('window');
    var dil = t.value('dilation'), ng = t.value('n_global'), L = t.value('layers'), causal = t.value('causal');
    // As attnlab.widgets.subquadratic.pattern_mask (True = may attend).
    function may(i, j) {
      var dd = i - j, m;
      if (pattern === 'full' || pattern === 'causal') m = true;
      else if (pattern === 'window') m = Math.abs(dd) <= win;
      else if (pattern === 'dilated') m = Math.abs(dd) <= win * dil && ((dd % dil) + dil) % dil === 0;
      else m = Math.abs(dd) <= win || i < ng || j < ng;
      if (causal || pattern === 'causal') m = m && j <= i;
      return m;
    }
    var mask = [], pairs = 0;
    for (var i = 0; i < n; i++) { var row = new Uint8Array(n); for (var j = 0; j < n; j++) { row[j] = may(i, j) ? 1 : 0; pairs += row[j]; } mask.push(row); }
    // Reach of the last query: layer by layer along the allowed edges, itself included.
    var reach = new Uint8Array(n), rows = [], counts = [];
    reach[n - 1] = 1;
    for (var l = 0; l < L; l++) {
      var next = new Uint8Array(n);
      for (i = 0; i < n; i++) if (reach[i]) { next[i] = 1; for (j = 0; j < n; j++) if (mask[i][j]) next[j] = 1; }
      reach = next; rows.push(reach);
      counts.push(reach.reduce(function (a, b) { return a + b; }, 0));
    }
    // Left: the mask as runs of allowed keys per query.
    var S = 256, c = S / n, body = '';
    body += t.el('rect', { x: 30, y: 10, width: S, height: S, fill: 'none', stroke: 'currentColor', 'stroke-opacity': 0.3 });
    for (i = 0; i < n; i++) {
      for (j = 0; j < n; j++) {
        if (!mask[i][j]) continue;
        var j1 = j; while (j1 + 1 < n && mask[i][j1 + 1]) j1++;
        body += t.el('rect', { x: 30 + j * c, y: 10 + i * c, width: (j1 - j + 1) * c, height: c, fill: 'currentColor', 'fill-opacity': 0.85 });
        j = j1;
      }
    }
    body += t.text(30 + S / 2, S + 28, 'key j', { 'text-anchor': 'middle', 'font-size': 12 });
    body += t.text(20, 10 + S / 2, 'query i', { 'text-anchor': 'middle', 'font-size': 12, transform: 'rotate(-90 20 ' + (10 + S / 2) + ')' });
    // Right: one row per layer, the positions the last query depends on.
    var X = 30 + S + 70, rw = S, rh = Math.min(28, (S - 10) / L);
    rows.forEach(function (r, l) {
      body += t.text(X - 6, 10 + l * rh + rh / 2 + 4, 'layer ' + (l + 1), { 'text-anchor': 'end', 'font-size': 11 });
      for (var j = 0; j < n; j++) {
        if (!r[j]) continue;
        var j1 = j; while (j1 + 1 < n && r[j1 + 1]) j1++;
        body += t.el('rect', { x: X + j * rw / n, y: 10 + l * rh, width: (j1 - j + 1) * rw / n, height: rh - 2, fill: 'var(--tw-a2)' });
        j = j1;
      }
    });
    body += t.text(X + rw / 2, S + 28, 'position', { 'text-anchor': 'middle', 'font-size': 12 });
    t.plot.innerHTML = t.svg(X + rw + 10, S + 40, body, pattern + ' pattern, n = ' + n + ': ' + pairs + ' pairs scored; the last query reaches ' + counts[L - 1] + ' of ' + n + ' positions after ' + L + ' layers');
    t.readout('pairs', pairs, String(pairs));
    t.readout('fraction', pairs / (n * n), (100 * pairs / (n * n)).toFixed(1) + ' %');
    t.readout('rf_last', counts[L - 1], counts[L - 1] + ' of ' + n);
    t.readout('reach', counts.join(', '), counts.join(', '));
  };
});
