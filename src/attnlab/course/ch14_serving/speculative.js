/* Chapter 14 speculative-decoding twin: one round of draft-then-verify. */
attnlabTwin.define('speculative', function (t) {
  var chars = t.data.chars;
  function norm(row) {
    var s = 0, out = [];
    for (var i = 0; i < row.length; i++) s += row[i];
    for (i = 0; i < row.length; i++) out.push(row[i] / s);
    return out;
  }
  // attnlab.speculative.verify_with_uniforms for one draft: u[0..k-1] accept, u[k] samples
  function verify(P, Q, x, u, k) {
    var j = 0;
    while (j < k) {
      var px = P[j][x[j]], qx = Q[j][x[j]];
      if (u[j] * qx < px || (px >= qx && px > 0)) j++; else break;
    }
    var V = P[j].length, res = [], mass = 0;
    for (var i = 0; i < V; i++) {
      var r = j < k ? Math.max(0, P[j][i] - Q[j][i]) : P[j][i];
      res.push(r); mass += r;
    }
    if (!(mass > 0)) res = P[j].slice();
    var cum = 0, cums = [];
    for (i = 0; i < V; i++) { cum += res[i]; cums.push(cum); }
    var target = u[k] * cums[V - 1], y = V;
    for (i = 0; i < V; i++) if (cums[i] > target) { y = i; break; }
    var last = 0;
    for (i = 0; i < V; i++) if (res[i] > 0) last = i;
    if (y > last) y = last;
    return { j: j, y: y };
  }
  return function () {
    var k = t.value('k'), seed = t.value('seed'), pi = t.value('prompt');
    var r = t.data.rounds[pi + '/' + t.value('temperature')];
    var P = [], Q = [], x = r.x.slice(0, k);
    for (var i = 0; i <= k; i++) P.push(norm(r.p[i]));
    for (i = 0; i < k; i++) Q.push(norm(r.q[i]));
    var u = t.uniforms(seed, k + 1), out = verify(P, Q, x, u, k), j = out.j;
    var emitted = x.slice(0, j).concat([out.y]);
    var text = emitted.map(function (c) { return chars[c]; }).join('');
    var alpha = 0, expected = 1, prod = 1;
    for (i = 0; i < k; i++) {
      var b = 0;
      for (var v = 0; v < P[i].length; v++) b += Math.min(P[i][v], Q[i][v]);
      alpha += b;
      var px = P[i][x[i]], qx = Q[i][x[i]];
      var a = qx > 0 ? Math.min(1, px / qx) : (px > 0 ? 1 : 0);
      prod *= a; expected += prod;
    }
    alpha /= k;
    var formula = alpha >= 1 ? k + 1 : (1 - Math.pow(alpha, k + 1)) / (1 - alpha);
    // drawing: the context's end, then one box per draft token and the target's token
    var W = 560, box = 30, gap = 6, L = 10, top = 34, barH = 60, Hh = top + box + barH + 40;
    var body = t.text(L, 16, '…' + t.data.contexts[+pi].replace(/\|/g, ' '), { 'font-size': 12, 'font-family': 'monospace' });
    for (i = 0; i <= k; i++) {
      var X = L + i * (box + gap), tok, fill, label;
      if (i < k) {
        tok = x[i];
        fill = i < j ? 'var(--tw-a3)' : (i === j ? 'var(--tw-a5)' : 'none');
        label = i < j ? 'kept' : (i === j ? 'rejected' : 'not tried');
      } else { tok = null; fill = 'none'; label = ''; }
      body += t.el('rect', { x: X, y: top, width: box, height: box, rx: 4, fill: fill, 'fill-opacity': fill === 'none' ? 0 : 0.35, stroke: 'currentColor', 'stroke-opacity': 0.5 });
      if (tok !== null) body += t.text(X + box / 2, top + 20, chars[tok] === ' ' ? '␣' : chars[tok], { 'text-anchor': 'middle', 'font-family': 'monospace', 'font-size': 14 });
      if (i < k) {
        var ph = barH * P[i][x[i]], qh = barH * Q[i][x[i]], by = top + box + 6 + barH;
        body += t.el('rect', { x: X + 3, y: by - ph, width: 11, height: Math.max(ph, 0.5), fill: 'var(--tw-a2)' });
        body += t.el('rect', { x: X + 16, y: by - qh, width: 11, height: Math.max(qh, 0.5), fill: 'var(--tw-a1)' });
      }
    }
    var yX = L + j * (box + gap);
    body += t.el('rect', { x: yX + 3, y: top + 3, width: box - 6, height: box - 6, rx: 3, fill: 'var(--tw-a2)', 'fill-opacity': 0.25, stroke: 'var(--tw-a2)', 'stroke-width': 2 });
    body += t.text(yX + box / 2, top - 4, chars[out.y] === ' ' ? '␣' : chars[out.y], { 'text-anchor': 'middle', 'font-family': 'monospace', 'font-size': 12, fill: 'var(--tw-a2)' });
    body += t.text(L, Hh - 6, 'bars: p(x) target (blue), q(x) draft (orange); box outlined in blue: the target\'s token', { 'font-size': 11 });
    t.plot.innerHTML = t.svg(W, Hh, body, 'One round with k = ' + k + ': ' + j + ' of ' + k +
      ' draft tokens kept, then the target\'s token; ' + (j + 1) + ' tokens from one target pass.');
    t.readout('accepted', j, String(j));
    t.readout('emitted', j + 1, String(j + 1));
    t.readout('text', text, JSON.stringify(text));
    t.readout('alpha', alpha, alpha.toFixed(3));
    t.readout('expected', expected, expected.toFixed(3));
    t.readout('formula', formula, formula.toFixed(3));
  };
});
