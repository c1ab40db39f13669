"""Run a notebook's cells one by one in a Jupyter kernel (nbclient), surviving a cell
that loops forever (interrupted) or kills the kernel (a new kernel re-runs the cells
that had succeeded)."""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# The first cell every kernel runs, before any of the notebook's: the grader's sentry.
# Before it: where the sandbox uid may not execute the interpreter's path (a Python
# under a folder only root may enter: the kernel itself starts, its children cannot),
# multiprocessing's children (chapter 14's ring attention spawns two) use the same
# Python version from PATH, which the uid can run.
INSTALL = """\
import multiprocessing as _attnlab_mp, os as _attnlab_os, shutil as _attnlab_sh
import sys as _attnlab_sys
if not _attnlab_os.access(_attnlab_sys.executable, _attnlab_os.X_OK):
    _attnlab_alt = _attnlab_sh.which("python%d.%d" % _attnlab_sys.version_info[:2])
    if _attnlab_alt:
        _attnlab_mp.set_executable(_attnlab_alt)
    del _attnlab_alt
del _attnlab_mp, _attnlab_os, _attnlab_sh, _attnlab_sys
import attnlab_grade.sentry as _attnlab_sentry
_attnlab_sentry.install({port}, {key!r}, {protected!r}, {forbid!r})
del _attnlab_sentry"""
# A control message to the sentry (begin/end around a student's cell, sync after the
# chapter's own); the nonce is derived from the key, which the notebook never sees.
CONTROL = '__import__("sys").audit("attnlab.grader", {op!r}, {nonce!r}, {check!r}, {checks!r})'
PROBE_TIMEOUT = 20  # seconds an interrupted kernel gets to answer before a restart
CELL_OUTPUT_CAP = 1 << 20  # characters of output kept per cell (the rest is dropped)
NOTEBOOK_OUTPUT_CAP = 16 << 20  # characters of output kept per notebook


def safe_client_class():
    """nbclient's client, hardened against what a kernel sends back: output is capped
    per cell and per notebook, and a malformed message is dropped (counted), never
    raised into the grader."""
    import nbclient
    from nbclient.exceptions import CellExecutionComplete

    class SafeClient(nbclient.NotebookClient):
        kept = 0
        dropped = 0
        malformed = 0

        def process_message(self, msg, cell, cell_index):
            try:
                kind = msg.get("msg_type")
                content = msg.get("content")
                if not isinstance(content, dict) or not isinstance(
                    msg.get("parent_header"), dict
                ):
                    self.malformed += 1
                    return None
                if kind in ("stream", "display_data", "execute_result", "error"):
                    size = len(str(content.get("text", ""))) + len(
                        str(content.get("data", ""))
                    )
                    if kind == "error":
                        size = min(size, 4096)
                    per_cell = self.__dict__.setdefault("_per_cell", {})
                    seen = per_cell.get(cell_index, 0) + size
                    per_cell[cell_index] = seen
                    self.kept += size
                    if kind != "error" and (
                        seen > CELL_OUTPUT_CAP or self.kept > NOTEBOOK_OUTPUT_CAP
                    ):
                        self.dropped += size
                        return None
                return super().process_message(msg, cell, cell_index)
            except CellExecutionComplete:
                raise
            except Exception:  # a malformed IOPub message: the kernel sent it
                self.malformed += 1
                return None

    return SafeClient


@dataclass
class CellRun:
    status: str  # "ok", "error", "timeout", "dead", "not run"
    detail: str = ""  # "ZeroDivisionError: division by zero", ...
    seconds: float = 0.0
    text: str = ""  # what the cell printed
    events: list = field(default_factory=list)  # the sentry's violations in this cell
    answers: list = field(default_factory=list)  # answers recorded in this cell


def _printed(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "".join(parts) if all(isinstance(p, str) for p in parts) else ""


class Runner:
    """Executes cells one by one in a kernel, restarting it when it dies or hangs."""

    def __init__(
        self,
        nb,
        path: Path,
        kernel: str,
        cell_timeout: float,
        limit: float,
        protected: list[str] = (),
        forbid: dict | None = None,
        sandbox=None,
    ):
        from .sandbox import Sandbox, kernel_manager_class

        self.sandbox = sandbox if sandbox is not None else Sandbox()
        self.own_sandbox = sandbox is None
        path = Path(self.sandbox.work) / path.name
        self.nb = nb
        self.protected = [str(p) for p in protected]
        self.forbid = {k: list(v) for k, v in (forbid or {}).items()}
        self.channel = None
        self.broken = ""  # why the sentry stopped answering, once it did
        self.cell_timeout = cell_timeout
        self.deadline = time.monotonic() + limit
        self.client = safe_client_class()(
            nb,
            kernel_manager_class=kernel_manager_class(self.sandbox),
            timeout=int(cell_timeout),
            kernel_name=kernel,
            allow_errors=False,
            interrupt_on_timeout=True,  # then _exec's error_on_timeout is the reply
            resources={"metadata": {"path": str(path.parent)}},
        )
        # No bytecode written by the kernel: the sentry then refuses every write into
        # the installed packages, __pycache__ included (a forged .pyc would be loaded
        # by the next notebook's kernel).
        self.env = {**self.sandbox.env(os.environ), "ATTNLAB_STRICT": "0"}
        # The kernel imports the sentry from this very copy of the grader (installed
        # or, in a clone, beside the course's src/).
        here = str(Path(__file__).resolve().parents[1])
        paths = [here, *self.env.get("PYTHONPATH", "").split(os.pathsep)]
        self.env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
        self.replay: list[tuple[int, bool]] = []  # cells that succeeded: re-run
        # after a restart (with whether they are a student's)
        self.notes: list[str] = []
        self.alive = False

    def start(self) -> None:
        self.client.km = self.client.create_kernel_manager()
        # The kernel process's own log (start-up chatter) is not the student's
        # output, which comes back through the cells; keep it off the report.
        self.client.start_new_kernel(env=self.env, stderr=subprocess.DEVNULL)
        self.client.start_new_kernel_client()
        self.alive = True
        self._install()
        for i, student in self.replay:
            cell = copy.deepcopy(self.nb.cells[i])
            if student:
                self._control("begin", False, [])
            run = self._scratch(cell, self.cell_timeout)
            self._control("end" if student else "sync", False, [])
            if run.status != "ok":
                self.notes.append(
                    f"after a kernel restart, re-running cell {i} gave {run.status}: "
                    f"{run.detail}"
                )

    def _install(self) -> None:
        from .channel import Channel

        if self.channel is not None:
            self.channel.close()
        self.channel = ch = Channel()
        self.sandbox.give(ch.key_file)
        code = INSTALL.format(
            port=ch.port, key=ch.key_file, protected=self.protected, forbid=self.forbid
        )
        run = self._scratch(nbformat_cell(code), self.cell_timeout)
        ok = run.status == "ok" and ch.wait_hello(60)
        ch.forget_key()
        if not ok:
            raise RuntimeError(f"the grader's sentry did not start: {run.detail}")

    def _control(self, op: str, check: bool, checks: list[str]) -> tuple[list, bool]:
        """Send one control message to the sentry; its messages since the last one."""
        ch = self.channel
        if ch is None or not self.alive:
            return [], False
        value = ch.next_nonce(op)
        code = CONTROL.format(op=op, nonce=value, check=check, checks=list(checks))
        run = self._scratch(nbformat_cell(code), PROBE_TIMEOUT)
        if run.status == "dead":
            self.alive = False
        msgs, ok = ch.wait_ack(
            value, timeout=PROBE_TIMEOUT if run.status == "ok" else 1
        )
        return msgs, ok

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        with contextlib.suppress(Exception):
            self.client._cleanup_kernel()
        self.client.km = self.client.kc = None
        self.alive = False
        # Whatever the kernel forked or left behind dies with it.
        self.sandbox.kill_all()

    def close(self) -> None:
        """Stop the kernel and, if this runner made its sandbox, remove it."""
        self.stop()
        if self.client.dropped:
            self.notes.append(
                f"output capped: {self.client.dropped} characters of output dropped"
            )
        if self.client.malformed:
            self.notes.append(
                f"{self.client.malformed} malformed message(s) from the kernel ignored"
            )
        if self.own_sandbox:
            self.sandbox.close()

    def _exec(self, cell, index: int, timeout: float | None = None) -> CellRun:
        from nbclient.exceptions import CellExecutionError, DeadKernelError

        left = self.deadline - time.monotonic()
        if left <= 0:
            return CellRun("not run", "the notebook's time limit ran out")
        self.client.timeout = limit = max(
            1, int(min(timeout or self.cell_timeout, left))
        )
        self.client.error_on_timeout = {
            "ename": "CellTimeoutError",
            "evalue": f"ran past its {limit} s limit and was interrupted",
            "traceback": [],
        }
        start = time.monotonic()
        try:
            self.client.execute_cell(cell, index)
        except CellExecutionError as err:
            took = time.monotonic() - start
            if err.ename == "CellTimeoutError":
                return CellRun("timeout", err.evalue, took, _printed(cell))
            return CellRun("error", f"{err.ename}: {err.evalue}", took, _printed(cell))
        except DeadKernelError:
            self.alive = False
            return CellRun("dead", "killed the kernel", time.monotonic() - start)
        return CellRun("ok", "", time.monotonic() - start, _printed(cell))

    def run(
        self,
        index: int,
        student: bool = False,
        checks: list[str] | None = None,
        timeout=None,
    ) -> CellRun:
        """Run notebook cell ``index``: a student's cell (``student``) or a published
        check cell (``checks``: the checks it calls) runs under the sentry's profile."""
        if not self.alive:
            self.start()
        watched = student or checks is not None
        msgs: list = []
        if watched:
            got, ok = self._control("begin", checks is not None, checks or [])
            msgs += got
            if not ok:
                self._monitor_lost(index, "before")
        run = self._exec(self.nb.cells[index], index, timeout)
        if run.status == "timeout":
            # The kernel was interrupted; make sure it answers again, else restart.
            if self._hidden("pass", PROBE_TIMEOUT).status != "ok":
                self.notes.append(f"cell {index}: the kernel hung; restarted it")
                self.stop()
        elif run.status == "dead":
            self.notes.append(f"cell {index}: the kernel died; restarted it")
            self.stop()
        if self.alive:
            got, ok = self._control("end" if watched else "sync", False, [])
            msgs += got
            if not ok:
                self._monitor_lost(index, "after")
        elif self.channel is not None:
            msgs += self.channel.drain()
        run.events = [m for m in msgs if m.get("kind") == "violation"]
        if self.broken:
            run.events.append(
                {"kind": "violation", "what": "monitor", "name": self.broken}
            )
        run.answers = [m for m in msgs if m.get("kind") == "answer"]
        if run.status == "ok":
            self.replay.append((index, watched))
        return run

    def _monitor_lost(self, index: int, when: str) -> None:
        if not self.broken:
            self.broken = (
                f"the grader's monitor stopped answering {when} cell {index} (the "
                "notebook replaced or broke the interpreter's import or audit "
                "functions); nothing after it can be trusted"
            )

    def _hidden(self, code: str, timeout: float | None = None) -> CellRun:
        run = self._scratch(nbformat_cell(code), timeout)
        if run.status == "dead":
            self.stop()
        return run

    def _scratch(self, cell, timeout: float | None) -> CellRun:
        """Run a cell that is not the notebook's (nbclient stores a cell it ran at its
        index in ``client.nb``, so it gets a one-cell notebook of its own)."""
        import nbformat

        nb, self.client.nb = self.client.nb, nbformat.v4.new_notebook(cells=[cell])
        try:
            return self._exec(cell, 0, timeout or self.cell_timeout)
        finally:
            self.client.nb = nb


def nbformat_cell(code: str):
    import nbformat

    return nbformat.v4.new_code_cell(code)
