#!/usr/bin/env bash
# Install torch into the environment of the Python given as $1: the CPU build unless a
# CUDA build is asked for on purpose. Called by `make venv`.
#
#   Linux (and Windows WSL), x86-64: torch==V+cpu, first from the PyTorch CPU wheel index
#     alone (pip's --isolated: no local configuration), then, if that index cannot be
#     reached, from whatever this machine's pip is configured with (a mirror, a local
#     wheel directory). The +cpu pin means pip never picks the CUDA build from PyPI: if
#     neither source has the CPU wheel, the install stops with a message instead of
#     downloading several GB of nvidia-* packages.
#   Linux on another architecture: torch==V from the CPU index, else as configured.
#   macOS, native Windows: torch==V as configured (PyPI's wheels there are CPU/MPS only).
#   TORCH_VARIANT=cu126 (any tag of download.pytorch.org/whl/): that CUDA build.
set -euo pipefail
PY=$1
# The version: the one pinned in requirements.txt (its only copy), unless TORCH_VERSION says.
V=${TORCH_VERSION:-$(sed -n 's/^torch==//p' "$(dirname "$0")/../requirements.txt")}
[ -n "$V" ] || { echo "install_torch.sh: no torch==... line in requirements.txt" >&2; exit 1; }
VARIANT=${TORCH_VARIANT:-cpu}
INDEX=${TORCH_INDEX:-https://download.pytorch.org/whl}
# --timeout/--retries: an unreachable index must fail in seconds, not minutes.
install=("$PY" -m pip install -q --disable-pip-version-check)
fast=(--timeout 5 --retries 0)

now() { "$PY" -c 'import time; print(time.time())'; }

try() {  # try LABEL ARGS...: run one attempt, say how long it took
  local label=$1 start rc=0
  shift
  start=$(now)
  "${install[@]}" "$@" 2>/dev/null || rc=$?
  "$PY" -c 'import sys, time; print(f"torch: {sys.argv[1]}: {sys.argv[2]} in '\
'{time.time() - float(sys.argv[3]):.1f} s")' "$label" \
    "$([ $rc = 0 ] && echo ok || echo "no wheel found (unreachable, or no such version)")" \
    "$start"
  return $rc
}

if [ "$VARIANT" != cpu ]; then
  echo "torch: installing the $VARIANT build on purpose (TORCH_VARIANT=$VARIANT)"
  try "$VARIANT index" "torch==$V" --index-url "$INDEX/$VARIANT" "${fast[@]}"
  exit
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) spec="torch==$V+cpu" ;;
  Linux-*) spec="torch==$V" ;;
  *)  # macOS, native Windows: the default wheels have no CUDA
    try "as configured" "torch==$V"
    exit ;;
esac

try "PyTorch CPU index" --isolated "$spec" --index-url "$INDEX/cpu" "${fast[@]}" \
  || try "as configured (fallback)" "$spec" \
  || {
    echo "error: no CPU build of torch $V found: $INDEX/cpu was unreachable and this" >&2
    echo "machine's pip has no '$spec' wheel. Make $INDEX reachable, or put the" >&2
    echo "wheel in a directory and set PIP_FIND_LINKS to it. (For the CUDA build on" >&2
    echo "purpose: make venv TORCH_VARIANT=cu126.)" >&2
    exit 1
  }
