"""Output capture and presentation: bounded file + head/tail buffers, cleaning, agent-sized views.

Pure apart from the output file it writes and reads.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable

from run_bash.ahead import MadeAhead

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 256 * 1024
READ_PAGE_BYTES = 64 * 1024
HEAD_SHARE = 0.2  # share of the agent's character budget given to the head; the tail gets the rest
# The end of a session's output that goes with the notice of its end.
NOTICE_LINES = 20
NOTICE_CHARS = 2000
# Disk space a running command's output file keeps allocated ahead of what it has written, so a run
# that fills the disk (its temp dir is stopped at its cap, but only when the host next looks) cannot
# cut another run's output short meanwhile. Renewed when half is used; returned when the file closes.
RESERVE_BYTES = 4 * 1024 * 1024
_FALLOC_FL_KEEP_SIZE = 0x01


_FALLOCATE: list[Callable[[int, int, int, int], int] | None] = []
_RELEASING = threading.Lock()  # ``Capture.release``


def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """libc's fallocate(2) (the libc this process already has loaded), bound on first use."""
    if not _FALLOCATE:
        import ctypes

        try:
            fn = ctypes.CDLL(None, use_errno=True).fallocate
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _FALLOCATE.append(fn)
    return _FALLOCATE[0]


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


# Where a line was rewritten with \r and both versions are kept (the overwritten one is not
# progress output): the terminal would have hidden the text before it.
CR_MARK = "\u240d"  # ␍

# Progress tokens: what changes from one update of a progress line to the next. A rewrite is
# collapsed only when the two versions are equal once these are masked, so no word, and no number
# outside such a token, can disappear with it.
_NUM = r"\d+(?:[.,]\d+)?"
_UNIT = r"(?:[kKMGTP]i?[Bb]?|B|bytes?)"
_PROGRESS_TOKEN = re.compile(
    rf"{_NUM}\s?%"  # 45%
    rf"|{_NUM}\s?{_UNIT}?\s?/\s?{_NUM}\s?{_UNIT}?"  # 45/100, 1.2/5.0 MB
    rf"|{_NUM}\s?(?:{_UNIT}|it|files?|objects?)?/s\b"  # 3.1 MB/s, 44.36it/s
    rf"|{_NUM}\s?{_UNIT}\b"  # 1024k, 460 KiB
    r"|(?:\d+:)?\d{1,2}:\d{2}(?:\.\d+)?|--:--(?::--)?"  # 00:01, 0:00:02, --:--:--
    r"|\|[\u2580-\u259f\s]*\|"  # |████▌     | (tqdm; empty at 0 %)
    r"|[\u2580-\u259f\u25a0-\u25a1\u2500-\u2501\u2550\u2800-\u28ff]+"  # blocks, braille
    r"|\[[#=>\-.·*\s]*\]|[#=]{2,}>?|={0,}>(?=\s|\]|$)"  # [=====>   ], ####, ==>
)
_BARE_NUMBER = re.compile(_NUM)
_SPINNER = frozenset("|/-\\")
_LETTER = re.compile(r"[^\W\d_]")


def _progress_shape(segment: str) -> str | None:
    """The segment with its progress tokens masked (whitespace runs as one space), or None when
    it has no progress token (then it is not progress output)."""
    masked, found = _PROGRESS_TOKEN.subn("\0", segment)
    if not found:
        return None
    if not _LETTER.search(masked):
        # A pure meter (curl's columns): its bare numbers are part of the meter too.
        masked = _BARE_NUMBER.sub("\0", masked)
    return " ".join(masked.split())


def _hides_nothing(old: str, new: str) -> bool:
    """Whether rewriting ``old`` with ``new`` (a ``\r`` update) loses no information worth
    showing: ``old`` is blank, a spinner frame, or an earlier state of the same progress line."""
    if not old.strip() or old.strip() in _SPINNER:
        return True
    if len(old.strip()) == 1 and "\u2800" <= old.strip() <= "\u28ff":
        return True
    shape = _progress_shape(old)
    return shape is not None and shape == _progress_shape(new)


def resolve_rewrites(line: str) -> str:
    """A line containing ``\r`` rewrites: progress updates collapse to their last state (what a
    terminal shows); any other overwritten text is kept, each rewrite marked with ``␍``, so text
    a terminal would hide (``rm -rf ~ done\rAll 42 tests passed``) never disappears silently."""
    parts = line.split("\r")
    kept: list[str] = []
    for i, part in enumerate(parts):
        later = next((p for p in parts[i + 1 :] if p.strip()), None)
        if later is not None and _hides_nothing(part, later):
            continue
        if later is None and not part.strip() and kept:
            continue  # a trailing \r (or blanking) after the last text
        kept.append(part)
    return CR_MARK.join(kept)


def clean_text(data: bytes | str, max_line_chars: int = 2000) -> str:
    """Decode, strip terminal control sequences, resolve ``\r`` rewrites (``resolve_rewrites``)
    and cut very long lines."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = _ANSI_RE.sub("", text)
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    out = []
    for line in lines:
        if "\r" in line:
            line = resolve_rewrites(line)
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


class OutputBudget:
    """The bytes all output files of one host may hold together (``output.dir_cap``).

    ``take(n)`` grants up to ``n`` bytes; when the budget is short it first asks ``reclaim`` (the
    session history drops the output files of old finished sessions) for room. ``release(n)`` gives
    back the bytes of a removed file.
    """

    def __init__(self, cap: int, reclaim: Callable[[int], None] | None = None) -> None:
        self.cap = cap
        self.used = 0
        self.reclaim = reclaim

    def take(self, n: int) -> int:
        if self.used + n > self.cap and self.reclaim is not None:
            self.reclaim(self.used + n - self.cap)
        granted = max(0, min(n, self.cap - self.used))
        self.used += granted
        return granted

    def release(self, n: int) -> None:
        self.used = max(0, self.used - n)


def _reserve(fd: int, start: int, end: int) -> bool:
    """Allocate ``start``..``end`` of ``fd``'s file past its end (best effort: a disk already
    full, or a filesystem without fallocate, reserves nothing)."""
    fallocate = _fallocate()
    return fallocate is not None and fallocate(fd, _FALLOC_FL_KEEP_SIZE, start, end - start) == 0


class ReadyFile:
    """The next run's output file, made ahead of it (``ahead.MadeAhead``). A run's ``take``
    renames it to the run's own name once it is checked: still empty, linked once, the very file
    made. Its space is reserved when a run takes it (``Capture``): a waiting file holds none."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._ahead: MadeAhead[tuple[int, str]] = MadeAhead(self._make, _drop_made)

    def _make(self) -> tuple[int, str]:
        path = os.path.join(self.directory, f"ready-{os.urandom(6).hex()}.log")
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), path

    def refill(self) -> None:
        """Make the next output file when none is ready (a worker; never raises)."""
        self._ahead.refill()

    def take(self, path: str) -> int | None:
        """The ready file's descriptor, the file renamed to ``path``; None when there is none
        (or it is no longer as made)."""
        ready = self._ahead.take()
        if ready is None:
            return None
        fd, made = ready
        try:
            st = os.fstat(fd)
            same = os.lstat(made)
            if (
                st.st_size == 0
                and st.st_nlink == 1
                and (same.st_dev, same.st_ino) == (st.st_dev, st.st_ino)
                and not os.path.lexists(path)
            ):
                os.rename(made, path)
                return fd
        except OSError:
            pass
        self._ahead.drop(ready)
        return None

    def close(self) -> None:
        self._ahead.close()


def _unreserve(fd: int, size: int) -> None:
    """Give back the space allocated past ``size``, the end of ``fd``'s file. A truncate to the
    same size frees it on ext4 and tmpfs, and the file never looks longer than it is (readers
    may be at it: the run's result is out). Where the blocks stay, a truncate that shrinks frees
    them: the file grows by one byte first, for a moment."""
    try:
        before = os.fstat(fd).st_blocks
        os.ftruncate(fd, size)
        if os.fstat(fd).st_blocks < before:
            return
        os.ftruncate(fd, size + 1)
        os.ftruncate(fd, size)
    except OSError:
        pass


def _drop_made(made: tuple[int, str]) -> None:
    os.close(made[0])
    with contextlib.suppress(OSError):
        os.unlink(made[1])


def _describe(err: OSError) -> str:
    text = err.strerror or str(err)
    return text[:1].lower() + text[1:]


class Capture:
    """Write a run's output to its file (up to ``cap`` bytes) and keep bounded head/tail copies.

    Writing the file can fail (a full disk, a quota, the host's ``output.dir_cap``): the file then
    stops where it is, ``stopped`` says why ("output file stopped at N bytes: no space left on
    device"), and the output goes on in memory: the agent's text, ``read`` and ``last_lines`` serve
    what the file lacks from the tail copy.
    """

    def __init__(
        self,
        path: str,
        cap: int,
        *,
        budget: OutputBudget | None = None,
        write: Callable[[int, bytes | memoryview], int] = os.write,
        ready: int | None = None,
    ) -> None:
        """``ready``: the descriptor of the file at ``path``, open already and empty
        (``ReadyFile.take``); else the file is created here."""
        self.path = path
        self.cap = cap
        self.budget = budget
        self._write_fn = write
        self.total = 0  # bytes produced by the command
        self.written = 0  # bytes in the file (excluding the marker)
        self.on_disk = 0  # bytes in the file (including the marker), as charged to the budget
        self.head = bytearray()
        self.tail = bytearray()
        self.capped = False
        self.stopped: str | None = None  # why the file stopped short, once it has
        self.removed = False  # the history deleted the file (the session is old)
        self.final: tuple[tuple[int, int], str] | None = None  # set by freeze()
        self.fd = -1
        self.reserved = 0  # the file's allocated space reaches this offset (RESERVE_BYTES)
        self._release: tuple[int, int] | None = None  # ``close(later=True)``: fd, its size
        if ready is not None:
            self.fd = ready
            self._reserve()
            return
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError as e:
            self._stop(_describe(e))
        else:
            self._reserve()

    def _reserve(self) -> None:
        """Keep up to RESERVE_BYTES allocated past the end of the file (never past the cap).
        Best effort: a disk already full, or a filesystem without fallocate, reserves nothing."""
        end = min(self.on_disk + RESERVE_BYTES, self.cap + 4096)
        if self.fd < 0 or end <= self.reserved:
            return
        if _reserve(self.fd, max(self.on_disk, self.reserved), end):
            self.reserved = end

    def _unreserve(self) -> None:
        if self.reserved > self.on_disk:
            _unreserve(self.fd, self.on_disk)
            self.reserved = 0

    def _stop(self, why: str) -> None:
        if self.stopped is None:
            self.stopped = f"output file stopped at {self.written} bytes: {why}"
        self.close()

    def _write(self, data: bytes, *, output: bool = True) -> None:
        """Write all of ``data`` (retrying short writes); ``output`` bytes count in ``written``
        (the cap marker does not). Any error stops the file where it is."""
        view = memoryview(data)
        if self.budget is not None:
            view = view[: self.budget.take(len(view))]
        done = 0
        why = ""
        while done < len(view):
            try:
                n = self._write_fn(self.fd, view[done:])
            except InterruptedError:
                continue
            except OSError as e:
                why = _describe(e)
                break
            if n <= 0:
                why = "the file accepted no more data"
                break
            done += n
        self.on_disk += done
        if output:
            self.written += done
        if self.reserved - self.on_disk < RESERVE_BYTES // 2:
            self._reserve()
        if self.budget is not None:
            self.budget.release(len(view) - done)
            if not why and done < len(data):
                why = f"the output directory reached its cap of {self.budget.cap} bytes"
        if why:
            self._stop(why)

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
            self._write(data[:room])
        if len(data) > room and not self.capped and self.fd >= 0:
            self.capped = True
            marker = (
                f"\n[run_bash: output file reached its cap of {self.cap} bytes; "
                "later output is not saved]\n"
            )
            self._write(marker.encode(), output=False)

    def close(self, *, later: bool = False) -> None:
        """Close the file. ``later``: its reserved space is given back by ``release`` (a
        worker, after the run's result: freeing blocks is a metadata write); the file itself is
        closed now all the same, so that a delayed write error still says the file is short."""
        if self.fd >= 0:
            if later and self.reserved > self.on_disk:
                with contextlib.suppress(OSError):  # no descriptor to spare: given back now
                    self._release = os.dup(self.fd), self.on_disk
                    self.reserved = 0
            self._unreserve()
            try:
                os.close(self.fd)
            except OSError as e:  # a delayed write error (NFS, FUSE): the file is short
                if self.stopped is None:
                    self.stopped = f"output file stopped at {self.written} bytes: {_describe(e)}"
            self.fd = -1

    def release(self) -> None:
        """Give back what ``close(later=True)`` kept reserved (any thread; idempotent)."""
        with _RELEASING:  # the host's end and the run's own clean-up may both come here
            held, self._release = self._release, None
        if held is not None:
            _unreserve(*held)
            os.close(held[0])

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
        ~600 KiB per session otherwise stays in the host for as long as the session is listed).
        A file that stopped short keeps the last ``TAIL_BYTES`` in memory: they exist nowhere else."""
        self.final = ((max_chars, max_line_chars), self.agent_text(max_chars, max_line_chars))
        self.head = bytearray()
        self.tail = self.tail[-TAIL_BYTES:] if self.stopped else bytearray()

    # -- reading back what the file may lack ------------------------------------------------------

    def read(self, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
        """Output from ``offset`` (at most ``max_bytes``): (data, new_offset, bytes_left_unread).
        Past the end of a file that stopped short it comes from the memory tail (with a line
        saying how much is lost when the tail no longer reaches back to ``offset``)."""
        if self.stopped is None or offset < self.written:
            # Never past what was written: giving back reserved space grows the file by a byte
            # for a moment (``_unreserve``).
            data, new, left = read_since(self.path, offset, max_bytes, self.on_disk)
            if self.stopped is not None:
                data = data[: max(0, self.written - offset)]
                new = offset + len(data)
                left = self.total - new
            return data, new, left
        start = self.total - len(self.tail)
        pos = max(offset, start)
        chunk = bytes(self.tail[pos - start : pos - start + max_bytes])
        lost = pos - offset
        note = f"[… {lost} bytes were not saved and are gone …]\n".encode() if lost else b""
        new = pos + len(chunk)
        return note + chunk, new, self.total - new

    def last_lines(self, n: int, max_bytes: int, end: int | None = None) -> tuple[bytes, int]:
        """The last ``n`` lines (at most ``max_bytes``) of the output, or of its first ``end``
        bytes, and the offset they end at: from the file, or from the memory tail when the file
        stopped short."""
        if self.stopped is None:
            return tail_lines(self.path, n, max_bytes, end, self.on_disk)
        stop = self.total if end is None else max(0, min(end, self.total))
        start = self.total - len(self.tail)
        if stop <= self.written or stop < start:
            data, _ = tail_lines(self.path, n, max_bytes, min(stop, self.written), self.on_disk)
            return data, stop
        data = bytes(self.tail[max(0, stop - start - max_bytes) : stop - start])
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        return b"\n".join(lines[-n:]) + (b"\n" if lines else b""), stop

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
    # The note's own length (with the largest count it can hold) comes out of the budget, so a
    # long output path never pushes the text past max_chars.
    note = len(f"\n[… {len(text)} characters cut{where} …]\n")
    if note > max_chars // 2:  # a path too long to name in so little room
        where = ""
        note = len(f"\n[… {len(text)} characters cut …]\n")
    budget = max(0, max_chars - note)
    head_n = int(budget * HEAD_SHARE)
    tail_n = budget - head_n
    head = text[:head_n]
    tail = text[len(text) - tail_n :]
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


def read_since(
    path: str, offset: int, max_bytes: int = READ_PAGE_BYTES, limit: int | None = None
) -> tuple[bytes, int, int]:
    """Read at most ``max_bytes`` from ``offset``; return (data, new_offset, bytes_left_unread).
    ``limit``: the file's known length (what the writer wrote); nothing past it is read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if limit is not None:
                size = min(size, limit)
            f.seek(offset)
            data = f.read(max(0, min(max_bytes, size - offset)))
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
    path: str,
    n: int,
    max_bytes: int = READ_PAGE_BYTES,
    end: int | None = None,
    limit: int | None = None,
) -> tuple[bytes, int]:
    """Return the last ``n`` lines (at most ``max_bytes``) of the file, or of its first ``end``
    bytes, and the file size (``limit``: its known length, as for ``read_since``)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if limit is not None:
                size = min(size, limit)
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
