#!/usr/bin/env bash
# Build the grader's container: a Debian root made by debootstrap, with CPU torch, the
# course package, the grader and the chapters (the masters, solutions included, so that
# every grading run first checks them on this machine). Only package registries are
# needed: the Debian archive, PyPI and PyTorch's CPU wheel index; no image registry, no
# Docker daemon. Run as root (debootstrap and chroot need it):
#
#   sudo grader/container/build.sh /srv/attnlab-grade      # from a clone of the course
#   sudo grader/container/grade.sh /srv/attnlab-grade reports submissions/*.ipynb
#
# Re-running it updates the course and the grader in an existing root (the Debian base
# and the Python packages stay). DEBIAN_MIRROR, DEBIAN_SUITE and TORCH_INDEX override
# where things come from; the host's pip configuration (/etc/pip.conf, /etc/xdg/pip,
# PIP_* variables) is used inside too, and the local package folders it names
# (LOCAL_PIP_DIRS, by default /opt/pypi /opt/pypi-more /opt/wheels where they exist)
# are mounted read-only while pip runs: a machine whose only registry is a local mirror
# builds it as well.
set -euo pipefail
ROOT=${1:?usage: build.sh ROOT}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${DEBIAN_SUITE:-bookworm}  # its python3 is 3.11, the course's pinned Python
TORCH_INDEX=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
V=$(sed -n 's/^torch==//p' "$REPO/requirements.txt" | head -n1)
LOCAL_PIP_DIRS=${LOCAL_PIP_DIRS:-/opt/pypi /opt/pypi-more /opt/wheels}
[ "$(id -u)" = 0 ] || { echo "build.sh: run as root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "build.sh: apt-get install debootstrap" >&2; exit 1; }

if [ ! -x "$ROOT/usr/bin/python3" ]; then
  debootstrap --variant=minbase \
    --include=python3,python3-venv,util-linux,iproute2,ca-certificates \
    "$SUITE" "$ROOT" "$MIRROR"
fi

# The course, the grader and the masters, read-only to everyone but root.
rm -rf "$ROOT/opt/attnlab"
mkdir -p "$ROOT/opt/attnlab"
(cd "$REPO" && tar -cf - pyproject.toml README.md LICENSE requirements.txt \
  src grader chapters $( [ -d student ] && echo student )) | tar -C "$ROOT/opt/attnlab" -xf -
find "$ROOT/opt/attnlab" -name __pycache__ -prune -exec rm -rf {} +

# The host's pip configuration, DNS and certificate authorities (a proxy's own), for
# the build only.
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$ROOT/etc/pip.conf"
[ -d /etc/xdg/pip ] && mkdir -p "$ROOT/etc/xdg" && cp -r /etc/xdg/pip "$ROOT/etc/xdg/"
mounts=""
for d in $LOCAL_PIP_DIRS; do
  [ -d "$d" ] || continue
  mkdir -p "$ROOT$d"
  mounts="$mounts mount --bind $d $ROOT$d && mount -o remount,bind,ro $ROOT$d &&"
done

inside() {  # run a command in the root, with /proc and the local package folders
  unshare --mount --fork sh -c \
    "$mounts mount -t proc proc $ROOT/proc && mount -t tmpfs tmpfs $ROOT/tmp && \
     exec chroot $ROOT \"\$@\"" build "$@"
}
inside /bin/sh -c "[ -x /opt/venv/bin/python ] || python3 -m venv /opt/venv"
PIP=(/opt/venv/bin/python -m pip install -q --disable-pip-version-check --no-cache-dir)
# CPU torch first (PyPI's default wheel pulls the CUDA stack), at the pinned version;
# then the course package and the grader, with requirements.txt's pins as constraints.
inside "${PIP[@]}" --timeout 10 --retries 0 --index-url "$TORCH_INDEX" "torch==$V" \
  || inside "${PIP[@]}" "torch==$V+cpu" \
  || inside "${PIP[@]}" "torch==$V"
grep -E '^[A-Za-z0-9_.-]+==' "$REPO/requirements.txt" > "$ROOT/opt/attnlab/constraints.txt"
inside "${PIP[@]}" -c /opt/attnlab/constraints.txt /opt/attnlab /opt/attnlab/grader
inside /opt/venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
inside /opt/venv/bin/python -c "import attnlab_grade, attnlab.grade; print('grader ok')"
chmod -R a+rX "$ROOT/opt"
echo "built $ROOT: $(inside /opt/venv/bin/python -c 'import attnlab, torch; print("attnlab", attnlab.__version__, "torch", torch.__version__)')"
