/* Chapter 6: which input positions each head sees. Correct split: q (B, T, D) viewed as
 * (B, T, H, Dh), every head gets all T positions. The slides' code: q (B, T, Dh) viewed
 * as (B, -1, H, Dh), which works only when H divides T, and then head h gets positions
 * h, h + H, h + 2H, ... as a sequence of its own (row r of head h is position h + r H). */
attnlabTwin.define('slides_bug', function (t) {
  return function () {
    var T = t.value('T'), H = t.value('H'), works = T % H === 0;
    var slides = [];
    if (works) for (var h = 0; h < H; h++) { var ps = []; for (var i = h; i < T; i += H) ps.push(i); slides.push(ps); }
    var cw = 44, ch = 22, x0 = 52, y0 = 40, gap = 70, W = x0 + 2 * H * cw + gap + 10;
    var b = '';
    function grid(xs, title, seen) {
      b += t.text(xs, 16, title, { 'font-size': 10 });
      b += t.text(xs + H * cw / 2, y0 + T * ch + 16, 'head', { 'text-anchor': 'middle', 'font-size': 10 });
      for (var h = 0; h < H; h++) {
        b += t.text(xs + h * cw + cw / 2, y0 - 6, String(h), { 'text-anchor': 'middle', 'font-size': 10 });
        for (var i = 0; i < T; i++) {
          var row = seen && seen[h] ? seen[h].indexOf(i) : -1;
          var on = seen && row >= 0, v = T > 1 ? i / (T - 1) : 0;
          b += t.el('rect', { x: xs + h * cw + 1, y: y0 + i * ch + 1, width: cw - 2, height: ch - 2,
            fill: on ? t.color(v) : 'none', stroke: 'currentColor', 'stroke-opacity': 0.25 });
          if (on) b += t.text(xs + h * cw + cw / 2, y0 + i * ch + ch / 2 + 4, 'row ' + row,
            { 'text-anchor': 'middle', 'font-size': 10, fill: t.inkOn(v) });
        }
      }
    }
    for (var i = 0; i < T; i++) b += t.text(x0 - 6, y0 + i * ch + ch / 2 + 4, 'pos ' + i, { 'text-anchor': 'end', 'font-size': 10 });
    var all = []; for (var h2 = 0; h2 < H; h2++) { var a = []; for (var j = 0; j < T; j++) a.push(j); all.push(a); }
    grid(x0, 'correct: every head sees all ' + T, all);
    var x1 = x0 + H * cw + gap;
    grid(x1, works ? "slides' code: head h sees h, h+H, …" : "slides' code: RuntimeError", works ? slides : null);
    if (!works) b += t.text(x1 + H * cw / 2, y0 + T * ch / 2, T + ' is not divisible by ' + H, { 'text-anchor': 'middle', 'font-size': 11 });
    W = Math.max(W, x1 + 200);
    t.plot.innerHTML = t.svg(W, y0 + T * ch + 24, b, 'positions seen by each head, correct split against the slides\' code');
    t.readout('raises', !works, works ? 'no' : 'yes (T not divisible by H)');
    t.readout('rows', works ? T / H : 0, works ? String(T / H) : '—');
    var seen = works ? slides.map(function (ps) { return ps.join(','); }).join(' | ') : 'raises';
    t.readout('seen', seen, seen);
  };
});
