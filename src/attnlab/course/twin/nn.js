/* attnlab static twins: a float32 inference runtime for small trained models.
 *
 * No dependency, no network. Inlined after core.js by the twins that run a trained
 * model of the course in the page (attnlab/course/twin/live.py), guarded so a page
 * defines it once. It mirrors attnlab's equations and their order:
 *
 *   - every tensor a layer returns is stored in a Float32Array (rounded to float32
 *     as torch stores it); sums inside one output value run in float64 and are
 *     rounded once, so each value is within a float32 rounding of torch's;
 *   - Linear: y = W x + b (W is (out, in), row-major, as torch keeps it);
 *   - LayerNorm: biased variance, (x - mean) / sqrt(var + eps) * g + b;
 *   - attention: scores = (q k^T) * scale, -inf where masked, softmax as
 *     attnlab.mappings.softmax (row max subtracted; an all -inf row gives zeros);
 *   - GRU: torch's gates r, z, n; h' = n + z (h - n);
 *   - greedy decoding as attnlab.decoding.greedy_decode: argmax of the log-softmax
 *     (first index on ties), stop at <eos> or after max_len tokens.
 *
 * Tasks: the tokenizers and the input checks of attnlab.data's ReversalTask and
 * DateTask, with Python's string rules (str.split, isspace, isdigit, repr), so the
 * page refuses exactly the inputs attnlab refuses, with the same message.
 */
(function () {
  if (window.attnlabNN) return;
  var f32 = Math.fround;
  var N = {};

  // --------------------------------------------------------------- weights
  // payload.blob: base64 of all tensors, little-endian, one after the other: float32,
  // or float16 when payload.dtype is "f16" (the website's copy: half the bytes; each
  // value widened to float32 exactly, as numpy and torch widen it);
  // payload.tensors: [name, shape, offset in values]. Returns {name: Float32Array}.
  var HALF = null;
  function halfTable() { // every float16 bit pattern -> its float32 value
    if (HALF) return HALF;
    HALF = new Float32Array(65536);
    for (var h = 0; h < 65536; h++) {
      var s = (h & 0x8000) ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
      HALF[h] = e === 0 ? s * f * Math.pow(2, -24)
        : e === 31 ? (f ? NaN : s * Infinity)
        : s * (1 + f / 1024) * Math.pow(2, e - 15);
    }
    return HALF;
  }
  N.load = function (payload) {
    var bin = atob(payload.blob), n = bin.length, bytes = new Uint8Array(n), i;
    for (i = 0; i < n; i++) bytes[i] = bin.charCodeAt(i);
    var all, out = {};
    if (payload.dtype === 'f16') {
      var half = new Uint16Array(bytes.buffer), table = halfTable();
      all = new Float32Array(half.length);
      for (i = 0; i < half.length; i++) all[i] = table[half[i]];
    } else all = new Float32Array(bytes.buffer);
    payload.tensors.forEach(function (t) {
      var size = t[1].reduce(function (a, b) { return a * b; }, 1);
      out[t[0]] = all.subarray(t[2], t[2] + size);
      out[t[0]].shape = t[1];
    });
    return out;
  };

  // ------------------------------------------------------------------ layers
  // x: Float32Array of rows (T, I) -> (T, O) with W (O, I), b (O,) or null.
  N.linear = function (x, T, W, b) {
    var O = W.shape[0], I = W.shape[1], y = new Float32Array(T * O);
    for (var t = 0; t < T; t++) {
      for (var o = 0; o < O; o++) {
        var s = 0, wo = o * I, xt = t * I;
        for (var i = 0; i < I; i++) s += W[wo + i] * x[xt + i];
        y[t * O + o] = b ? f32(f32(s) + b[o]) : f32(s);
      }
    }
    return y;
  };
  N.layerNorm = function (x, T, g, b, eps) {
    var D = g.length, y = new Float32Array(T * D);
    for (var t = 0; t < T; t++) {
      var m = 0, v = 0, o = t * D;
      for (var i = 0; i < D; i++) m += x[o + i];
      m /= D;
      for (i = 0; i < D; i++) { var d = x[o + i] - m; v += d * d; }
      var r = 1 / Math.sqrt(v / D + eps);
      for (i = 0; i < D; i++) y[o + i] = f32((x[o + i] - m) * r * g[i] + b[i]);
    }
    return y;
  };
  N.relu = function (x) { for (var i = 0; i < x.length; i++) if (x[i] < 0) x[i] = 0; return x; };
  N.add = function (a, b) { var y = new Float32Array(a.length); for (var i = 0; i < a.length; i++) y[i] = f32(a[i] + b[i]); return y; };
  // softmax of one row as attnlab.mappings.softmax: float32 in, float32 out.
  N.softmaxRow = function (z) {
    var m = -Infinity, n = z.length, p = new Float32Array(n), s = 0, i;
    for (i = 0; i < n; i++) if (z[i] > m) m = z[i];
    if (!isFinite(m)) m = 0;
    var e = new Float32Array(n);
    for (i = 0; i < n; i++) { e[i] = f32(Math.exp(f32(z[i] - m))); s += e[i]; }
    s = f32(s);
    for (i = 0; i < n; i++) p[i] = s > 0 ? f32(e[i] / s) : 0;
    return p;
  };
  // log-softmax of a row, as torch: x - max - log(sum(exp(x - max))), in float32.
  N.logSoftmax = function (z) {
    var m = -Infinity, n = z.length, s = 0, i, y = new Float32Array(n);
    for (i = 0; i < n; i++) if (z[i] > m) m = z[i];
    for (i = 0; i < n; i++) s += Math.exp(f32(z[i] - m));
    var ls = f32(Math.log(f32(s)));
    for (i = 0; i < n; i++) y[i] = f32(f32(z[i] - m) - ls);
    return y;
  };
  N.argmax = function (z) { var j = 0; for (var i = 1; i < z.length; i++) if (z[i] > z[j]) j = i; return j; };

  // Multi-head attention of attnlab.MultiHeadAttention for T queries and S keys.
  // p: {wq, bq, wk, bk, wv, bv, wo, bo}; H heads; allowed(t, s) -> bool (null: all).
  // kv: precomputed {k, v} (S, D) projections, or null to project `mem` here.
  // Returns {out (T, D), weights: [H][T] Float32Array(S), kv}.
  N.mha = function (xq, T, mem, S, p, H, allowed, kv) {
    var D = p.wq.shape[0], Dh = D / H, scale = f32(1 / Math.sqrt(Dh));
    var q = N.linear(xq, T, p.wq, p.bq);
    if (!kv) kv = { k: N.linear(mem, S, p.wk, p.bk), v: N.linear(mem, S, p.wv, p.bv) };
    var k = kv.k, v = kv.v, heads = new Float32Array(T * D), weights = [];
    for (var h = 0; h < H; h++) {
      var wh = [];
      for (var t = 0; t < T; t++) {
        var sc = new Float32Array(S);
        for (var s = 0; s < S; s++) {
          if (allowed && !allowed(t, s)) { sc[s] = -Infinity; continue; }
          var d = 0;
          for (var i = 0; i < Dh; i++) d += q[t * D + h * Dh + i] * k[s * D + h * Dh + i];
          sc[s] = f32(f32(d) * scale);
        }
        var w = N.softmaxRow(sc);
        wh.push(w);
        for (i = 0; i < Dh; i++) {
          var acc = 0;
          for (s = 0; s < S; s++) acc += w[s] * v[s * D + h * Dh + i];
          heads[t * D + h * Dh + i] = f32(acc);
        }
      }
      weights.push(wh);
    }
    return { out: N.linear(heads, T, p.wo, p.bo), weights: weights, kv: kv };
  };

  // One GRU step (torch's nn.GRU, gates r, z, n): x (I,), h (Hd,) -> h' (Hd,).
  N.gruCell = function (x, h, g) {
    var Hd = g.whh.shape[1], gi = N.linear(x, 1, g.wih, g.bih), gh = N.linear(h, 1, g.whh, g.bhh);
    var y = new Float32Array(Hd);
    for (var j = 0; j < Hd; j++) {
      var r = f32(1 / (1 + Math.exp(-f32(gi[j] + gh[j]))));
      var z = f32(1 / (1 + Math.exp(-f32(gi[Hd + j] + gh[Hd + j]))));
      var n = f32(Math.tanh(f32(gi[2 * Hd + j] + f32(r * gh[2 * Hd + j]))));
      y[j] = f32(n + f32(z * f32(h[j] - n)));
    }
    return y;
  };
  N.concat = function () {
    var n = 0, i, o = 0;
    for (i = 0; i < arguments.length; i++) n += arguments[i].length;
    var y = new Float32Array(n);
    for (i = 0; i < arguments.length; i++) { y.set(arguments[i], o); o += arguments[i].length; }
    return y;
  };
  // The sinusoidal table row of attnlab.positional (float64, then float32).
  N.sinusoid = function (pos, D) {
    var row = new Float32Array(D);
    for (var i = 0; i < D; i += 2) {
      var a = pos * Math.exp(-Math.log(10000) * i / D);
      row[i] = f32(Math.sin(a));
      if (i + 1 < D) row[i + 1] = f32(Math.cos(a));
    }
    return row;
  };

  // --------------------------------------------------- Python's string rules
  var SPACE = /[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
  N.isSpace = function (c) { return SPACE.test(c); };
  N.split = function (s) { // str.split() with no argument
    var out = [], cur = '';
    Array.from(s).forEach(function (c) {
      if (SPACE.test(c)) { if (cur) out.push(cur); cur = ''; } else cur += c;
    });
    if (cur) out.push(cur);
    return out;
  };
  // str.isdigit(): decimal digits plus the other characters of numeric type Digit.
  var DIGIT = /^(?:\p{Nd}|[\u00b2\u00b3\u00b9\u1369-\u1371\u19da\u2070\u2074-\u2079\u2080-\u2089\u2460-\u2468\u2474-\u247c\u2488-\u2490\u24ea\u24f5-\u24fd\u24ff\u2776-\u277e\u2780-\u2788\u278a-\u2792]|\u{10a40}|\u{10a41}|\u{10a42}|\u{10a43}|[\u{10e60}-\u{10e68}]|[\u{11052}-\u{1105a}]|[\u{1f100}-\u{1f10a}])+$/u;
  N.isDigit = function (s) { return s.length > 0 && DIGIT.test(s); };
  // int(s) in base 10: does Python accept it? (sign, decimal digits, single _ between)
  N.pyIntOk = function (s) { return /^[+-]?\p{Nd}+(?:_\p{Nd}+)*$/u.test(s); }; // tokens hold no whitespace
  var NONPRINT = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
  N.repr = function (s) { // repr() of a str
    var q = s.indexOf("'") >= 0 && s.indexOf('"') < 0 ? '"' : "'", out = q;
    Array.from(s).forEach(function (c) {
      var cp = c.codePointAt(0);
      if (c === q || c === '\\') out += '\\' + c;
      else if (c === '\n') out += '\\n';
      else if (c === '\r') out += '\\r';
      else if (c === '\t') out += '\\t';
      else if (c !== ' ' && NONPRINT.test(c)) {
        var h = cp.toString(16);
        out += cp < 0x100 ? '\\x' + ('0' + h).slice(-2) : cp < 0x10000 ? '\\u' + ('000' + h).slice(-4) : '\\U' + ('0000000' + h).slice(-8);
      } else out += c;
    });
    return out + q;
  };
  function upperFirst(w) { var cs = Array.from(w); return cs[0].toUpperCase() + cs.slice(1).join('').toLowerCase(); }

  // ------------------------------------------------------------------ tasks
  // Each task: tokenize(text) -> tokens; refusal(text, tokens) -> the message of the
  // ValueError attnlab's task.encode raises, or null; target(tokens) -> tokens or null.
  var MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
  N.tasks = {
    reversal: {
      tokenize: function (text) { return Array.from(text.toLowerCase()).filter(function (c) { return !SPACE.test(c); }); },
      refusal: function () { return null; },
      target: function (toks) { return toks.slice().reverse(); },
    },
    date: {
      tokenize: function (text) {
        var out = [];
        N.split(text.split(',').join(' , ').split('.').join(' . ')).forEach(function (w) {
          if (N.isDigit(w)) Array.prototype.push.apply(out, Array.from(w));
          else out.push(upperFirst(w));
        });
        return out;
      },
      // DateTask.target's checks, in its order (only the failures matter here).
      refusal: function (text, toks) {
        var names = {};
        MONTHS.forEach(function (m, i) { names[m] = i + 1; names[m.slice(0, 3)] = i + 1; });
        var month = toks.some(function (t) { return Object.prototype.hasOwnProperty.call(names, t); });
        if (month) return null; // day/year are sliced around the comma: no error
        var parts = toks.join('').split('.');
        if (parts.length !== 3) return 'not a date this task knows: ' + N.repr(toks.join(' '));
        if (!N.pyIntOk(parts[1])) return 'invalid literal for int() with base 10: ' + N.repr(parts[1]);
        return null;
      },
      target: null,
    },
  };
  // task.encode's checks: the message attnlab raises, or null.
  N.refusal = function (taskName, text, toks) {
    if (!toks.length) return taskName + ': empty input ' + N.repr(text);
    return N.tasks[taskName].refusal(text, toks);
  };
  // Tokens -> ids (unknown -> <unk> = 3), as attnlab.vocab.Vocab.encode.
  N.encode = function (itos, toks) {
    var stoi = {};
    itos.forEach(function (t, i) { stoi[t] = i; });
    return toks.map(function (t) { return Object.prototype.hasOwnProperty.call(stoi, t) ? stoi[t] : 3; });
  };

  // ------------------------------------------------------------------ models
  // attnlab.Seq2SeqTransformer (any norm_first, relu or gelu-free: relu only), batch of
  // one source: greedy(ids) -> {ids: generated ids (<eos> included if it came),
  // cross: [layer][head][step] Float32Array(S), probs: [step] p of the chosen token}.
  N.transformer = function (W, hp) {
    var D = hp.d_model, H = hp.n_heads, eps = hp.layer_norm_eps, scale = hp.scale_embeddings ? f32(Math.sqrt(D)) : 1;
    function attn(pre) {
      return { wq: W[pre + 'w_q.weight'], bq: W[pre + 'w_q.bias'], wk: W[pre + 'w_k.weight'], bk: W[pre + 'w_k.bias'],
               wv: W[pre + 'w_v.weight'], bv: W[pre + 'w_v.bias'], wo: W[pre + 'w_o.weight'], bo: W[pre + 'w_o.bias'] };
    }
    function ln(x, T, name) { return N.layerNorm(x, T, W[name + '.weight'], W[name + '.bias'], eps); }
    function ff(x, T, pre) { return N.linear(N.relu(N.linear(x, T, W[pre + 'linear1.weight'], W[pre + 'linear1.bias'])), T, W[pre + 'linear2.weight'], W[pre + 'linear2.bias']); }
    // x + sub(norm(x)) (pre-LN) or norm(x + sub(x)) (post-LN)
    function residual(x, T, norm, sub) {
      return hp.norm_first ? N.add(x, sub(ln(x, T, norm))) : ln(N.add(x, sub(x)), T, norm);
    }
    function embed(table, ids, offset) {
      var E = W[table], x = new Float32Array(ids.length * D);
      ids.forEach(function (id, t) {
        var pe = hp.positional === 'sinusoidal' ? N.sinusoid(offset + t, D) : null;
        for (var i = 0; i < D; i++) {
          var v = f32(E[id * D + i] * scale);
          x[t * D + i] = pe ? f32(v + pe[i]) : v;
        }
      });
      return x;
    }
    function encode(src) {
      var S = src.length, x = embed('src_embed.tokens.weight', src, 0);
      for (var l = 0; l < hp.n_encoder_layers; l++) {
        var pre = 'encoder.layers.' + l + '.';
        x = residual(x, S, pre + 'norm1', function (h) { return N.mha(h, S, h, S, attn(pre + 'self_attn.'), H, null, null).out; });
        x = residual(x, S, pre + 'norm2', function (h) { return ff(h, S, pre); });
      }
      return hp.norm_first ? ln(x, S, 'encoder.norm') : x;
    }
    // Greedy decoding, one new position per step; the self-attention keys and values
    // of earlier positions are kept (each row of every layer is computed from the
    // rows at or before it, so this equals re-running the whole prefix).
    function greedy(src, maxLen) {
      var S = src.length, mem = encode(src), L = hp.n_decoder_layers;
      var cache = [], crossKV = [], cross = [], out = [], probs = [], prev = hp.bos_id;
      for (var l = 0; l < L; l++) { cache.push({ k: new Float32Array(0), v: new Float32Array(0) }); crossKV.push(null); cross.push([]); for (var h = 0; h < H; h++) cross[l].push([]); }
      for (var t = 0; t < maxLen; t++) {
        var x = embed('tgt_embed.tokens.weight', [prev], t);
        for (l = 0; l < L; l++) {
          var pre = 'decoder.layers.' + l + '.', sa = attn(pre + 'self_attn.'), ca = attn(pre + 'cross_attn.');
          x = residual(x, 1, pre + 'norm1', function (hx) {
            var c = cache[l];
            c.k = N.concat(c.k, N.linear(hx, 1, sa.wk, sa.bk));
            c.v = N.concat(c.v, N.linear(hx, 1, sa.wv, sa.bv));
            return N.mha(hx, 1, null, t + 1, sa, H, null, c).out;
          });
          x = residual(x, 1, pre + 'norm2', function (hx) {
            var r = N.mha(hx, 1, mem, S, ca, H, null, crossKV[l]);
            crossKV[l] = r.kv;
            for (var h = 0; h < H; h++) cross[l][h].push(r.weights[h][0]);
            return r.out;
          });
          x = residual(x, 1, pre + 'norm3', function (hx) { return ff(hx, 1, pre); });
        }
        if (hp.norm_first) x = ln(x, 1, 'decoder.norm');
        var logp = N.logSoftmax(N.linear(x, 1, W['out.weight'], W['out.bias']));
        var next = N.argmax(logp);
        out.push(next); probs.push(Math.exp(logp[next]));
        if (next === hp.eos_id) break;
        prev = next;
      }
      return { ids: out, cross: cross, probs: probs };
    }
    return { encode: encode, greedy: greedy };
  };

  // attnlab.seq2seq.Seq2Seq with style "luong", attention None or "dot", softmax:
  // greedy(ids, maxLen) -> {ids, weights: [step] Float32Array(S) or null}.
  N.seq2seq = function (W, hp) {
    var Hh = hp.d_hidden, D = 2 * Hh, E = hp.d_emb;
    if (hp.style !== 'luong' || (hp.attention !== null && hp.attention !== 'dot') || hp.mapping !== 'softmax')
      throw new Error('this runtime runs the Luong-style GRU model with dot attention or none');
    function gru(pre, suffix) {
      return { wih: W[pre + 'weight_ih_l0' + suffix], whh: W[pre + 'weight_hh_l0' + suffix], bih: W[pre + 'bias_ih_l0' + suffix], bhh: W[pre + 'bias_hh_l0' + suffix] };
    }
    var fwd = gru('encoder.rnn.', ''), bwd = gru('encoder.rnn.', '_reverse'), dec = gru('decoder.rnn.', '');
    function row(table, id) { return W[table].subarray(id * E, (id + 1) * E); }
    function greedy(src, maxLen) {
      var S = src.length, hf = [], hb = new Array(S), h = new Float32Array(Hh), t, j;
      for (t = 0; t < S; t++) { h = N.gruCell(row('encoder.embed.weight', src[t]), h, fwd); hf.push(h); }
      var summaryF = h;
      h = new Float32Array(Hh);
      for (t = S - 1; t >= 0; t--) { h = N.gruCell(row('encoder.embed.weight', src[t]), h, bwd); hb[t] = h; }
      var summary = N.concat(summaryF, h), ann = [];
      for (t = 0; t < S; t++) ann.push(N.concat(hf[t], hb[t]));
      var s = N.linear(summary, 1, W['decoder.init.weight'], W['decoder.init.bias']);
      for (j = 0; j < D; j++) s[j] = f32(Math.tanh(s[j]));
      var prev = hp.bos_id, out = [], weights = hp.attention ? [] : null;
      for (t = 0; t < maxLen; t++) {
        var e = row('decoder.embed.weight', prev);
        s = N.gruCell(N.concat(e, summary), s, dec);
        var c = summary;
        if (hp.attention) {
          var sc = new Float32Array(S);
          for (j = 0; j < S; j++) { var d = 0; for (var i = 0; i < D; i++) d += s[i] * ann[j][i]; sc[j] = d; }
          var w = N.softmaxRow(sc);
          c = new Float32Array(D);
          for (i = 0; i < D; i++) { var acc = 0; for (j = 0; j < S; j++) acc += w[j] * ann[j][i]; c[i] = f32(acc); }
          weights.push(w);
        }
        var logp = N.logSoftmax(N.linear(N.concat(s, c, e), 1, W['decoder.out.weight'], W['decoder.out.bias']));
        var next = N.argmax(logp);
        out.push(next);
        if (next === hp.eos_id) break;
        prev = next;
      }
      return { ids: out, weights: weights };
    }
    return { greedy: greedy };
  };
  window.attnlabNN = N;
})();
