#!/usr/bin/env bash
# Vendor the JavaScript the site needs (MathJax, require.js, the Jupyter widget manager)
# from the npm registry into $1/vendor/, so that built pages render math and widgets with
# no network. Not committed: `make book` runs this once; _config.yml serves the folder
# through html_extra_path and points mathjax_path / nb_ipywidgets_js at it.
set -euo pipefail
out=${1:?usage: vendor_js.sh OUTDIR}
MATHJAX=mathjax@3.2.2
REQUIREJS=requirejs@2.3.8
WIDGETS=@jupyter-widgets/html-manager@1.0.15   # the manager for ipywidgets 8

if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm is needed once to vendor MathJax and the widget manager for the site." >&2
  echo "       Install Node.js (Debian/Ubuntu: apt-get install nodejs npm) and re-run." >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$MATHJAX" "$REQUIREJS" "$WIDGETS" >/dev/null)
for tgz in "$tmp"/*.tgz; do
  d="$tmp/$(basename "$tgz" .tgz)"
  mkdir -p "$d" && tar xzf "$tgz" -C "$d"
done
rm -rf "$out/vendor"
mkdir -p "$out/vendor"
cp -r "$tmp"/mathjax-*/package/es5 "$out/vendor/mathjax"
cp "$tmp"/requirejs-*/package/require.js "$out/vendor/require.js"
cp -r "$tmp"/jupyter-widgets-html-manager-*/package/dist/. "$out/vendor/"   # bundles + fonts
echo "vendored $MATHJAX, $REQUIREJS, $WIDGETS into $out/vendor ($(du -sh "$out/vendor" | cut -f1))"
