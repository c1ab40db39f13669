/* Chapter 1's two trained reversal models, run in the page (course/twin/nn.js): the
 * GRU encoder-decoder with dot attention and the one without. Every keystroke
 * decodes both greedily; letters that differ from the true reversal are marked, and
 * the heatmap shows where the attention model looked at each step. */
attnlabTwin.define('seq2seq_live', function (t) {
  var N = window.attnlabNN, d = t.data, task = N.tasks[d.task];
  var withA = N.seq2seq(N.load(d.models.attention), d.models.attention.hp);
  var without = N.seq2seq(N.load(d.models.no_attention), d.models.no_attention.hp);
  var src = t.control('source'), ex = t.control('example');
  ex.addEventListener('input', function () { if (ex.value) src.value = ex.value; });
  ex.addEventListener('change', function () { if (ex.value) src.value = ex.value; });
  src.addEventListener('input', function () { ex.value = ''; });
  function tokensOf(ids) { // attnlab.vocab.Vocab.decode
    var out = [];
    for (var i = 0; i < ids.length; i++) {
      if (ids[i] === 2) break;
      if (ids[i] === 0 || ids[i] === 1) continue;
      out.push(d.tgt_itos[ids[i]] || '<unk>');
    }
    return out;
  }
  function same(a, b) { return a.length === b.length && a.every(function (x, i) { return x === b[i]; }); }
  function marked(out, target) { // output letters, red where they differ from the target
    return out.map(function (x, i) {
      var ok = x === target[i];
      return '<span style="' + (ok ? '' : 'color:var(--tw-a5);text-decoration:underline') + '">' + t.esc(x) + '</span>';
    }).join('') + (out.length < target.length ? '<span style="color:var(--tw-a5)"> (' + (target.length - out.length) + ' missing)</span>' : '');
  }
  var lines = document.createElement('div');
  lines.className = 'twin-lines';
  t.plot.parentNode.insertBefore(lines, t.plot);
  return function () {
    var text = src.value, t0 = performance.now();
    var toks = task.tokenize(text), refusal = N.refusal(d.task, text, toks);
    if (refusal !== null) {
      ['output', 'output_no_attention'].forEach(function (k) { t.readout(k, '', '(no output)'); });
      ['correct', 'correct_no_attention'].forEach(function (k) { t.readout(k, 'false', 'no'); });
      t.readout('message', refusal, refusal);
      t.readout('unknown', '', 'none');
      lines.innerHTML = '';
      t.plot.innerHTML = '<p>No heatmap: attnlab refuses this input (see below).</p>';
      var ms0 = performance.now() - t0;
      t.root.dataset.decodeMs = ms0.toFixed(3);
      t.readout('time', ms0, ms0.toFixed(1) + ' ms');
      return;
    }
    var ids = N.encode(d.src_itos, toks), target = task.target(toks);
    var maxLen = target.length + 2 + d.extra_len; // as Seq2Seq.translate
    var ra = withA.greedy(ids, maxLen), rn = without.greedy(ids, maxLen);
    var oa = tokensOf(ra.ids), on = tokensOf(rn.ids);
    var ms = performance.now() - t0;
    t.root.dataset.decodeMs = ms.toFixed(3);
    var unknown = toks.filter(function (x) { return d.src_itos.indexOf(x) < 0; });
    t.readout('output', oa.join(''), oa.join('') || '(empty)');
    t.readout('output_no_attention', on.join(''), on.join('') || '(empty)');
    t.readout('correct', same(oa, target) ? 'true' : 'false', same(oa, target) ? 'yes' : 'no');
    t.readout('correct_no_attention', same(on, target) ? 'true' : 'false', same(on, target) ? 'yes' : 'no');
    t.readout('message', '', 'no');
    t.readout('unknown', unknown.join(' '), unknown.length ? unknown.map(function (u) { return "'" + u + "'"; }).join(', ') : 'none');
    t.readout('time', ms, ms.toFixed(1) + ' ms (both models)');
    lines.innerHTML = '<div>true reversal: <code>' + t.esc(target.join('')) + '</code></div>'
      + '<div>with attention: <code>' + marked(oa, target) + '</code></div>'
      + '<div>without attention: <code>' + marked(on, target) + '</code></div>';
    // Rows: the attention model's steps, as Seq2Seq.translate keeps them (the output
    // tokens, then the <eos> step); columns: the source tokens.
    var W = ra.weights.slice(0, Math.min(oa.length + 1, ra.weights.length));
    var rows = oa.concat(['<eos>']).slice(0, W.length);
    var S = toks.length, Tn = W.length;
    // On a <canvas> above 400 cells (core.js): a 100-letter input made 11,000 SVG nodes.
    t.heatmap({
      rows: rows, cols: toks, W: W, x0: 40, y0: 28,
      cw: Math.max(10, Math.min(22, 320 / S)), ch: Math.max(9, Math.min(16, 300 / Tn)),
      colText: function (s) { return s.length > 2 ? '?' : s; },
      caption: 'output ↓ · source letter →',
      label: 'Attention of the reversal model while writing ' + oa.join('') + ' from ' + toks.join(''),
    });
  };
});
