/* Typeset the site's formulas once, at build time, with MathJax in Node.js.
 *
 *   node tools/mathjax_prerender.js MATHJAX_ES5_DIR FONT_URL < in.json > out.json
 *
 * in.json: [[tex, display], ...] (display: true for a display formula).
 * out.json: {html: [the <mjx-container> of each formula, or null if it failed], css: the
 * CommonHTML stylesheet of every glyph used, with its fonts at FONT_URL}.
 *
 * Each formula carries its MathML for assistive technology (a11y/assistive-mml), as
 * MathJax in the page would; the page then needs no MathJax script at all (the 1.2 MB
 * runtime typesetting hundreds of formulas was most of a chapter's main-thread time on a
 * phone). Called by tools/site_polish.py; MATHJAX_ES5_DIR is the npm package's es5/
 * folder that tools/vendor_js.sh keeps outside the deployed site.
 */
'use strict';
const path = require('path');
const [dir, fontURL] = process.argv.slice(2);
if (!dir || !fontURL) {
  process.stderr.write('usage: node mathjax_prerender.js MATHJAX_ES5_DIR FONT_URL < in.json\n');
  process.exit(2);
}
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const formulas = JSON.parse(input);
  require(path.resolve(dir, 'node-main.js')).init({
    loader: {
      paths: { mathjax: path.resolve(dir) },
      load: ['input/tex-full', 'output/chtml', 'adaptors/liteDOM', 'a11y/assistive-mml'],
    },
    chtml: { fontURL: fontURL },
    startup: { typeset: false },
  }).then((MathJax) => {
    const adaptor = MathJax.startup.adaptor;
    const html = formulas.map(([tex, display]) => {
      try {
        // The page's text: 16 px with an x-height of about 0.53 em (the theme's sans
        // serif), so formulas match it as MathJax's matchFontHeight would in the page.
        const node = MathJax.tex2chtml(tex, { display: !!display, em: 16, ex: 8.5, containerWidth: 720, scale: 8.5 / 16 / 0.442 });
        if (adaptor.textContent(node).indexOf('merror') >= 0) return null;
        const out = adaptor.outerHTML(node);
        return out.indexOf('<mjx-merror') >= 0 ? null : out;
      } catch (err) {
        return null;
      }
    });
    const css = adaptor.textContent(MathJax.chtmlStylesheet());
    process.stdout.write(JSON.stringify({ html: html, css: css }));
  }).catch((err) => {
    process.stderr.write('MathJax failed: ' + (err && err.stack || err) + '\n');
    process.exit(1);
  });
});
