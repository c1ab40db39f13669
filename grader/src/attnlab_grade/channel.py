"""The grader's end of the sentry's connection: signed, numbered, append-only messages.

A listening socket on 127.0.0.1 accepts one connection, from the sentry of the kernel
it was made for; a reader thread checks every line (its HMAC with the kernel's key,
its number one more than the last) and keeps it. A line that fails either check, or
the connection closing early, is itself a violation: only the sentry can sign, and a
message once received cannot be taken back by the notebook.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import socket
import tempfile
import threading
import time

from .policy import WINDOW_BUDGET
from .sentry import nonce, sign

# The channel's budget: a line (one message) and all lines of one kernel. The sentry
# keeps a watched cell's answers under WINDOW_BUDGET; a kernel that sends more than this
# was made to (and the reader stops: its memory is the grader's).
MAX_LINE = 2 * WINDOW_BUDGET
MAX_TOTAL = 16 * WINDOW_BUDGET


class Channel:
    def __init__(self):
        self.key = secrets.token_bytes(32)
        fd, self.key_file = tempfile.mkstemp(prefix="attnlab-grade-")
        with os.fdopen(fd, "wb") as f:
            f.write(self.key)
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        self.messages: list[dict] = []
        self.cond = threading.Condition()
        self.closed = False
        self.expected = 1
        self.control = 0
        self.conn = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def forget_key(self) -> None:
        """Delete the key file (the sentry has read it)."""
        try:
            os.unlink(self.key_file)
        except FileNotFoundError:
            pass

    def _add(self, msg: dict) -> None:
        with self.cond:
            self.messages.append(msg)
            self.cond.notify_all()

    def _read(self) -> None:
        self.server.settimeout(300)
        try:
            self.conn, _ = self.server.accept()
        except OSError:
            self._close()
            return
        finally:
            self.server.close()
        buf = bytearray()
        total = 0
        while True:
            try:
                chunk = self.conn.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            total += len(chunk)
            start = len(buf)
            buf += chunk
            # only the new bytes are searched for the end of a line (a long line
            # arrives in many chunks)
            at = buf.find(b"\n", start)
            while at >= 0:
                self._line(bytes(buf[:at]))
                del buf[: at + 1]
                at = buf.find(b"\n")
            if len(buf) > MAX_LINE or total > MAX_TOTAL:
                self._add(
                    {
                        "kind": "violation",
                        "what": "tamper",
                        "name": "flooded the grader's channel (over "
                        f"{(MAX_LINE if len(buf) > MAX_LINE else MAX_TOTAL) >> 20} MB); "
                        "nothing after it was read",
                    }
                )
                break
        self._close()

    def _line(self, raw: bytes) -> None:
        try:
            body, _, mac = raw.decode().rpartition("\t")
            ok = hmac.compare_digest(mac, sign(self.key, body))
            msg = json.loads(body) if ok else None
        except (UnicodeDecodeError, ValueError):
            ok, msg = False, None
        if not ok or not isinstance(msg, dict):
            self._add(
                {
                    "kind": "violation",
                    "what": "tamper",
                    "name": "wrote to the grader's channel (an unsigned message)",
                }
            )
            return
        if msg.get("n") != self.expected:
            self._add(
                {
                    "kind": "violation",
                    "what": "tamper",
                    "name": f"the grader's channel skipped messages ({msg.get('n')} "
                    f"after {self.expected - 1})",
                }
            )
        self.expected = int(msg.get("n", 0)) + 1
        self._add(msg)

    def _close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def next_nonce(self, op: str) -> str:
        self.control += 1
        return nonce(self.key, self.control, op)

    def wait_hello(self, timeout: float = 120) -> bool:
        return self._wait(lambda m: m.get("kind") == "hello", timeout)[1]

    def wait_ack(self, value: str, timeout: float = 30) -> tuple[list[dict], bool]:
        return self._wait(
            lambda m: m.get("kind") == "ack" and m.get("nonce") == value, timeout
        )

    def _wait(self, done, timeout: float) -> tuple[list[dict], bool]:
        """Messages up to the first one for which ``done`` is true (consumed)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i, m in enumerate(self.messages):
                    if done(m):
                        got, self.messages = (
                            self.messages[: i + 1],
                            self.messages[i + 1 :],
                        )
                        return got, True
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    got, self.messages = self.messages, []
                    return got, False
                self.cond.wait(min(left, 0.2))

    def drain(self) -> list[dict]:
        with self.cond:
            got, self.messages = self.messages, []
            return got

    def close(self) -> None:
        self.forget_key()
        for s in (self.conn, self.server):
            try:
                if s is not None:
                    s.close()
            except OSError:
                pass
