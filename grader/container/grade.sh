#!/usr/bin/env bash
# Grade notebooks inside the root that build.sh made, without network:
#
#   sudo grader/container/grade.sh ROOT OUT SUBMISSIONS... [-- GRADER OPTIONS]
#
# The grader runs in namespaces of its own (network: only a loopback, for its kernels;
# PID; mounts) chrooted into ROOT, as root there only to give every kernel a user id of
# its own (setpriv, prlimit). The submissions are mounted read-only at /in, OUT at /out
# (a report per notebook and grades.csv). Before any student is graded, the masters of
# the chapters in the class are graded on this machine (remembered in the root, per
# commit): a chapter whose own code does not run here stops the run (exit 3).
set -euo pipefail
ROOT=${1:?usage: grade.sh ROOT OUT SUBMISSIONS... [-- OPTIONS]}
OUT=${2:?usage: grade.sh ROOT OUT SUBMISSIONS... [-- OPTIONS]}
shift 2
subs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do subs+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#subs[@]} -gt 0 ] || { echo "grade.sh: no submissions" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "grade.sh: run as root (namespaces, chroot)" >&2; exit 1; }
IN=$(mktemp -d /tmp/attnlab-in-XXXXXX)
trap 'rm -rf "$IN"' EXIT
for s in "${subs[@]}"; do
  cp -- "$s" "$IN/$(basename "$s")"
done
chmod -R a+rX "$IN"
mkdir -p "$OUT" "$ROOT/in" "$ROOT/out"
rm -f "$ROOT/etc/resolv.conf"  # nothing to resolve: there is no network inside
unshare --net --pid --mount --fork sh -c '
  set -e
  root=$0; in=$1; out=$2; shift 3
  mount --bind "$in" "$root/in" && mount -o remount,bind,ro "$root/in"
  mount --bind "$out" "$root/out"
  mount -t proc proc "$root/proc"
  mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
  mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm" 2>/dev/null || true
  exec chroot "$root" /bin/sh -c "ip link set lo up && cd /out && \
    exec env OMP_NUM_THREADS=\${OMP_NUM_THREADS:-1} PYTHONDONTWRITEBYTECODE=1 \
    /opt/venv/bin/python -m attnlab.grade /in --master /opt/attnlab/chapters \
    --out /out --csv /out/grades.csv \"\$@\"" grade "$@"
' "$ROOT" "$IN" "$(cd "$OUT" && pwd)" -- "$@"
