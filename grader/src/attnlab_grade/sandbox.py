"""Where a student's kernel runs: a process tree and folders of its own.

Each kernel the grader starts (the submission's own run, and each clean run of an
exercise, :mod:`attnlab.grade.clean`) gets a :class:`Sandbox`:

* a fresh folder, with a fresh ``HOME``, ``IPYTHONDIR``, ``JUPYTER_CONFIG_DIR``,
  ``JUPYTER_DATA_DIR``, ``MPLCONFIGDIR``, ``TMPDIR`` and XDG folders inside it, and the
  kernel's working folder; ``PYTHONNOUSERSITE=1`` (no user site-packages),
  ``PYTHONDONTWRITEBYTECODE=1``, no ``PYTHONSTARTUP``: a startup file a submission
  plants in "its" HOME dies with it;
* when the grader runs as root (CI, a container): **a user id of its own**, never used
  by anything else (the kernel is started through ``setpriv`` with no capabilities and
  ``no_new_privs``). File modes then protect for real: the installed package, the
  other submissions, the reports and every other kernel's folder (mode 700, owned by
  another uid) are read-only or invisible to it, whatever path it writes to. At the
  end every process of that uid is killed (nothing it forked outlives its kernel) and
  its folder removed. ``prlimit`` caps the processes (a fork bomb) and the size of a
  file it may write;
* when the grader is not root, the same folders and environment, but the kernel runs
  with the grader's own uid (file modes cannot protect the grader's files): the report
  says so, and the instructors' page says to grade as root in the container
  (``grader/Dockerfile``), one container per submission.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

NPROC = 512  # processes (threads count too) one sandboxed uid may have
FSIZE = 1 << 30  # bytes: the largest file a kernel may write
UID_BASE, UID_SPAN = 420_000, 400_000  # unused by any account on a normal system

# Variables a submission's kernel never inherits from the grader.
DROP = (
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONBREAKPOINT",
    "JUPYTER_PATH",
    "JUPYTER_RUNTIME_DIR",
    "JUPYTER_PLATFORM_DIRS",
    "IPYTHONDIR",
    "MPLCONFIGDIR",
    "VIRTUAL_ENV_PROMPT",
)


def can_drop_privileges() -> bool:
    """Root, ``setpriv`` on PATH, and a uid of no one's able to run this Python and
    import the course: kernels then run under a uid of their own. Where the course
    lies below a folder other users cannot enter (``mktemp -d`` makes one), the kernels
    run under the grader's uid instead, the reports say so ("own user id"), and this
    says why once on stderr: put the course where other users may read it (or grade in
    the container of grader/Dockerfile) to have the isolation."""
    if not (
        hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("setpriv"))
    ):
        return False
    return _sandbox_uid_can_run_python()


@functools.lru_cache(maxsize=1)
def _sandbox_uid_can_run_python() -> bool:
    uid = UID_BASE + secrets.randbelow(UID_SPAN)
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    probe = [sys.executable, "-c", "import attnlab"]
    try:
        done = subprocess.run(
            cmd + probe, capture_output=True, text=True, timeout=120, cwd="/"
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        reason = str(err)
    else:
        if done.returncode == 0:
            return True
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    print(
        f"attnlab-grade: kernels run under the grader's own uid: a sandbox uid cannot "
        f"run {sys.executable} and import attnlab ({reason}); put the course where "
        "other users may read it, or grade in the container (grader/Dockerfile)",
        file=sys.stderr,
    )
    return False


def _uid_in_use(uid: int) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    return True
    return False


class Sandbox:
    """A folder tree and (as root) a uid for one kernel; :meth:`close` removes both."""

    def __init__(self, isolate: bool | None = None):
        self.isolate = can_drop_privileges() if isolate is None else isolate
        self.root = tempfile.mkdtemp(prefix="attnlab-grade-")
        self.uid: int | None = None
        if self.isolate:
            for _ in range(100):
                uid = UID_BASE + secrets.randbelow(UID_SPAN)
                if not _uid_in_use(uid):
                    self.uid = uid
                    break
            else:  # pragma: no cover
                raise RuntimeError("no free uid for the grader's sandbox")
        self.home = os.path.join(self.root, "home")
        self.work = os.path.join(self.root, "work")
        self.dirs = {
            "HOME": self.home,
            "IPYTHONDIR": os.path.join(self.home, ".ipython"),
            "JUPYTER_CONFIG_DIR": os.path.join(self.home, ".jupyter"),
            "JUPYTER_DATA_DIR": os.path.join(self.home, ".local/share/jupyter"),
            "MPLCONFIGDIR": os.path.join(self.home, ".config/matplotlib"),
            "XDG_CACHE_HOME": os.path.join(self.home, ".cache"),
            "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
            "XDG_DATA_HOME": os.path.join(self.home, ".local/share"),
            "TMPDIR": os.path.join(self.root, "tmp"),
        }
        for d in [self.work, *self.dirs.values()]:
            os.makedirs(d, exist_ok=True)
        # matplotlib's font list, copied from the grader's cache: a fresh HOME would
        # rebuild it in every kernel (seconds each).
        mine = os.environ.get("MPLCONFIGDIR") or os.path.expanduser(
            "~/.cache/matplotlib"
        )
        with contextlib.suppress(OSError):
            for name in os.listdir(mine):
                if name.startswith("fontlist") and name.endswith(".json"):
                    shutil.copy(os.path.join(mine, name), self.dirs["MPLCONFIGDIR"])
        if self.uid is not None:
            os.chmod(self.root, 0o711)  # the uid may enter its folder, list nothing
            for top in (self.home, self.work, self.dirs["TMPDIR"]):
                for dirpath, _dirnames, filenames in os.walk(top):
                    os.chown(dirpath, self.uid, self.uid)
                    os.chmod(dirpath, 0o700)
                    for f in filenames:
                        os.chown(os.path.join(dirpath, f), self.uid, self.uid)

    def env(self, base: dict | None = None) -> dict:
        env = {k: v for k, v in (base or os.environ).items() if k not in DROP}
        env.update(self.dirs)
        env.update(
            PYTHONNOUSERSITE="1",
            PYTHONDONTWRITEBYTECODE="1",
            USER="nobody" if self.uid is not None else env.get("USER", ""),
        )
        return env

    def prefix(self) -> list[str]:
        """The command the kernel's own command line is run under."""
        if self.uid is None:
            return []
        out = []
        if shutil.which("prlimit"):
            out = ["prlimit", f"--nproc={NPROC}", f"--fsize={FSIZE}", "--"]
        return [
            *out,
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.uid}",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]

    def give(self, path: str) -> None:
        """Let the kernel read a file the grader wrote (its connection file)."""
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)

    def pids(self) -> list[int]:
        if self.uid is None:
            return []
        out = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{pid}").st_uid == self.uid:
                        out.append(int(pid))
        return out

    def kill_all(self) -> int:
        """Kill every process of this sandbox's uid (what a kernel forked or left)."""
        killed = 0
        for _ in range(20):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            time.sleep(0.05)
        return killed

    def close(self) -> None:
        self.kill_all()
        shutil.rmtree(self.root, ignore_errors=True)


def kernel_manager_class(sandbox: Sandbox):
    """A jupyter_client kernel manager that starts its kernel inside ``sandbox``."""
    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            cmd = super().format_kernel_cmd(extra_arguments)
            if cmd and os.path.basename(cmd[0]).startswith("python"):
                cmd[0] = sys.executable  # the grader's own interpreter, never PATH's
            sandbox.give(self.connection_file)
            return [*sandbox.prefix(), *cmd]

    return SandboxedKernelManager
