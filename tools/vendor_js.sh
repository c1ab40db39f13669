#!/usr/bin/env bash
# Vendor the JavaScript the site needs (MathJax) from the npm registry into $1/vendor/,
# so that built pages render math with no network. Not committed: `make book` runs this
# once; _config.yml serves the folder through html_extra_path and points mathjax_path
# at it. Only what a page can request is deployed: the combined tex-mml-chtml.js, its
# woff2 fonts, the TeX extensions it autoloads, and the accessibility parts its menu
# loads on demand (a11y, sre, ui); not the 17 MB of other builds. When the site build
# typesets every formula itself (tools/site_polish.py, with the copy in $1.node/), it
# deletes all but the fonts from the built site.
#
# The ipywidgets runtime (embed-amd.js, require.js) is not deployed: the website shows
# embedded widgets as static snapshots (tools/site_polish.py); the notebook editions
# keep their live widgets.
#
# Also axe-core into $1/check/axe.min.js: tools/browser_check.py runs it in every page
# (accessibility); no page loads it.
set -euo pipefail
out=${1:?usage: vendor_js.sh OUTDIR}
MATHJAX=mathjax@3.2.2
AXE=axe-core@4.14.1                             # for the browser check only

if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm is needed once to vendor MathJax for the site." >&2
  echo "       Install Node.js (Debian/Ubuntu: apt-get install nodejs npm) and re-run." >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$MATHJAX" "$AXE" >/dev/null)
for tgz in "$tmp"/*.tgz; do
  d="$tmp/$(basename "$tgz" .tgz)"
  mkdir -p "$d" && tar xzf "$tgz" -C "$d"
done
rm -rf "$out/vendor" "$out/chapters" "$out/check"
es5=$(echo "$tmp"/mathjax-*/package/es5)
mj="$out/vendor/mathjax"
mkdir -p "$mj/output/chtml/fonts" "$mj/input/tex"
cp "$es5/tex-mml-chtml.js" "$mj/"
cp -r "$es5/output/chtml/fonts/woff-v2" "$mj/output/chtml/fonts/"
cp -r "$es5/input/tex/extensions" "$mj/input/tex/"
cp -r "$es5/a11y" "$es5/sre" "$es5/ui" "$mj/"
# The whole es5/ folder, outside the site, for typesetting at build time in Node.js
# (tools/mathjax_prerender.js, called by tools/site_polish.py): pages then load a
# stylesheet and the fonts, not MathJax.
rm -rf "$out.node"
mkdir -p "$out.node"
cp -r "$es5" "$out.node/mathjax-es5"
mkdir -p "$out/check"
cp "$tmp"/axe-core-*/package/axe.min.js "$out/check/axe.min.js"
echo "vendored $MATHJAX, $AXE into $out ($(du -sh "$out" | cut -f1))"
