/* Chapter 7: the sinusoidal positional encoding PE[pos, 2i] = sin(pos / base^(2i/D)),
 * PE[pos, 2i+1] = cos(...), computed here; one position (a row) and one feature (a
 * column) picked out. Below: PE[pos] . PE[pos + k] against the offset k, computed as
 * the dot product of the two rows (positions outside the table use the same formula). */
attnlabTwin.define('positional', function (t) {
  var P = t.data.n_positions, D = t.data.d_model, base = t.data.base;
  function pe(pos, dim) {
    var i2 = dim - (dim % 2), ang = pos * Math.exp(-Math.log(base) * i2 / D);
    return dim % 2 === 0 ? Math.sin(ang) : Math.cos(ang);
  }
  // The table does not change: draw it once, as cells of a blue-white-red scale.
  function rb(v) { // v in [-1, 1]: blue (-1) .. neutral grey .. red (+1)
    var a = Math.abs(v), c = v < 0 ? [59, 130, 217] : [217, 72, 59];
    return 'rgb(' + c.map(function (x) { return Math.round(128 + (x - 128) * a); }).join(',') + ')';
  }
  var cw = 8, ch = 4, x0 = 34, y0 = 18, cells = '';
  for (var p = 0; p < P; p++) for (var d = 0; d < D; d++)
    cells += '<rect x="' + (x0 + d * cw) + '" y="' + (y0 + p * ch) + '" width="' + cw + '" height="' + ch + '" fill="' + rb(pe(p, d)) + '"></rect>';
  return function () {
    var pos = t.value('position'), dim = t.value('dim'), v = pe(pos, dim);
    var wl = 2 * Math.PI * Math.pow(base, (dim - dim % 2) / D);
    var b = cells, W1 = x0 + D * cw;
    b += t.el('rect', { x: x0 - 1, y: y0 + pos * ch - 1, width: D * cw + 2, height: ch + 2, fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5 });
    b += t.el('rect', { x: x0 + dim * cw - 1, y: y0 - 1, width: cw + 2, height: P * ch + 2, fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5, 'stroke-dasharray': '3 2' });
    b += t.text(x0, 12, 'PE[position, feature]', { 'font-size': 10 });
    b += t.text(x0 - 4, y0 + 8, '0', { 'text-anchor': 'end', 'font-size': 9 });
    b += t.text(x0 - 4, y0 + P * ch, String(P - 1), { 'text-anchor': 'end', 'font-size': 9 });
    b += t.text(x0 + D * cw, y0 + P * ch + 12, 'feature →', { 'text-anchor': 'end', 'font-size': 9 });
    // Right: the chosen column as a curve over positions, the chosen position marked.
    var X0 = W1 + 40, Wc = 300, mid = y0 + P * ch / 2, amp = P * ch / 2 - 6, path = '';
    for (var q = 0; q < P; q++) path += (q ? 'L' : 'M') + (X0 + q * Wc / (P - 1)).toFixed(1) + ' ' + (mid - amp * pe(q, dim)).toFixed(1);
    b += t.el('line', { x1: X0, x2: X0 + Wc, y1: mid, y2: mid, stroke: 'currentColor', 'stroke-opacity': 0.3 });
    b += t.el('path', { d: path, fill: 'none', stroke: 'var(--tw-a2)', 'stroke-width': 2 });
    b += t.el('circle', { cx: X0 + pos * Wc / (P - 1), cy: mid - amp * v, r: 5, fill: 'var(--tw-a1)' });
    b += t.text(X0, 12, 'feature ' + dim + ' (' + (dim % 2 ? 'cos' : 'sin') + ') over positions 0…' + (P - 1), { 'font-size': 10 });
    // Bottom: the dot product of the position's code with the code k positions away.
    var off = t.value('offset'), K = 32, yB = y0 + P * ch + 40, hB = 90, WB = X0 + Wc - x0;
    function dot(k) { var s = 0; for (var d = 0; d < D; d++) s += pe(pos, d) * pe(pos + k, d); return s; }
    var dk = dot(off), top = D / 2, dpath = '', dots = [], lo = Infinity;
    for (var k = -K; k <= K; k++) { dots.push(dot(k)); lo = Math.min(lo, dots[dots.length - 1]); }
    lo = Math.min(0, Math.floor(lo));
    function bx(k) { return x0 + (k + K) * WB / (2 * K); }
    function by(s) { return yB + hB - 4 - (hB - 8) * (s - lo) / (top - lo); }
    for (k = -K; k <= K; k++) dpath += (k === -K ? 'M' : 'L') + bx(k).toFixed(1) + ' ' + by(dots[k + K]).toFixed(1);
    b += t.el('line', { x1: x0, x2: x0 + WB, y1: by(lo), y2: by(lo), stroke: 'currentColor', 'stroke-opacity': 0.3 });
    b += t.text(x0 - 4, by(lo) + 3, String(lo), { 'text-anchor': 'end', 'font-size': 9 });
    b += t.text(x0 - 4, by(top) + 3, String(top), { 'text-anchor': 'end', 'font-size': 9 });
    b += t.el('line', { x1: bx(0), x2: bx(0), y1: yB, y2: yB + hB, stroke: 'currentColor', 'stroke-opacity': 0.3 });
    b += t.el('path', { d: dpath, fill: 'none', stroke: 'var(--tw-a2)', 'stroke-width': 2 });
    b += t.el('circle', { cx: bx(off), cy: by(dk), r: 5, fill: 'var(--tw-a1)' });
    b += t.text(x0, yB - 8, 'PE[' + pos + '] · PE[' + pos + ' + k] for k = −' + K + ' … ' + K + ' (peak D/2 = ' + top + ' at k = 0)', { 'font-size': 10 });
    b += t.text(x0 + WB, yB + hB + 12, 'offset k →', { 'text-anchor': 'end', 'font-size': 9 });
    t.plot.innerHTML = t.svg(X0 + Wc + 10, yB + hB + 16, b, 'sinusoidal positional encoding and the dot product of two positions against their offset');
    t.readout('value', v, t.fmt(v, 4));
    t.readout('wavelength', wl, t.fmt(wl, 1) + ' positions');
    t.readout('dot', dk, t.fmt(dk, 3));
  };
});
