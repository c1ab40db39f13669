"""The sentry's policies as data, and the rules built from them (tested one by one in
tests/test_grade_policy.py, away from any kernel).

* **path rules** (:func:`path_rules`): which files no cell may write (the installed
  packages, the grader, the submissions' and reports' folders), which ``/proc`` files a
  library may read, and which files nothing may read while a student's code runs (the
  checks' and the grader's own source: the answer key);
* **audit events** (the tables below): the events that are tampering whoever raises
  them, those that are when a student's code raises them, the process events (refused
  once a student's cell has run), the path events;
* **code-swap rules** (:func:`code_swap_rule`): who may replace a function's
  ``__code__`` (a library its own function, never the course's or another module's);
* **who calls** (:func:`owner_rule`): the package a trusted file belongs to, so that a
  library calling a forbidden function of another package is known to have been handed
  it.

Why factories of closures and no class: the sentry runs in the student's process, and
assigning a class attribute raises no audit event (CPython 3.11: ``C.x = 1`` is silent,
only a function's ``__code__`` and ``__defaults__`` are audited). A method that looked
up ``self.rule`` could be swapped through the class by a cell; a closure's cells cannot
be reached without frames or ``gc``, which the sentry refuses. So each rule captures what
it needs when it is built (builtins included, as default arguments: the module's globals
are a cell's to change) and reads nothing global when it runs.
"""

from __future__ import annotations

import os

# --------------------------------------------------------------------- audit events

# Tampering whoever raises them (no library needs them while a notebook is graded).
TAMPER_EVENTS = frozenset({"sys.setprofile", "sys.settrace"})
TAMPER_PREFIXES = ("gc.get_",)
# Tampering when a student's code raises them (libraries do, for their own reasons).
# (event, or the prefix of a family of events -> what the report says)
STUDENT_TAMPER_PREFIXES = {"ctypes.": "used ctypes"}
STUDENT_TAMPER_EVENTS = {
    "code.__new__": "built a code object",
    "marshal.loads": "loaded marshalled code",
}
# Refused once a student's cell has run in the kernel, whoever asks: a callable left
# behind (an IPython event callback, a finalizer) runs with no student frame.
PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.spawn",
        "os.exec",
        "pty.spawn",
    }
)
PROCESS_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")
# Path events and the index of their path argument that must not be guarded.
PATH_EVENTS = {
    "os.remove": 0,
    "os.rename": 0,
    "os.rmdir": 0,
    "os.truncate": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.symlink": 1,
    "os.link": 1,
    "os.utime": 0,
    "os.mkdir": 0,
    "shutil.rmtree": 0,
    "shutil.move": 1,
    "shutil.copyfile": 1,
    "shutil.copytree": 1,
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
WRITE_MODES = "wax+"
# /proc files a library may read (the machine; this process's mounts, cgroup, status).
PROC_MACHINE = frozenset({"cpuinfo", "meminfo", "mounts", "stat", "loadavg"})
PROC_OWN = frozenset({"mountinfo", "mounts", "cgroup", "status", "stat", "statm"})
PROC_FILES = frozenset(
    {"/proc/sys/kernel/random/boot_id", "/proc/sys/kernel/random/uuid"}
)
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
# Names the kernel itself rebinds around each cell (stdin forwarding, IPython's
# builtin trap, the last result).
KERNEL_OWNED = frozenset(
    {"input", "raw_input", "exit", "quit", "get_ipython", "display", "_", "__"}
)
# Bytes of answers the sentry sends in one watched cell (a check's cases are small).
WINDOW_BUDGET = 64 << 20


def is_process_event(event: str) -> bool:
    return event in PROCESS_EVENTS or event.startswith(PROCESS_PREFIXES)


# ----------------------------------------------------------------------- path rules


def path_rules(
    guarded: tuple[str, ...],
    key_files: frozenset,
    grader: str,
    pid: int,
    *,
    isinstance_=isinstance,
    str_=str,
    bytes_=bytes,
    len_=len,
    realpath=os.path.realpath,
    readlink=os.readlink,
    fspath=os.fspath,
    exception=Exception,
):
    """``(guarded_path, answer_key, harmless_proc, opens_for_writing)``.

    ``guarded`` are folder prefixes ending in "/" (the packages, the grader, the
    submissions' and reports' folders); ``key_files`` the real paths of the checks'
    source and bytecode; ``grader`` the grader's folder; ``pid`` this process's id."""
    proc_machine, proc_own, proc_files = PROC_MACHINE, PROC_OWN, PROC_FILES
    write_flags, write_modes = WRITE_FLAGS, WRITE_MODES
    own_pid = str_(pid)

    def resolve(path, fd_pipes_are_none=False):
        if isinstance_(path, int):  # a file descriptor: where it points
            raw = readlink(f"/proc/self/fd/{path}")
            if fd_pipes_are_none and not raw.startswith("/"):
                return None  # a pipe, a socket: no file (multiprocessing's)
        else:
            raw = fspath(path)
        if isinstance_(raw, bytes_):
            raw = raw.decode("utf-8", "surrogateescape")
        if not isinstance_(raw, str_):
            raise TypeError("no path")
        return realpath(raw)  # after symlinks, "..", and a leading "//"

    def guarded_path(path) -> bool:
        """May no cell write here? (A path that cannot be resolved: no.)"""
        try:
            p = resolve(path, fd_pipes_are_none=True)
        except exception:
            return True
        if p is None:
            return False
        return (p + "/").startswith(guarded) or p.startswith("/proc/")

    def answer_key(path) -> bool:
        """Is this the checks' or the grader's own source (no reader while a
        student's code runs)?"""
        try:
            p = resolve(path)
        except exception:
            return False
        return p is not None and (p in key_files or p.startswith(grader))

    def harmless_proc(path) -> bool:
        """A read of what libraries read about the machine and their own process
        (mounts and cgroups for CPU counts, memory): never another process's files,
        nor this one's memory, environment or descriptors."""
        try:
            p = resolve(path)
        except exception:
            return False
        if p is None:
            return False
        if p in proc_files:  # a boot id, a fresh uuid (libraries' ids and caches)
            return True
        parts = p.split("/")  # ['', 'proc', ...]
        if len_(parts) == 3:
            return parts[1] == "proc" and parts[2] in proc_machine
        return (
            len_(parts) == 4
            and parts[1] == "proc"
            and parts[2] in (own_pid, "self")
            and parts[3] in proc_own
        )

    def opens_for_writing(mode, flags) -> bool:
        return bool((flags or 0) & write_flags) or any(
            c in str_(mode) for c in write_modes
        )

    return guarded_path, answer_key, harmless_proc, opens_for_writing


# ---------------------------------------------------------------------- who may swap


def code_swap_rule(package: str, grader: str, trusted):
    """``blocked(setter_file, target_file) -> bool``: may code in ``setter_file``
    replace the ``__code__`` of a function defined in ``target_file``? A library may
    swap its own functions' code (networkx's argmap compiles its wrappers lazily);
    nothing may swap the course's or the grader's, nor another file's; a student's
    code may swap nothing."""

    def blocked(setter_file, target_file, isinstance_=isinstance, str_=str) -> bool:
        if not isinstance_(target_file, str_) or not isinstance_(setter_file, str_):
            return True
        ours = target_file.startswith(package) or target_file.startswith(grader)
        return ours or target_file != setter_file or not trusted(setter_file)

    return blocked


# ------------------------------------------------------------------------- who calls


def owner_rule(package: str, roots: tuple[str, ...]):
    """``owner_of(filename) -> str``: the package a trusted file belongs to
    (``attnlab``, ``torch``, ``functools``), by where it lies under the trusted roots
    (the longest root first); any other file is its own owner."""
    longest = tuple(sorted(roots, key=len, reverse=True))

    def owner_of(filename, len_=len) -> str:
        if filename.startswith(package):
            return "attnlab"
        for root in longest:
            if filename.startswith(root):
                return filename[len_(root) :].split("/")[0].split(".")[0]
        return filename

    return owner_of
