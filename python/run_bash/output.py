"""Output capture and presentation: bounded file + head/tail buffers, cleaning, agent-sized views.

Pure apart from the output file it writes and reads.
"""

from __future__ import annotations

import os
import re

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 256 * 1024
READ_PAGE_BYTES = 64 * 1024
HEAD_SHARE = 0.2  # share of the agent's character budget given to the head; the tail gets the rest
# The end of a session's output that goes with the notice of its end.
NOTICE_LINES = 20
NOTICE_CHARS = 2000

# Escape sequences: CSI (ESC [ … final), OSC (ESC ] … BEL or ST), DCS/SOS/PM/APC (ESC P|X|^|_ … ST)
# and other 2-byte escapes. An unterminated string sequence ends at the line's end, never later.
_ESCAPES = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b\n]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
)
# The escapes, 8-bit CSI, and C0/C1 controls but \t \n \r.
_ANSI_RE = re.compile(_ESCAPES + r"|\x9b[0-?]*[ -/]*[@-~]" + r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# The same escapes over raw bytes, and the control bytes left after them (all but \t and \n).
_ESCAPES_BYTES_RE = re.compile(_ESCAPES.encode())
_CONTROL_BYTES = bytes([*range(0, 9), *range(11, 32), 127])


def clean_text(data: bytes | str, max_line_chars: int = 2000) -> str:
    """Decode, strip terminal control sequences, collapse ``\\r`` rewrites and cut very long lines."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = _ANSI_RE.sub("", text)
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    out = []
    for line in lines:
        if "\r" in line:
            # A progress bar rewrites its line with \r: keep what the terminal would show last.
            parts = [p for p in line.split("\r") if p]
            line = parts[-1] if parts else ""
        if len(line) > max_line_chars:
            keep = max_line_chars // 2
            cut = len(line) - 2 * keep
            line = f"{line[:keep]} [… {cut} chars cut …] {line[-keep:]}"
        out.append(line)
    return "\n".join(out)


def strip_controls(data: bytes) -> bytes:
    """``data`` without escape sequences and control bytes (but ``\\t`` and ``\\n``), as bytes.

    The fast form of the cleaning ``clean_text`` does, for text that is searched rather than shown:
    a chunk without ESC costs one scan of C code, never a regular expression over every byte.
    """
    if b"\x1b" in data:
        data = _ESCAPES_BYTES_RE.sub(b"", data)
    return data.translate(None, _CONTROL_BYTES)


class Capture:
    """Write a run's output to its file (up to ``cap`` bytes) and keep bounded head/tail copies."""

    def __init__(self, path: str, cap: int) -> None:
        self.path = path
        self.cap = cap
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.total = 0  # bytes produced by the command
        self.written = 0  # bytes in the file (excluding the marker)
        self.head = bytearray()
        self.tail = bytearray()
        self.capped = False
        self.final: tuple[tuple[int, int], str] | None = None  # set by freeze()

    def feed(self, data: bytes) -> None:
        """Record a chunk of output."""
        self.total += len(data)
        if len(self.head) < HEAD_BYTES:
            self.head += data[: HEAD_BYTES - len(self.head)]
        self.tail += data
        if len(self.tail) > 2 * TAIL_BYTES:
            del self.tail[: len(self.tail) - TAIL_BYTES]
        if self.fd < 0:
            return
        room = self.cap - self.written
        if room > 0:
            chunk = data[:room]
            os.write(self.fd, chunk)
            self.written += len(chunk)
        if len(data) > room and not self.capped:
            self.capped = True
            marker = (
                f"\n[run_bash: output file reached its cap of {self.cap} bytes; "
                "later output is not saved]\n"
            )
            os.write(self.fd, marker.encode())

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def dropped(self) -> int:
        return max(0, self.total - self.written)

    def full_bytes(self) -> tuple[bytes, bool]:
        """Return (bytes, complete): everything when it fits in head+tail, else head and tail."""
        if len(self.tail) == self.total:  # nothing trimmed yet: the tail holds everything
            return bytes(self.tail), True
        return bytes(self.head) + b"\0" + bytes(self.tail[-TAIL_BYTES:]), False

    def freeze(self, max_chars: int, max_line_chars: int = 2000) -> None:
        """The run has ended: keep only its agent text and free the head and tail copies (up to
        ~600 KiB per session otherwise stays in the host for as long as the session is listed)."""
        self.final = ((max_chars, max_line_chars), self.agent_text(max_chars, max_line_chars))
        self.head = bytearray()
        self.tail = bytearray()

    def agent_text(self, max_chars: int, max_line_chars: int = 2000) -> str:
        """The output as an agent sees it: cleaned, at most ``max_chars`` characters."""
        if self.final is not None:
            if self.final[0] == (max_chars, max_line_chars):
                return self.final[1]
            return cap_text(self.final[1], max_chars, self.path)
        data, complete = self.full_bytes()
        if complete:
            return cap_text(clean_text(data, max_line_chars), max_chars, self.path)
        head, _, tail = data.partition(b"\0")
        missing = self.total - len(head) - len(tail)
        text = (
            clean_text(head, max_line_chars)
            + f"\n[… {missing} bytes not kept in memory …]\n"
            + clean_text(tail, max_line_chars)
        )
        return cap_text(text, max_chars, self.path, force_note=True)


def cap_text(text: str, max_chars: int, path: str | None, *, force_note: bool = False) -> str:
    """Keep a head (20 %) and a longer tail (80 %) of ``text`` within ``max_chars``."""
    if len(text) <= max_chars and not force_note:
        return text
    if len(text) <= max_chars:
        return text + (f"\n[full output: {path}]" if path else "")
    where = f"; full output: {path}" if path else ""
    budget = max_chars - 120
    head_n = int(budget * HEAD_SHARE)
    tail_n = budget - head_n
    head = text[:head_n]
    tail = text[-tail_n:]
    # Cut at line boundaries where that loses little.
    nl = head.rfind("\n")
    if nl > head_n * 0.8:
        head = head[: nl + 1]
    nl = tail.find("\n")
    if 0 <= nl < tail_n * 0.2:
        tail = tail[nl + 1 :]
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n[… {cut} characters cut{where} …]\n{tail}"


def last_lines(text: str, n: int = NOTICE_LINES, max_chars: int = NOTICE_CHARS) -> str:
    """The last ``n`` lines of ``text``, at most ``max_chars`` characters (cut at the front)."""
    lines = text.rstrip("\n").split("\n")[-n:] if text.strip() else []
    out = "\n".join(lines)
    if len(out) > max_chars:
        out = "…" + out[-(max_chars - 1) :]
    return out


def read_since(path: str, offset: int, max_bytes: int = READ_PAGE_BYTES) -> tuple[bytes, int, int]:
    """Read at most ``max_bytes`` from ``offset``; return (data, new_offset, bytes_left_unread)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(offset)
            data = f.read(max_bytes)
    except OSError:
        return b"", offset, 0
    if len(data) == max_bytes and offset + len(data) < size:
        data = _whole_page(data)
    new = offset + len(data)
    return data, new, max(0, size - new)


def _whole_page(data: bytes) -> bytes:
    """Cut a page that stops mid-stream at its last newline (when that keeps at least half of it),
    else before a UTF-8 sequence it splits; the rest is returned by the next read."""
    nl = data.rfind(b"\n")
    if nl >= len(data) // 2:
        return data[: nl + 1]
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data  # ASCII ends the page: nothing is split
        if byte >= 0xC0:  # the lead byte of the last sequence
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if back >= need or back == len(data) else data[:-back]
    return data


def tail_lines(
    path: str, n: int, max_bytes: int = READ_PAGE_BYTES, end: int | None = None
) -> tuple[bytes, int]:
    """Return the last ``n`` lines (at most ``max_bytes``) of the file, or of its first ``end``
    bytes, and the file size."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            stop = size if end is None else max(0, min(end, size))
            start = max(0, stop - max_bytes)
            f.seek(start)
            data = f.read(stop - start)
    except OSError:
        return b"", 0
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return b"\n".join(lines[-n:]) + (b"\n" if lines else b""), size
