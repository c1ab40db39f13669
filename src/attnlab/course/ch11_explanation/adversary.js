/* Chapter 11 adversary: the model's attention against the adversary's, ε by ε. */
attnlabTwin.define('adversary', function (t) {
  var d = t.data, toks = d.tokens, T = toks.length, w = d.weights;
  function kl(x, y) { var s = 0; for (var i = 0; i < x.length; i++) if (x[i] > 0) s += x[i] * (Math.log(Math.max(x[i], 1e-30)) - Math.log(Math.max(y[i], 1e-30))); return s; }
  function jsd(p, q) { var m = p.map(function (v, i) { return 0.5 * (v + q[i]); }); return Math.max(0.5 * kl(p, m) + 0.5 * kl(q, m), 0); }
  return function () {
    var v = d.views[t.value('step')], a = v.adversarial, div = jsd(w, a);
    t.readout('step', v.eps, 'ε = ' + v.eps);
    var bw = 12, gw = 2 * bw + 8, X0 = 40, H = 150, top = Math.max(t.max(w), t.max(a), 1e-9), body = '';
    body += t.el('line', { x1: X0, x2: X0 + T * gw, y1: 10 + H, y2: 10 + H, stroke: 'currentColor', 'stroke-opacity': 0.4 });
    for (var j = 0; j < T; j++) {
      var x = X0 + j * gw, h1 = H * w[j] / top, h2 = H * a[j] / top;
      body += t.el('rect', { x: x, y: 10 + H - h1, width: bw, height: h1, fill: 'var(--tw-a2)' });
      body += t.el('rect', { x: x + bw, y: 10 + H - h2, width: bw, height: h2, fill: 'var(--tw-a1)' });
      body += t.text(x + bw, 10 + H + 8, toks[j], { 'text-anchor': 'end', 'font-size': 11, transform: 'rotate(-60 ' + (x + bw) + ' ' + (10 + H + 8) + ')' });
    }
    t.plot.innerHTML = t.svg(X0 + T * gw + 10, H + 80, body, 'At eps ' + v.eps + ' the adversary moves the attention by JSD ' + t.fmt(div, 3) + ' while the output moves by ' + t.fmt(v.dy, 4));
    t.readout('jsd', div, t.fmt(div, 3));
    t.readout('dy', v.dy, t.fmt(v.dy, 4));
    t.readout('top_model', toks[t.argmax(w)], toks[t.argmax(w)]);
    t.readout('top_adv', toks[t.argmax(a)], toks[t.argmax(a)]);
  };
});
