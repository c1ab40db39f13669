"""Bound the cost of a missed wake-up in pyzmq's asyncio poller (a build-time workaround).

Jupyter Book executes notebooks with nbclient, which waits for each cell's reply with one
``await socket.poll(timeout)`` on the kernel's shell socket (``timeout`` = the cell timeout
in ``_config.yml``).  pyzmq's asyncio poller watches the socket's edge-triggered file
descriptor; when that wake-up is missed, the poll only returns when its timer fires, and
then finds the reply that had been waiting all along.  The build does not fail: it just
sits idle for the whole cell timeout.  We measured it on this project's machines: one
``make test`` spent 309 s on chapter 2 (normally 10 s), and a loop of nbclient runs with a
40 s timeout saw 2 runs in 25 take 48 s instead of 9 s, with every cell fast according to
the kernel's own timestamps.  (pyzmq#1558 describes the same "returns the event after the
timeout" behaviour.)

The fix here polls in short slices up to the same deadline: each slice ends with a
non-blocking check, so a missed wake-up costs at most one slice, and a genuine timeout is
still reported at the deadline.  Only jupyter_client's *asyncio* channel is patched; the
blocking client that nbval uses polls synchronously and is not affected.

Used twice, from this one copy: by the book build (``tools/zmq_poll.py``, a Sphinx
extension loaded before any notebook executes) and by the grader, which runs each
submission with nbclient too (:func:`sliced_zmq_polls`).
"""

from __future__ import annotations

import contextlib
import time
from queue import Empty

SLICE_S = 0.2  # the most a missed wake-up can cost, per message


async def sliced_get_msg(self, timeout: float | None = None) -> dict:
    """``AsyncZMQSocketChannel.get_msg`` with the wait split into ``SLICE_S`` polls."""
    assert self.socket is not None
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = SLICE_S if deadline is None else max(0.0, deadline - time.monotonic())
        if await self.socket.poll(int(min(SLICE_S, left) * 1000)):
            return await self._recv()
        if deadline is not None and time.monotonic() >= deadline:
            raise Empty


@contextlib.contextmanager
def sliced_zmq_polls():
    """While active, jupyter_client's asyncio channels poll in ``SLICE_S`` slices."""
    from jupyter_client.channels import AsyncZMQSocketChannel

    original = AsyncZMQSocketChannel.get_msg
    AsyncZMQSocketChannel.get_msg = sliced_get_msg
    try:
        yield
    finally:
        AsyncZMQSocketChannel.get_msg = original
