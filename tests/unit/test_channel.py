"""The host's msgpack-RPC end (``run_bash_host/channel.py``) on real pipes and a real loop; the
peer here is a plain msgpack reader and writer, as Neovim is."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "rplugin" / "python3"))

from run_bash_host import RunBashHost
from run_bash_host.channel import Channel


class Peer:
    """Neovim's side of the job channel: the host reads ``to_host`` and writes ``from_host``."""

    def __init__(self, requests: dict[str, Any], notifications: dict[str, Any]) -> None:
        self.loop = asyncio.new_event_loop()
        host_in, self._to_host = os.pipe()
        self._from_host, host_out = os.pipe()
        self.channel = Channel(self.loop, host_in, host_out)
        self.channel.start(requests, notifications)
        self._unpacker = msgpack.Unpacker(unicode_errors="surrogateescape", strict_map_key=False)
        self.got: list[Any] = []
        self._waiting: tuple[int, asyncio.Future[None]] | None = None
        self.loop.add_reader(self._from_host, self._readable)

    def _readable(self) -> None:
        self._unpacker.feed(os.read(self._from_host, 1 << 16))
        self.got.extend(self._unpacker)
        if self._waiting and len(self.got) >= self._waiting[0]:
            self._waiting[1].set_result(None)
            self._waiting = None

    def send(self, message: Any) -> None:
        os.write(self._to_host, msgpack.packb(message))

    def until(self, n: int, timeout: float = 10) -> list[Any]:
        """Run the loop until the host has sent ``n`` messages in all."""

        if len(self.got) < n:
            self._waiting = (n, self.loop.create_future())
            self.loop.run_until_complete(asyncio.wait_for(self._waiting[1], timeout))
        return self.got

    def close(self) -> None:
        os.close(self._to_host)
        self.loop.run_until_complete(asyncio.wait_for(self.channel.closed, 10))
        self.loop.remove_reader(self._from_host)
        os.close(self._from_host)
        self.loop.close()


@pytest.fixture
def calls() -> list[tuple[str, tuple[Any, ...]]]:
    return []


@pytest.fixture
def peer(calls: list[tuple[str, tuple[Any, ...]]]) -> Iterator[Peer]:
    def echo(*args: Any) -> Any:
        calls.append(("echo", args))
        return {"args": list(args)}

    def boom(*args: Any) -> Any:
        raise ValueError("bad value")

    def note(*args: Any) -> None:
        calls.append(("note", args))

    def odd(*args: Any) -> Any:
        return {"not plain data": {1, 2}}

    p = Peer({"t.echo": echo, "t.boom": boom, "t.odd": odd}, {"t.note": note, "t.boom": boom})
    yield p
    p.close()


def test_requests_are_answered_with_their_result_or_their_error(peer: Peer) -> None:
    peer.send([0, 1, "t.boom", []])
    peer.send([0, 2, "t.missing", []])
    peer.send([0, 4, "t.odd", []])  # an answer msgpack cannot carry: an error, not silence
    peer.send([0, 3, "t.echo", ["a", 1, [2.5, None, True]]])  # answered after the errors
    got = peer.until(4)
    assert got[0][:2] == [1, 1] and "bad value" in got[0][2] and got[0][3] is None
    assert got[1][:2] == [1, 2] and "no request handler for 't.missing'" in got[1][2]
    assert got[2][:2] == [1, 4] and "t.odd" in got[2][2] and got[2][3] is None
    assert got[3] == [1, 3, None, {"args": ["a", 1, [2.5, None, True]]}]


def test_notifications_call_their_handler_and_answer_nothing(peer: Peer, calls: list) -> None:
    peer.send([2, "t.note", ["x"]])
    peer.send([2, "t.boom", []])  # raises: logged, nothing sent, the channel stays up
    peer.send([2, "nvim_error_event", [0, "E5108: an async call failed"]])
    peer.send([2, "t.unknown", []])
    peer.send([0, 7, "t.echo", []])  # the control: the only message the host sends
    got = peer.until(1)
    assert got == [[1, 7, None, {"args": []}]]
    assert calls == [("note", ("x",)), ("echo", ())]


def test_strings_that_are_not_utf8_and_maps_with_integer_keys_pass(peer: Peer) -> None:
    raw = b"caf\xe9 \xff"  # Latin-1 bytes in a msgpack str, as a Lua string may be
    # [0, 1, "t.echo", [<raw as a str>, {1: "a", 3: "b"}]]: the map is a sparse Lua list.
    packed = b"\x94\x00\x01" + msgpack.packb("t.echo") + b"\x92"
    packed += bytes([0xA0 | len(raw)]) + raw + msgpack.packb({1: "a", 3: "b"})
    os.write(peer._to_host, packed)
    got = peer.until(1)
    text, table = got[0][3]["args"]
    assert text.encode("utf-8", "surrogateescape") == raw
    assert table == {1: "a", 3: "b"}


def test_a_large_message_arrives_whole_when_the_pipe_is_full(peer: Peer) -> None:
    big = "x" * (3 << 20)  # far more than a pipe holds: the rest waits for the reader
    peer.channel.notify("nvim_exec_lua", "return ...", [big, 1])
    peer.channel.notify("nvim_exec_lua", "return ...", ["after", 2])
    got = peer.until(2, timeout=30)
    assert got[0] == [2, "nvim_exec_lua", ["return ...", [big, 1]]]
    assert got[1] == [2, "nvim_exec_lua", ["return ...", ["after", 2]]]


def test_a_notification_sent_from_another_thread_goes_out_on_the_loop(peer: Peer) -> None:
    t = threading.Thread(target=peer.channel.notify, args=("nvim_exec_lua", "x", ["thread"]))
    t.start()
    t.join()
    assert peer.until(1) == [[2, "nvim_exec_lua", ["x", ["thread"]]]]


def test_bytes_that_are_not_msgpack_close_the_channel(calls: list) -> None:
    p = Peer({}, {"t.note": lambda *a: calls.append(a)})
    p.send([2, "t.note", ["before"]])  # the control: handled
    os.write(p._to_host, b"\xc1")  # never valid msgpack
    p.send([2, "t.note", ["after"]])
    p.loop.run_until_complete(asyncio.wait_for(p.channel.closed, 10))
    assert calls == [("before",)]
    os.close(p._to_host)
    os.close(p._from_host)
    p.loop.close()


def test_the_host_exports_every_rpc_method_lua_calls() -> None:
    """Every ``run_bash.<method>`` the Lua side requests or notifies has its handler, of that kind
    (a request to a notification handler would never be answered)."""
    root = Path(__file__).resolve().parents[2] / "lua"
    text = "\n".join(p.read_text() for p in root.rglob("*.lua"))
    loop = asyncio.new_event_loop()
    try:
        requests, notifications = RunBashHost(loop, lambda *a: None).handlers()
    finally:
        loop.close()
    notified = set(re.findall(r'rpcnotify,[^"]*"(run_bash\.\w+)"', text))
    requested = set(re.findall(r'rpcrequest,[^"]*"(run_bash\.\w+)"', text))
    assert notified == {"run_bash.hello", "run_bash.decide", "run_bash.unpin"}
    assert notified <= set(notifications) and not notified & set(requests)
    assert requested <= set(requests)
    # host.request(method) sends "run_bash." .. method: every service method has its handler.
    from run_bash.service import RPC

    assert {f"run_bash.{m}" for m in RPC} <= set(requests) | set(notifications)
