"""Run a notebook's cells one by one in a Jupyter kernel (nbclient), surviving a cell
that loops forever (interrupted) or kills the kernel (a new kernel re-runs the cells
that had succeeded)."""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# Run in the kernel before each published check: strict mode on, and attnlab.check
# imported afresh from disk (a student's cell may have replaced or patched it).
PRELUDE = """\
def _attnlab_grader_prelude():
    global attnlab
    import importlib, os, sys
    os.environ["ATTNLAB_STRICT"] = "1"
    for name in [m for m in sys.modules if m.split(".")[:2] == ["attnlab", "check"]]:
        del sys.modules[name]
    attnlab = importlib.import_module("attnlab")
    importlib.import_module("attnlab.check")
_attnlab_grader_prelude()
del _attnlab_grader_prelude"""
# ... and after it: the student's own cells run as they ran for the student.
POSTLUDE = 'import os as _os\n_os.environ["ATTNLAB_STRICT"] = "0"\ndel _os'
PROBE_TIMEOUT = 20  # seconds an interrupted kernel gets to answer before a restart


@dataclass
class CellRun:
    status: str  # "ok", "error", "timeout", "dead", "not run"
    detail: str = ""  # "ZeroDivisionError: division by zero", ...
    seconds: float = 0.0
    text: str = ""  # what the cell printed


def _printed(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "".join(parts) if all(isinstance(p, str) for p in parts) else ""


@contextlib.contextmanager
def sliced_zmq_polls(slice_s: float = 0.2):
    """Poll the kernel's sockets in short slices while grading.

    The same workaround as the book build's ``tools/zmq_poll.py``: a missed pyzmq
    asyncio wake-up would otherwise make a fast cell wait for its whole time limit.
    """
    from queue import Empty

    from jupyter_client.channels import AsyncZMQSocketChannel

    original = AsyncZMQSocketChannel.get_msg

    async def get_msg(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = (
                slice_s if deadline is None else max(0.0, deadline - time.monotonic())
            )
            if await self.socket.poll(int(min(slice_s, left) * 1000)):
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty

    AsyncZMQSocketChannel.get_msg = get_msg
    try:
        yield
    finally:
        AsyncZMQSocketChannel.get_msg = original


class Runner:
    """Executes cells one by one in a kernel, restarting it when it dies or hangs."""

    def __init__(self, nb, path: Path, kernel: str, cell_timeout: float, limit: float):
        import nbclient

        self.nb = nb
        self.cell_timeout = cell_timeout
        self.deadline = time.monotonic() + limit
        self.client = nbclient.NotebookClient(
            nb,
            timeout=int(cell_timeout),
            kernel_name=kernel,
            allow_errors=False,
            interrupt_on_timeout=True,  # then _exec's error_on_timeout is the reply
            resources={"metadata": {"path": str(path.parent)}},
        )
        self.env = {**os.environ, "ATTNLAB_STRICT": "0"}
        self.replay: list[int] = []  # cells that succeeded: re-run after a restart
        self.notes: list[str] = []
        self.alive = False

    def start(self) -> None:
        self.client.km = self.client.create_kernel_manager()
        # The kernel process's own log (start-up chatter) is not the student's
        # output, which comes back through the cells; keep it off the report.
        self.client.start_new_kernel(env=self.env, stderr=subprocess.DEVNULL)
        self.client.start_new_kernel_client()
        self.alive = True
        for i in self.replay:
            run = self._scratch(copy.deepcopy(self.nb.cells[i]), self.cell_timeout)
            if run.status != "ok":
                self.notes.append(
                    f"after a kernel restart, re-running cell {i} gave {run.status}: "
                    f"{run.detail}"
                )

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.client._cleanup_kernel()
        self.client.km = self.client.kc = None
        self.alive = False

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

    def run(self, index: int, strict: bool = False, timeout=None) -> CellRun:
        """Run notebook cell ``index`` (a published check when ``strict``)."""
        if not self.alive:
            self.start()
        cell = self.nb.cells[index]
        if strict:
            self._hidden(PRELUDE)
        run = self._exec(cell, index, timeout)
        if run.status == "timeout":
            # The kernel was interrupted; make sure it answers again, else restart.
            if self._hidden("pass", PROBE_TIMEOUT).status != "ok":
                self.notes.append(f"cell {index}: the kernel hung; restarted it")
                self.stop()
        elif run.status == "dead":
            self.notes.append(f"cell {index}: the kernel died; restarted it")
            self.stop()
        if strict and self.alive:
            self._hidden(POSTLUDE)
        if run.status == "ok" and not strict:
            self.replay.append(index)
        return run

    def _hidden(self, code: str, timeout: float | None = None) -> CellRun:
        import nbformat

        run = self._scratch(nbformat.v4.new_code_cell(code), timeout)
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
