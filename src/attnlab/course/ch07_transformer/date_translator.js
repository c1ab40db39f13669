/* Chapter 7's trained date Transformer, run in the page (course/twin/nn.js): the
 * reader types a date, every keystroke re-encodes it and decodes greedily; the output
 * appears character by character with its probability, and a heatmap shows the
 * cross-attention of the chosen layer and head. Input attnlab refuses shows
 * attnlab's message instead. */
attnlabTwin.define('date_translator', function (t) {
  var N = window.attnlabNN, d = t.data, model = N.transformer(N.load(d), d.hp);
  var src = t.control('source'), ex = t.control('example');
  ex.addEventListener('input', function () { if (ex.value) src.value = ex.value; });
  ex.addEventListener('change', function () { if (ex.value) src.value = ex.value; });
  src.addEventListener('input', function () { ex.value = ''; });
  function tokensOf(ids) { // attnlab.vocab.Vocab.decode: skip <pad>/<bos>, stop at <eos>
    var out = [];
    for (var i = 0; i < ids.length; i++) {
      if (ids[i] === 2) break;
      if (ids[i] === 0 || ids[i] === 1) continue;
      out.push(d.tgt_itos[ids[i]] || '<unk>');
    }
    return out;
  }
  return function () {
    var text = src.value, t0 = performance.now();
    var toks = N.tasks.date.tokenize(text), refusal = N.refusal('date', text, toks);
    if (refusal !== null) {
      t.readout('output', '', '(no output)');
      t.readout('message', refusal, refusal);
      t.readout('unknown', '', 'none');
      t.plot.innerHTML = '<p>No heatmap: attnlab refuses this input (see below).</p>';
      var ms0 = performance.now() - t0;
      t.root.dataset.decodeMs = ms0.toFixed(3);
      t.readout('time', ms0, ms0.toFixed(1) + ' ms');
      return;
    }
    var ids = N.encode(d.src_itos, toks);
    var unknown = toks.filter(function (x) { return d.src_itos.indexOf(x) < 0; });
    var r = model.greedy(ids, d.max_len), out = tokensOf(r.ids), text_out = out.join('');
    var ms = performance.now() - t0;
    t.root.dataset.decodeMs = ms.toFixed(3);
    t.readout('output', text_out, text_out || '(empty)');
    t.readout('message', '', 'no');
    t.readout('unknown', unknown.join(' '), unknown.length ? unknown.map(function (u) { return "'" + u + "'"; }).join(', ') : 'none');
    t.readout('time', ms, ms.toFixed(1) + ' ms');
    // Heatmap: one row per decoding step (the character it wrote), one column per
    // source token; each cell carries its exact weight (for the browser check).
    var layer = +t.value('layer'), head = +t.value('head'), W = r.cross[layer][head];
    var rows = r.ids.map(function (id) { return d.tgt_itos[id] || '<unk>'; });
    var S = toks.length;
    var label = 'Cross-attention of layer ' + layer + ', head ' + head + ' while writing ' + (text_out || 'nothing') + ' from ' + toks.join(' ');
    // On a <canvas> above 400 cells (core.js): long inputs made thousands of SVG nodes.
    t.heatmap({
      rows: rows, cols: toks, W: W, x0: 48, y0: 30, cw: Math.max(16, Math.min(30, 300 / S)), ch: 18,
      right: r.probs.slice(0, rows.length).map(function (p) { return (100 * p).toFixed(0) + '%'; }),
      colText: function (s) { return s.length > 3 ? s.slice(0, 3) : s; },
      caption: 'written ↓ · source →  (right: probability of the written character)',
      label: label, minWidth: 330,
    });
  };
});
