"""The host's end of Neovim's job channel: msgpack-RPC on the asyncio loop the service runs on.

Neovim starts the host with ``jobstart(..., {rpc = true})`` and speaks msgpack-RPC on its pipes
(``:help rpc``): a request ``[0, id, method, params]`` is answered with ``[1, id, error, result]``,
a notification ``[2, method, params]`` with nothing. Lua only ever calls the ``run_bash.*`` methods
(``host.lua``), and the host only ever sends notifications back (``nvim_exec_lua``), so this end is
the whole of what the host needs of the protocol: no greenlets, no API metadata round trip at
start, and none of a client library's imports on the first command's path.

Strings are decoded as pynvim does (``surrogateescape``: bytes that are not UTF-8 survive the round
trip), and maps with other keys than strings are let through (a sparse Lua list arrives as a map
with integer keys), so the options' own validation is what rejects them, with its own message.

Every message is handled on the loop's thread. Every request is answered (Lua waits for it): a
handler that raises, or returns what msgpack cannot carry, answers with the error, and the channel
stays up; a message that is not msgpack-RPC is logged and skipped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

log = logging.getLogger("run_bash")

REQUEST, RESPONSE, NOTIFICATION = 0, 1, 2
READ_CHUNK = 1 << 16

Handler = Callable[..., Any]


class Channel:
    """One msgpack-RPC peer on a pair of pipe descriptors (``rfd`` read, ``wfd`` written).

    ``start`` gives the handlers: ``requests`` answer with their return value, ``notifications``
    answer nothing. ``closed`` resolves when the peer closes its end (Neovim exited or stopped the
    job).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, rfd: int, wfd: int) -> None:
        self.loop = loop
        self._rfd, self._wfd = rfd, wfd
        self._requests: Mapping[str, Handler] = {}
        self._notifications: Mapping[str, Handler] = {}
        self._unpacker = msgpack.Unpacker(unicode_errors="surrogateescape", strict_map_key=False)
        self._packer = msgpack.Packer(unicode_errors="surrogateescape")
        self._pending = bytearray()  # what the pipe did not take yet
        self._thread = threading.get_ident()
        self.closed: asyncio.Future[None] = loop.create_future()

    def start(self, requests: Mapping[str, Handler], notifications: Mapping[str, Handler]) -> None:
        """Serve the handlers from now on (``notify`` works before: it only writes)."""
        self._requests, self._notifications = requests, notifications
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self.loop.add_reader(self._rfd, self._readable)

    # -- sending --------------------------------------------------------------------------------

    def notify(self, method: str, *args: Any) -> None:
        """Send a notification (e.g. ``nvim_exec_lua``); from any thread."""
        self._send([NOTIFICATION, method, list(args)])

    def _send(self, message: list[Any]) -> None:
        if threading.get_ident() != self._thread:
            self.loop.call_soon_threadsafe(self._send, message)
            return
        if self.closed.done():
            return
        self._write(self._packer.pack(message))  # (a value msgpack cannot pack raises here)

    def _write(self, data: bytes) -> None:
        if self._pending:
            self._pending += data
            return
        try:
            n = os.write(self._wfd, data)
        except BlockingIOError:
            n = 0
        except OSError as err:
            self._close(err)
            return
        if n < len(data):
            self._pending += data[n:]
            self.loop.add_writer(self._wfd, self._writable)

    def _writable(self) -> None:
        try:
            n = os.write(self._wfd, self._pending)
        except BlockingIOError:
            return
        except OSError as err:
            self._close(err)
            return
        del self._pending[:n]
        if not self._pending:
            self.loop.remove_writer(self._wfd)

    # -- receiving ------------------------------------------------------------------------------

    def _readable(self) -> None:
        try:
            data = os.read(self._rfd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError as err:
            self._close(err)
            return
        if not data:
            self._close(None)
            return
        self._unpacker.feed(data)
        while not self.closed.done():
            try:
                message = next(self._unpacker)
            except StopIteration:
                return
            except Exception as err:  # not msgpack: nothing after it can be trusted to line up
                log.error("RPC channel: undecodable message (%s); closing", err)
                self._close(err)
                return
            try:
                self._dispatch(message)
            except Exception:  # (one message's failure leaves the next ones to be read)
                log.exception("RPC channel: message not handled: %.200r", message)

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, list) or not message or message[0] not in (0, 1, 2):
            log.warning("RPC channel: not a msgpack-RPC message: %.200r", message)
            return
        kind = message[0]
        if kind == REQUEST and len(message) == 4:
            _, msgid, method, params = message
            handler = self._requests.get(method) if isinstance(method, str) else None
            if handler is None:
                self._send([RESPONSE, msgid, f"no request handler for {method!r}", None])
                return
            try:
                answer = self._packer.pack([RESPONSE, msgid, None, handler(*_params(params))])
            except Exception as err:  # the handler raised, or its answer is not plain data
                log.exception("internal error in request %s", method)
                answer = self._packer.pack([RESPONSE, msgid, f"{method}: {err}", None])
            self._write(answer)  # every request is answered: Lua waits for it
        elif kind == NOTIFICATION and len(message) == 3:
            _, method, params = message
            if method == "nvim_error_event":  # an asynchronous call of ours failed in Neovim
                log.warning("Neovim reported an error: %.500r", params)
                return
            handler = self._notifications.get(method) if isinstance(method, str) else None
            if handler is None:
                log.warning("RPC channel: no notification handler for %.100r", method)
                return
            try:
                handler(*_params(params))
            except Exception:
                log.exception("internal error in notification %s", method)
        else:  # a response (the host sends no requests) or a malformed message
            log.warning("RPC channel: unexpected message: %.200r", message)

    def _close(self, err: BaseException | None) -> None:
        if self.closed.done():
            return
        if err is not None:
            log.info("RPC channel closed: %s", err)
        for fd, remove in (
            (self._rfd, self.loop.remove_reader),
            (self._wfd, self.loop.remove_writer),
        ):
            try:
                remove(fd)
            except (OSError, ValueError):
                pass
        self.closed.set_result(None)


def _params(params: Any) -> list[Any]:
    return params if isinstance(params, list) else [params]
