/* Chapter 5 mask lab: two padding keys masked four ways, in float32 or emulated float16.
 * Every operation is rounded to the chosen dtype as torch does on CPU (half ops compute
 * in float32 and round; sums accumulate in float32), so -1e9 becomes -inf in float16. */
attnlabTwin.define('mask_lab', function (t) {
  var L = t.data.scores, T = L.length, S = L[0].length, npad = t.data.n_pad;
  return function () {
    var kind = t.value('mask'), dtype = t.value('dtype'), whole = t.value('whole_row');
    var scale = Math.pow(10, t.value('logscale'));
    var half = dtype === 'float16', f32 = t.f32;
    var r = half ? function (x) { return t.f16(f32(x)); } : f32; // one op in the dtype
    t.readout('logscale', scale, '×' + (scale < 10 ? scale.toFixed(1) : Math.round(scale)));
    var maskValue = kind === 'boolean' ? null : r(kind === '-inf' ? -Infinity : parseFloat(kind));
    var W = [];
    for (var i = 0; i < T; i++) {
      var keep = L[i].map(function (v, j) { return j < S - npad && !(whole && i === T - 1); });
      var s = L[i].map(function (v) { return r(v * scale); });
      var p;
      if (kind === 'boolean') { // attnlab.softmax: computed in float32, -inf rows -> 0
        var x = s.map(function (v, j) { return keep[j] ? f32(v) : -Infinity; });
        var m = t.max(x); if (!isFinite(m)) m = 0;
        var e = x.map(function (v) { return f32(Math.exp(f32(v - m))); }), z = 0;
        e.forEach(function (v) { z = f32(z + v); });
        p = e.map(function (v) { return r(z > 0 ? f32(v / z) : 0); });
      } else { // textbook softmax of scores + additive mask, every op in the dtype
        var a = s.map(function (v, j) { return r(v + (keep[j] ? 0 : maskValue)); });
        var mx = t.max(a); if (a.some(isNaN)) mx = NaN;
        var e2 = a.map(function (v) { return r(Math.exp(r(v - mx))); }), z2 = 0;
        e2.forEach(function (v) { z2 = f32(z2 + v); });
        z2 = r(z2);
        p = e2.map(function (v) { return r(v / z2); });
      }
      W.push(p);
    }
    var real = whole ? T - 1 : T, leak = 0, nan = false;
    W.forEach(function (row, i) {
      row.forEach(function (v) { if (isNaN(v)) nan = true; });
      if (i < real) {
        var l = 0; for (var j = S - npad; j < S; j++) l = f32(l + (isNaN(row[j]) ? 0 : row[j]));
        leak = Math.max(leak, l);
      }
    });
    // Heatmap: rows = queries, columns = keys (the last two are padding).
    var cw = 62, ch = 34, x0 = 40, y0 = 22, b = '';
    for (var j = 0; j < S; j++) b += t.text(x0 + j * cw + cw / 2, y0 - 7, j < S - npad ? 'k' + j : 'pad', { 'text-anchor': 'middle' });
    W.forEach(function (row, i) {
      b += t.text(x0 - 6, y0 + i * ch + ch / 2 + 4, 'q' + i, { 'text-anchor': 'end' });
      row.forEach(function (v, j) {
        var bad = isNaN(v);
        b += t.el('rect', { x: x0 + j * cw, y: y0 + i * ch, width: cw - 2, height: ch - 2, fill: bad ? 'var(--tw-a5)' : t.color(v) });
        b += t.el('text', { x: x0 + j * cw + cw / 2 - 1, y: y0 + i * ch + ch / 2 + 4, 'text-anchor': 'middle', 'font-size': 11,
          fill: bad ? '#fff' : t.inkOn(v), 'data-readout': 'w:' + i + ':' + j }, '');
      });
    });
    b += t.el('rect', { x: x0 + (S - npad) * cw - 1, y: y0 - 1, width: npad * cw, height: T * ch, fill: 'none', stroke: 'var(--tw-a5)', 'stroke-dasharray': '4 3' });
    t.plot.innerHTML = t.svg(x0 + S * cw + 10, y0 + T * ch + 6, b, 'attention weights with the padding keys masked');
    W.forEach(function (row, i) { row.forEach(function (v, j) { t.readout('w:' + i + ':' + j, v, isNaN(v) ? 'NaN' : t.fmt(v, 3)); }); });
    t.readout('leak', leak, t.fmt(leak, 4));
    t.readout('nan', nan ? 'yes' : 'no', nan ? 'yes' : 'no');
    t.readout('mask_value', maskValue === null ? 'none' : maskValue,
      maskValue === null ? 'none (boolean)' : (isFinite(maskValue) ? String(maskValue) : t.fmt(maskValue)));
  };
});
