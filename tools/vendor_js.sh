#!/usr/bin/env bash
# Vendor the JavaScript the site needs (MathJax, require.js, the Jupyter widget manager)
# from the npm registry into $1/vendor/, so that built pages render math and widgets with
# no network. Not committed: `make book` runs this once; _config.yml serves the folder
# through html_extra_path and points mathjax_path / nb_ipywidgets_js at it.
#
# Also:
# * the widget manager's icon fonts a second time, under chapters/@jupyter-widgets/...:
#   embed-amd.js asks for them relative to the page (chapter pages are in chapters/),
#   not relative to itself, and every widget page got six 404s;
# * axe-core into $1/check/axe.min.js: tools/browser_check.py runs it in every page
#   (accessibility); no page loads it.
set -euo pipefail
out=${1:?usage: vendor_js.sh OUTDIR}
MATHJAX=mathjax@3.2.2
REQUIREJS=requirejs@2.3.8
WIDGETS=@jupyter-widgets/html-manager@1.0.15   # the manager for ipywidgets 8
AXE=axe-core@4.14.1                             # for the browser check only

if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm is needed once to vendor MathJax and the widget manager for the site." >&2
  echo "       Install Node.js (Debian/Ubuntu: apt-get install nodejs npm) and re-run." >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$MATHJAX" "$REQUIREJS" "$WIDGETS" "$AXE" >/dev/null)
for tgz in "$tmp"/*.tgz; do
  d="$tmp/$(basename "$tgz" .tgz)"
  mkdir -p "$d" && tar xzf "$tgz" -C "$d"
done
rm -rf "$out/vendor" "$out/chapters" "$out/check"
mkdir -p "$out/vendor"
cp -r "$tmp"/mathjax-*/package/es5 "$out/vendor/mathjax"
cp "$tmp"/requirejs-*/package/require.js "$out/vendor/require.js"
dist=$(echo "$tmp"/jupyter-widgets-html-manager-*/package/dist)
# Only embed-amd.js is loaded (_config.yml); embed.js, libembed-amd.js and the source
# maps (~12 MB) are not.
cp $dist/embed-amd.js "$out/vendor/"
fonts=$(cd $dist && ls | grep -E '\.(woff2?|ttf|eot|svg)$' || true)
mkdir -p "$out/chapters/@jupyter-widgets/html-manager/dist"
for f in $fonts; do
  cp "$dist/$f" "$out/vendor/"
  cp "$dist/$f" "$out/chapters/@jupyter-widgets/html-manager/dist/"
done
mkdir -p "$out/check"
cp "$tmp"/axe-core-*/package/axe.min.js "$out/check/axe.min.js"
echo "vendored $MATHJAX, $REQUIREJS, $WIDGETS, $AXE into $out ($(du -sh "$out" | cut -f1))"
