/* Chapter 5: why divide by sqrt(d_k). Random q, k with N(0, 1) entries (seeded, the same
 * generator as attnlab.widgets.twins.normals); the spread of q.k and how peaked the
 * softmax over 16 keys is, with and without the scaling. */
attnlabTwin.define('sqrt_dk', function (t) {
  var N = t.data.n_queries, K = t.data.n_keys, cache = {};
  function stats(dk) {
    if (cache[dk]) return cache[dk];
    var g = t.normals(t.data.seed + dk, N * (K + 1) * dk), raw = [], scaled = [];
    var sum = 0, sum2 = 0, peakRaw = 0, peakScaled = 0, profRaw = new Float64Array(K), profScaled = new Float64Array(K);
    for (var i = 0; i < N; i++) {
      var off = i * (K + 1) * dk, s = [];
      for (var j = 0; j < K; j++) {
        var v = 0, ko = off + (j + 1) * dk;
        for (var c = 0; c < dk; c++) v += g[off + c] * g[ko + c];
        s.push(v); sum += v; sum2 += v * v;
      }
      var ss = s.map(function (v) { return v / Math.sqrt(dk); });
      var pr = t.softmax(s), ps = t.softmax(ss);
      peakRaw += t.max(pr); peakScaled += t.max(ps);
      pr.slice().sort(function (a, b) { return b - a; }).forEach(function (v, r) { profRaw[r] += v / N; });
      ps.slice().sort(function (a, b) { return b - a; }).forEach(function (v, r) { profScaled[r] += v / N; });
      raw.push.apply(raw, s); scaled.push.apply(scaled, ss);
    }
    var n = N * K, mean = sum / n, sd = Math.sqrt((sum2 - n * mean * mean) / (n - 1));
    return (cache[dk] = { raw: raw, scaled: scaled, sdRaw: sd, sdScaled: sd / Math.sqrt(dk),
      peakRaw: peakRaw / N, peakScaled: peakScaled / N, profRaw: profRaw, profScaled: profScaled });
  }
  function hist(vals, lo, hi, bins) {
    var h = new Array(bins).fill(0);
    vals.forEach(function (v) { var b = Math.floor((v - lo) / (hi - lo) * bins); if (b >= 0 && b < bins) h[b]++; });
    return h;
  }
  return function () {
    var dk = Math.pow(2, t.value('log2dk')), st = stats(dk);
    t.readout('log2dk', dk, String(dk));
    // Left: histograms of the raw and scaled scores on one axis.
    var lim = Math.max(4, 3.5 * st.sdRaw), bins = 40, hr = hist(st.raw, -lim, lim, bins), hs = hist(st.scaled, -lim, lim, bins);
    var top = Math.max(t.max(hr), t.max(hs)), W = 300, H = 170, x0 = 10, base = 140, bw = W / bins, b = '';
    for (var i = 0; i < bins; i++) {
      var a = 110 * hr[i] / top, c = 110 * hs[i] / top;
      b += t.el('rect', { x: x0 + i * bw, y: base - c, width: bw - 1, height: c, fill: 'var(--tw-a2)', 'fill-opacity': 0.85 });
      b += t.el('rect', { x: x0 + i * bw, y: base - a, width: bw - 1, height: a, fill: 'var(--tw-a1)', 'fill-opacity': 0.75 });
    }
    b += t.el('line', { x1: x0, x2: x0 + W, y1: base, y2: base, stroke: 'currentColor', 'stroke-opacity': 0.4 });
    b += t.text(x0, base + 14, t.fmt(-lim, 0), {});
    b += t.text(x0 + W / 2, base + 14, '0', { 'text-anchor': 'middle' });
    b += t.text(x0 + W, base + 14, t.fmt(lim, 0), { 'text-anchor': 'end' });
    b += t.text(x0, 14, 'scores: q·k (orange) and q·k/√d_k (blue)', { 'font-size': 10 });
    // Right: the mean sorted softmax weights over 16 keys (rank 1 = the largest).
    var X0 = 350, bw2 = 10, pb = '';
    for (var r = 0; r < K; r++) {
      var hR = 110 * st.profRaw[r], hS = 110 * st.profScaled[r];
      pb += t.el('rect', { x: X0 + r * 2 * bw2, y: base - hR, width: bw2 - 1, height: hR, fill: 'var(--tw-a1)' });
      pb += t.el('rect', { x: X0 + r * 2 * bw2 + bw2, y: base - hS, width: bw2 - 1, height: hS, fill: 'var(--tw-a2)' });
    }
    pb += t.el('line', { x1: X0, x2: X0 + 2 * K * bw2, y1: base, y2: base, stroke: 'currentColor', 'stroke-opacity': 0.4 });
    pb += t.el('line', { x1: X0, x2: X0 + 2 * K * bw2, y1: base - 110 / K, y2: base - 110 / K, stroke: 'currentColor', 'stroke-dasharray': '2 3', 'stroke-opacity': 0.6 });
    pb += t.text(X0, 14, 'mean softmax weight by rank (1/16 dashed)', { 'font-size': 10 });
    pb += t.text(X0, base + 14, 'largest', {});
    pb += t.text(X0 + 2 * K * bw2, base + 14, 'smallest', { 'text-anchor': 'end' });
    t.plot.innerHTML = t.svg(X0 + 2 * K * bw2 + 10, H, b + pb, 'score spread and softmax peakedness');
    t.readout('sd_raw', st.sdRaw, t.fmt(st.sdRaw, 2));
    t.readout('sd_scaled', st.sdScaled, t.fmt(st.sdScaled, 3));
    t.readout('peak_raw', st.peakRaw, t.fmt(st.peakRaw, 3));
    t.readout('peak_scaled', st.peakScaled, t.fmt(st.peakScaled, 3));
  };
});
