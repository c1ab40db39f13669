"""tools/zmq_poll.py: the build's guard against pyzmq's missed asyncio wake-ups."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from queue import Empty

import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session

from tools import zmq_poll

ROOT = Path(__file__).resolve().parents[1]


REPLY = {"msg_type": "execute_reply"}


class SleepsThroughWakeup:
    """A socket with the bug: a message is waiting, but poll() only notices it when its
    timer fires (and then reports it, as pyzmq's poller does)."""

    def __init__(self):
        self.polls_ms = []

    async def poll(self, timeout_ms):
        self.polls_ms.append(timeout_ms)
        if timeout_ms:
            await asyncio.sleep(timeout_ms / 1000)
        return 1


class FakeChannel:
    def __init__(self, socket):
        self.socket = socket

    async def _recv(self):
        return REPLY


def _timed(coro):
    start = time.monotonic()
    result = asyncio.run(coro)
    return result, time.monotonic() - start


def test_missed_wakeup_costs_the_whole_timeout_without_the_fix():
    # The behaviour being guarded against, so this file fails if the premise changes.
    channel = FakeChannel(SleepsThroughWakeup())
    msg, took = _timed(zmq_poll._original_get_msg(channel, timeout=0.8))
    assert msg == REPLY and took >= 0.75


def test_missed_wakeup_costs_one_slice_with_the_fix():
    channel = FakeChannel(SleepsThroughWakeup())
    msg, took = _timed(zmq_poll.sliced_get_msg(channel, timeout=30))
    assert msg == REPLY
    assert took < 1.0, f"waited {took:.2f} s for a message that was already there"
    assert channel.socket.polls_ms == [int(zmq_poll.SLICE_S * 1000)]


def _real_channel():
    """An AsyncZMQSocketChannel on a TCP pair, and a sender for kernel messages."""
    session = Session(key=b"")
    sender = zmq.Context.instance().socket(zmq.DEALER)
    port = sender.bind_to_random_port("tcp://127.0.0.1")
    receiver = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    receiver.connect(f"tcp://127.0.0.1:{port}")
    channel = AsyncZMQSocketChannel(receiver, session)

    def send(after_s):
        time.sleep(after_s)
        session.send(sender, "execute_reply", {"status": "ok"})

    return channel, send, sender


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_real_socket_receives_a_late_reply(timeout):
    channel, send, sender = _real_channel()
    try:
        threading.Thread(target=send, args=(0.5,), daemon=True).start()
        msg, took = _timed(zmq_poll.sliced_get_msg(channel, timeout=timeout))
        assert msg["msg_type"] == "execute_reply"
        assert msg["content"] == {"status": "ok"}
        assert 0.4 < took < 3.0
    finally:
        channel.close()
        sender.close(linger=0)


@pytest.mark.parametrize("timeout", [0, 0.5])
def test_real_socket_still_times_out_at_the_deadline(timeout):
    channel, _, sender = _real_channel()
    try:
        start = time.monotonic()
        with pytest.raises(Empty):
            asyncio.run(zmq_poll.sliced_get_msg(channel, timeout=timeout))
        took = time.monotonic() - start
        assert timeout - 0.05 <= took < timeout + 0.5
    finally:
        channel.close()
        sender.close(linger=0)


def test_setup_installs_the_patch_and_the_book_loads_it(monkeypatch):
    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", zmq_poll._original_get_msg)
    zmq_poll.setup(app=None)
    assert AsyncZMQSocketChannel.get_msg is zmq_poll.sliced_get_msg
    config = (ROOT / "_config.yml").read_text()
    assert "tools.zmq_poll" in config
