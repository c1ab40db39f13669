/* Chapter 8 tile map: the tiles of an (n, n) score matrix a tiled kernel computes. */
attnlabTwin.define('tile_map', function (t) {
  var d = t.data;
  return function () {
    var n = t.value('n'), block = +t.value('block'), causal = t.value('causal');
    var nb = Math.ceil(n / block), counts = { full: 0, masked: 0, skip: 0 };
    // As attnlab.efficient.tile_plan: with j - i allowed in (-inf, 0] when causal, a tile
    // is skipped if none of its (i, j) may attend, full if all may, else masked.
    function kind(bi, bj) {
      if (!causal) return 'full';
      var i0 = bi * block, i1 = Math.min(i0 + block, n), j0 = bj * block, j1 = Math.min(j0 + block, n);
      var dmin = j0 - (i1 - 1), dmax = (j1 - 1) - i0;
      if (dmin > 0) return 'skip';
      return dmax <= 0 ? 'full' : 'masked';
    }
    for (var bi = 0; bi < nb; bi++) for (var bj = 0; bj < nb; bj++) counts[kind(bi, bj)] += 1;
    var tiles = nb * nb, computed = counts.full + counts.masked;
    var H = d.n_heads, Dh = d.d_head, B = d.bytes_per, io = 4 * n * Dh;
    var naive = H * (io + 2 * n * n) * B, tiled = H * (io + 3 * n + block * block + block * Dh) * B;
    // The grid: one cell per tile up to 48 blocks a side, coarser cells beyond.
    var S = 300, per = Math.max(1, Math.ceil(nb / 48)), cells = Math.ceil(nb / per), cw = S / cells, body = '';
    var fill = { full: 'var(--tw-a3)', masked: 'var(--tw-a1)', skip: 'none' };
    for (var ci = 0; ci < cells; ci++) for (var cj = 0; cj < cells; cj++) {
      var k = kind(Math.min(ci * per, nb - 1), Math.min(cj * per, nb - 1));
      if (per > 1 && causal && ci === cj) k = 'masked';
      body += t.el('rect', { x: 40 + cj * cw, y: 10 + ci * cw, width: Math.max(cw - (cells <= 48 ? 1 : 0), 0.5), height: Math.max(cw - (cells <= 48 ? 1 : 0), 0.5), fill: fill[k], stroke: k === 'skip' ? 'currentColor' : 'none', 'stroke-opacity': 0.12 });
    }
    body += t.text(40 + S / 2, S + 28, 'key blocks (' + block + ' keys each)', { 'text-anchor': 'middle', 'font-size': 12 });
    body += t.text(30, 10 + S / 2, 'query blocks', { 'text-anchor': 'middle', 'font-size': 12, transform: 'rotate(-90 30 ' + (10 + S / 2) + ')' });
    // Memory bars.
    var mib = [naive / 1048576, tiled / 1048576], X = 40 + S + 40, bh = 150, top = Math.max(mib[0], mib[1]);
    ['materialising', 'tiled'].forEach(function (name, i) {
      var h = bh * mib[i] / top, x = X + 90 * i;
      body += t.el('rect', { x: x, y: 10 + bh + 60 - h, width: 60, height: h, fill: i ? 'var(--tw-a3)' : 'var(--tw-a5)' });
      body += t.text(x + 30, 10 + bh + 60 - h - 6, t.fmt(mib[i], 1) + ' MiB', { 'text-anchor': 'middle', 'font-size': 12 });
      body += t.text(x + 30, 10 + bh + 78, name, { 'text-anchor': 'middle', 'font-size': 12 });
    });
    t.plot.innerHTML = t.svg(X + 180, S + 40, body, 'n = ' + n + ', block ' + block + ': ' + counts.full + ' full, ' + counts.masked + ' masked, ' + counts.skip + ' skipped of ' + tiles + ' tiles; ' + t.fmt(naive / tiled, 0) + ' times less memory tiled');
    t.readout('n', n, String(n));
    t.readout('full', counts.full, String(counts.full));
    t.readout('masked', counts.masked, String(counts.masked));
    t.readout('skip', counts.skip, String(counts.skip) + ' of ' + tiles);
    t.readout('computed_fraction', computed / tiles, (100 * computed / tiles).toFixed(1) + ' %');
    t.readout('naive_mib', mib[0], t.fmt(mib[0], 1));
    t.readout('tiled_mib', mib[1], t.fmt(mib[1], 2));
    t.readout('ratio', naive / tiled, '×' + t.fmt(naive / tiled, 1));
  };
});
