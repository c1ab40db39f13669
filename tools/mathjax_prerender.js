/* Typeset the site's formulas once, at build time, as MathML Core, with MathJax's TeX
 * parser in Node.js.
 *
 *   node tools/mathjax_prerender.js MATHJAX_ES5_DIR < in.json > out.json
 *
 * in.json: [[tex, display], ...] (display: true for a display formula).
 * out.json: {html: [the <math> element of each formula, or null if it failed]}.
 *
 * The browser draws MathML Core itself (Chromium >= 109, Firefox, Safari): no MathJax
 * script, no CommonHTML spans (a third of a chapter's elements were mjx-* nodes, each
 * with a hidden MathML copy for screen readers), no stylesheet of glyphs and no math
 * webfonts. Screen readers read the <math> element directly.
 *
 * MathJax writes a little MathML that is not in MathML Core; it is rewritten here:
 * - mathvariant other than "normal" (\mathbb, \mathbf, \boldsymbol, \mathcal, ...):
 *   the letters become the Unicode mathematical alphanumeric characters they stand
 *   for (what MathML Core asks for);
 * - columnalign on a table (\begin{aligned}): each cell gets its text-align.
 * Called by tools/site_polish.py; MATHJAX_ES5_DIR is the npm package's es5/ folder that
 * tools/vendor_js.sh keeps outside the deployed site.
 */
'use strict';
const path = require('path');
const [dir] = process.argv.slice(2);
if (!dir) {
  process.stderr.write('usage: node mathjax_prerender.js MATHJAX_ES5_DIR < in.json\n');
  process.exit(2);
}

// ------------------------------------------------ mathvariant -> Unicode characters
// Latin A-Z a-z start, digits start, Greek start (or 0 where Unicode has none).
const VARIANTS = {
  'bold': [0x1D400, 0x1D7CE, 0x1D6A8],
  'italic': [0x1D434, 0, 0x1D6E2],
  'bold-italic': [0x1D468, 0x1D7CE, 0x1D71C],
  'script': [0x1D49C, 0, 0],
  'bold-script': [0x1D4D0, 0x1D7CE, 0],
  'fraktur': [0x1D504, 0, 0],
  'bold-fraktur': [0x1D56C, 0x1D7CE, 0],
  'double-struck': [0x1D538, 0x1D7D8, 0],
  'sans-serif': [0x1D5A0, 0x1D7E2, 0],
  'bold-sans-serif': [0x1D5D4, 0x1D7EC, 0x1D756],
  'sans-serif-italic': [0x1D608, 0, 0],
  'sans-serif-bold-italic': [0x1D63C, 0x1D7EC, 0x1D790],
  'monospace': [0x1D670, 0x1D7F6, 0],
};
// MathJax's own names for TeX's fonts
const ALIASES = {
  '-tex-calligraphic': 'script', '-tex-bold-calligraphic': 'bold-script',
  '-tex-mathit': 'italic', '-tex-oldstyle': 'normal', '-tex-bold-oldstyle': 'bold',
};
// Letters Unicode had already (the holes in the block)
const HOLES = {
  'italic': { h: 0x210E },
  'script': { B: 0x212C, E: 0x2130, F: 0x2131, H: 0x210B, I: 0x2110, L: 0x2112, M: 0x2133,
    R: 0x211B, e: 0x212F, g: 0x210A, o: 0x2134 },
  'fraktur': { C: 0x212D, H: 0x210C, I: 0x2111, R: 0x211C, Z: 0x2128 },
  'double-struck': { C: 0x2102, H: 0x210D, N: 0x2115, P: 0x2119, Q: 0x211A, R: 0x211D, Z: 0x2124 },
};
const GREEK = 'ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡϴΣΤΥΦΧΨΩ∇αβγδεζηθικλμνξοπρςστυφχψω∂ϵϑϰϕϱϖ';

function styled(ch, variant) {
  const v = VARIANTS[variant];
  if (!v) return ch;
  const hole = (HOLES[variant] || {})[ch];
  if (hole) return String.fromCodePoint(hole);
  const c = ch.codePointAt(0);
  if (c >= 65 && c <= 90) return String.fromCodePoint(v[0] + c - 65);
  if (c >= 97 && c <= 122) return String.fromCodePoint(v[0] + 26 + c - 97);
  if (c >= 48 && c <= 57 && v[1]) return String.fromCodePoint(v[1] + c - 48);
  const g = GREEK.indexOf(ch);
  if (g >= 0 && v[2]) return String.fromCodePoint(v[2] + g);
  return ch;
}

function decode(s) {
  return s.replace(/&#x([0-9A-Fa-f]+);/g, (_, h) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/&#([0-9]+);/g, (_, d) => String.fromCodePoint(parseInt(d, 10)));
}

function coreVariants(mml) {
  // <mi mathvariant="bold">x</mi> -> <mi>𝐱</mi> (text content only, no child elements)
  return mml.replace(/<(mi|mn|mo|mtext)([^>]*?) mathvariant="([^"]+)"([^>]*)>([^<]*)<\/\1>/g,
    (all, tag, a, variant, b, text) => {
      variant = ALIASES[variant] || variant;
      if (variant === 'normal') {
        // Core: normal is meaningful on a one-letter <mi> only
        return tag === 'mi' ? `<mi${a} mathvariant="normal"${b}>${text}</mi>` : `<${tag}${a}${b}>${text}</${tag}>`;
      }
      const out = Array.from(decode(text)).map((ch) => styled(ch, variant)).join('');
      // a styled letter is its own glyph: an <mi> of one letter must not be italicised again
      const keep = tag === 'mi' && Array.from(out).length === 1 ? ' mathvariant="normal"' : '';
      return `<${tag}${a}${keep}${b}>${out}</${tag}>`;
    });
}

function coreAlign(mml) {
  // columnalign of a table onto each of its cells (a stack: tables nest)
  const stack = [];
  return mml.replace(/<(\/?)(mtable|mtr|mlabeledtr|mtd)\b([^>]*)>/g, (all, close, tag, attrs) => {
    if (tag === 'mtable') {
      if (close) { stack.pop(); return all; }
      const m = /columnalign="([^"]+)"/.exec(attrs);
      stack.push({ align: m ? m[1].split(/\s+/) : [], col: 0 });
      return all;
    }
    const top = stack[stack.length - 1];
    if (!top || close) return all;
    if (tag === 'mtr') { top.col = 0; return all; }
    if (tag === 'mlabeledtr') { top.col = -1; return all; }
    const i = top.col++;
    if (i < 0 || !top.align.length || /columnalign=|style=/.test(attrs)) return all;
    const a = top.align[Math.min(i, top.align.length - 1)];
    if (a !== 'left' && a !== 'right') return all;
    return `<mtd${attrs} style="text-align:${a}">`;
  });
}

function tidy(mml) {
  return mml
    .replace(/ xmlns="http:\/\/www\.w3\.org\/1998\/Math\/MathML"/, '')
    .replace(/ data-mjx-[a-z-]+="[^"]*"/g, '')
    .replace(/ data-latex(-item)?="[^"]*"/g, '')
    .replace(/>\s+</g, '><')
    // characters as themselves (the page is UTF-8): fewer bytes
    .replace(/&#x([0-9A-Fa-f]+);/g, (all, h) => {
      const c = parseInt(h, 16);
      return c === 0x3C || c === 0x3E || c === 0x26 || c === 0x22 ? all : String.fromCodePoint(c);
    });
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const formulas = JSON.parse(input);
  require(path.resolve(dir, 'node-main.js')).init({
    loader: {
      paths: { mathjax: path.resolve(dir) },
      load: ['input/tex-full', 'adaptors/liteDOM'],
    },
    // bussproofs needs an output jax to measure with; no formula uses it
    tex: { packages: { '[-]': ['bussproofs'] } },
    startup: { typeset: false },
  }).then((MathJax) => {
    const html = formulas.map(([tex, display]) => {
      try {
        const mml = MathJax.tex2mml(tex, { display: !!display });
        if (mml.indexOf('<merror') >= 0) return null;
        return tidy(coreAlign(coreVariants(mml)));
      } catch (err) {
        return null;
      }
    });
    process.stdout.write(JSON.stringify({ html: html }));
  }).catch((err) => {
    process.stderr.write('MathJax failed: ' + (err && err.stack || err) + '\n');
    process.exit(1);
  });
});
