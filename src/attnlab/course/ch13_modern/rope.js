/* Chapter 13 RoPE twin: the score of a rotated query and key against their offset. */
attnlabTwin.define('rope', function (t) {
  var q = t.data.q, k = t.data.k, d = q.length, base = t.data.base, maxOff = t.data.max_offset;
  // <R(m w) q, R(n w) k> = sum over pairs of the 2-D rotation by (m - n) w_i / scale
  function score(offset, scale) {
    var s = 0;
    for (var i = 0; i < d / 2; i++) {
      var w = Math.pow(base, -2 * i / d), a = offset * w / scale;
      var c = Math.cos(a), sn = Math.sin(a), qa = q[2 * i], qb = q[2 * i + 1];
      s += (qa * c - qb * sn) * k[2 * i] + (qa * sn + qb * c) * k[2 * i + 1];
    }
    return s;
  }
  return function () {
    var off = t.value('offset'), scale = +t.value('scale');
    var W = 520, Hh = 200, L = 44, top = 12, ph = Hh - 40;
    var ys = [], lo = Infinity, hi = -Infinity;
    for (var o = 0; o <= maxOff; o++) { var y = score(o, scale); ys.push(y); lo = Math.min(lo, y); hi = Math.max(hi, y); }
    var span = Math.max(hi - lo, 1e-9);
    function X(o) { return L + o * (W - L - 10) / maxOff; }
    function Y(v) { return top + (hi - v) / span * ph; }
    var path = ys.map(function (v, o) { return (o ? 'L' : 'M') + X(o).toFixed(1) + ' ' + Y(v).toFixed(1); }).join(' ');
    var body = t.el('line', { x1: L, y1: Y(0), x2: W - 10, y2: Y(0), stroke: 'currentColor', 'stroke-opacity': 0.3 });
    body += t.el('path', { d: path, fill: 'none', stroke: 'var(--tw-a1)', 'stroke-width': 2 });
    var now = score(off, scale);
    body += t.el('circle', { cx: X(off), cy: Y(now), r: 5, fill: 'var(--tw-a2)' });
    body += t.text(L + (W - L) / 2, Hh - 4, 'offset m - n (positions divided by ' + scale + ')', { 'text-anchor': 'middle', 'font-size': 12 });
    body += t.text(L - 6, Y(hi) + 4, hi.toFixed(2), { 'text-anchor': 'end', 'font-size': 11 });
    body += t.text(L - 6, Y(lo) + 4, lo.toFixed(2), { 'text-anchor': 'end', 'font-size': 11 });
    t.plot.innerHTML = t.svg(W, Hh, body, 'Score of a rotated query and key against their offset, 0 to ' +
      maxOff + ', positions divided by ' + scale + ': ' + now.toFixed(3) + ' at offset ' + off + '.');
    t.readout('score', now, now.toFixed(4));
    t.readout('score_zero', score(0, scale), score(0, scale).toFixed(4));
    t.readout('same_offset_far', score(off, scale), 'the same at positions (' + (1000 + off) + ', 1000)');
  };
});
