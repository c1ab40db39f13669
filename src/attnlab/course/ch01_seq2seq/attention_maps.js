/* Precomputed attention maps of a trained model (it cannot run in the browser): pick
 * an example and an output step; the heatmap frames that row and the bars show it. */
attnlabTwin.define('attention_maps', function (t) {
  var ex = t.data.examples;
  return function () {
    var e = ex[+t.value('example')], W = e.weights, Tn = W.length, Sn = W[0].length;
    var slider = t.control('step');
    slider.max = String(Tn - 1);
    var step = Math.min(t.value('step'), Tn - 1), row = W[step], f = t.argmax(row);
    if (+slider.value !== step) slider.value = String(step);
    t.readout('step', step, step + ' of ' + (Tn - 1));
    var cw = Math.max(12, Math.min(28, 520 / Sn)), ch = Math.max(9, Math.min(20, 300 / Tn)), x0 = 46, y0 = 22, b = '';
    W.forEach(function (r, i) {
      r.forEach(function (v, j) { b += '<rect x="' + (x0 + j * cw) + '" y="' + (y0 + i * ch) + '" width="' + (cw - 1) + '" height="' + (ch - 1) + '" fill="' + t.color(v) + '"></rect>'; });
      b += t.text(x0 - 4, y0 + i * ch + ch - 3, e.out[i], { 'text-anchor': 'end', 'font-size': 9 });
    });
    e.src.forEach(function (s, j) { b += t.text(x0 + j * cw + cw / 2, y0 + Tn * ch + 11, s, { 'text-anchor': 'middle', 'font-size': 9 }); });
    b += t.el('rect', { x: x0 - 1, y: y0 + step * ch - 1, width: Sn * cw + 1, height: ch + 1, fill: 'none', stroke: 'var(--tw-a5)', 'stroke-width': 2 });
    var X0 = x0 + Sn * cw + 30, bw = Math.max(8, Math.min(24, 300 / Sn)), base = y0 + Tn * ch, hmax = Math.min(120, Tn * ch);
    row.forEach(function (v, j) {
      b += t.el('rect', { x: X0 + j * bw, y: base - hmax * v, width: bw - 1, height: hmax * v, fill: j === f ? 'var(--tw-a1)' : 'var(--tw-a2)' });
      b += t.text(X0 + j * bw + bw / 2, base + 11, e.src[j], { 'text-anchor': 'middle', 'font-size': 9 });
    });
    b += t.text(X0, base - hmax - 6, "writing '" + e.out[step] + "': where it looks", { 'font-size': 10 });
    t.plot.innerHTML = t.svg(X0 + Math.max(Sn * bw, 190) + 10, base + 16, b, 'attention map of the trained model');
    t.readout('output', e.text, e.text);
    t.readout('writing', e.out[step], e.out[step]);
    t.readout('focus', e.src[f], e.src[f] + ' (position ' + f + ')');
    t.readout('focus_weight', row[f], t.fmt(row[f], 3));
  };
});
