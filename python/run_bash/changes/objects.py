"""Content-addressed blob store: blobs named by their SHA-256, kept in pack files.

One walk that finds new content writes one pack (``packs/<id>.pack``): the blobs back to back,
then an index trailer (hash -> offset, length) with a CRC. Creating a file costs far more than
appending to one on some file systems (measured: 0.65 ms per create against 8 us per 10 KiB
append here), so a first snapshot of 5,000 files is one file, not 5,000. A pack without a valid
trailer is unfinished (being written, or left by a crash) and is not read. Every read checks the
blob's hash, so damaged content is reported, never restored. Text that compresses well is stored
with zlib level 1; anything else, raw. ``repack`` (under the store's exclusive lock) drops blobs
nothing refers to.
"""

from __future__ import annotations

import contextlib
import importlib
import marshal
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any, cast

RAW = 0x72  # b"r"
ZLIB = 0x7A  # b"z"
SAMPLE_BYTES = 16 * 1024
COMPRESS_IF_BELOW = 0.8  # store compressed when a sample shrinks to less than this share
HEADER = b"RBPACK1\n"
END = b"RBPKEND\n"
TRAILER = struct.Struct("<QI8s")  # index offset, crc32 of the index, END
REPACK_DEAD_SHARE = 0.3  # a pack whose dead bytes exceed this share is rewritten
STALE_UNFINISHED_S = 3600


class DamagedBlob(Exception):
    """A blob is missing or does not match its hash."""


def _interpreters_sha256() -> Callable[[bytes], Any]:
    """The interpreter's own SHA-256 (``_sha256``; ``_sha2`` from Python 3.12), which loads
    nothing; a build without it gets OpenSSL's."""
    for name in ("_sha256", "_sha2"):
        with contextlib.suppress(ImportError):
            return cast(Callable[[bytes], Any], importlib.import_module(name).sha256)
    from hashlib import sha256

    return sha256


_builtin_sha256 = _interpreters_sha256()


def digest(data: bytes) -> str:
    """The SHA-256 of ``data``, in hex: a blob's name (and a project's, in the store).

    ``hashlib`` (OpenSSL, whose SHA-256 uses the CPU's own instructions: six times the
    interpreter's speed here) costs 3 ms to load, the most of any module a host's start would
    import, and the start hashes nothing: OpenSSL's is used once something loaded it (the host
    does, on its loop, a moment after its start: ``load_fast_hash``), the interpreter's until
    then. Both give the same digest."""
    fast = getattr(sys.modules.get("hashlib"), "sha256", None)  # (None while being imported)
    return str((fast or _builtin_sha256)(data).hexdigest())


def load_fast_hash() -> None:
    """Load OpenSSL's SHA-256 for ``digest`` (3 ms; on the host's loop, after its start)."""
    import hashlib  # noqa: F401


def _encode(data: bytes) -> bytes:
    if len(data) > 64:
        sample = data[:SAMPLE_BYTES]
        packed = zlib.compress(sample, 1)
        if len(packed) < COMPRESS_IF_BELOW * len(sample):
            # Most source files fit in the sample: compressed once, not twice.
            whole = packed if len(sample) == len(data) else zlib.compress(data, 1)
            return bytes((ZLIB,)) + whole
    return bytes((RAW,)) + data


def _decode(payload: bytes) -> bytes:
    if payload[:1] == bytes((ZLIB,)):
        return zlib.decompress(payload[1:])
    if payload[:1] == bytes((RAW,)):
        return payload[1:]
    raise zlib.error("unknown blob encoding")


class PackWriter:
    """Appends the blobs of one walk to a new pack; ``close`` seals it. Not thread-safe (one walk)."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.added = 0
        self._fd: int | None = None
        self._name = ""
        self._off = 0
        self._index: dict[str, tuple[int, int]] = {}

    def put(self, data: bytes, h: str | None = None) -> tuple[str, int]:
        """Store ``data``; returns its hash and the bytes added (0 when already stored)."""
        h = h or digest(data)
        if h in self._index or self.objects.has(h):
            return h, 0
        return h, self._put_payload(h, _encode(data))

    def _put_payload(self, h: str, payload: bytes) -> int:
        if self._fd is None:
            self._name = f"{time.time_ns():x}-{os.urandom(4).hex()}.pack"
            self._fd = os.open(
                os.path.join(self.objects.packs, self._name),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                0o600,
            )
            self._write(HEADER)
        off = self._off
        self._write(payload)
        self._index[h] = (off, len(payload))
        self.added += len(payload)
        return len(payload)

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
            self._off += n

    def close(self) -> None:
        if self._fd is None:
            return
        try:
            index = marshal.dumps(self._index)
            at = self._off
            self._write(index + TRAILER.pack(at, zlib.crc32(index), END))
        finally:
            os.close(self._fd)
            self._fd = None
        self.objects._add_pack(self._name, self._index)

    def __enter__(self) -> PackWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Objects:
    """Blobs under ``root/packs``. Thread-safe; packs written by other processes are found on
    demand."""

    def __init__(self, root: str) -> None:
        self.packs = os.path.join(root, "packs")
        os.makedirs(self.packs, mode=0o700, exist_ok=True)
        self._mu = threading.Lock()
        self._index: dict[str, tuple[str, int, int]] = {}
        self._loaded: set[str] = set()
        self.refresh()

    def writer(self) -> PackWriter:
        return PackWriter(self)

    def _add_pack(self, name: str, index: dict[str, tuple[int, int]]) -> None:
        with self._mu:
            self._loaded.add(name)
            for h, (off, n) in index.items():
                self._index[h] = (name, off, n)

    @staticmethod
    def _read_index(path: str) -> dict[str, tuple[int, int]] | None:
        try:
            with open(path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                if size < len(HEADER) + TRAILER.size:
                    return None
                f.seek(size - TRAILER.size)
                at, crc, end = TRAILER.unpack(f.read(TRAILER.size))
                if end != END or at >= size:
                    return None
                f.seek(at)
                raw = f.read(size - TRAILER.size - at)
            if zlib.crc32(raw) != crc:
                return None
            index = marshal.loads(raw)
            return index if isinstance(index, dict) else None
        except (OSError, ValueError, EOFError, TypeError, struct.error):
            return None

    def refresh(self) -> None:
        """Pick up packs written by other processes and forget removed ones."""
        try:
            names = {n for n in os.listdir(self.packs) if n.endswith(".pack")}
        except FileNotFoundError:
            names = set()
        with self._mu:
            if self._loaded - names:  # a pack was removed: its blobs may live on in another
                self._index = {}
                self._loaded = set()
            new = names - self._loaded
        for name in sorted(new):
            index = self._read_index(os.path.join(self.packs, name))
            if index is not None:
                self._add_pack(name, index)

    def has(self, h: str) -> bool:
        return h in self._index

    def get(self, h: str) -> bytes:
        """The content of blob ``h``; raises DamagedBlob when it is missing or altered."""
        for attempt in range(2):
            where = self._index.get(h)
            if where is None:
                if attempt == 0:
                    self.refresh()
                    continue
                raise DamagedBlob(f"blob {h[:12]} is missing from the store")
            name, off, n = where
            try:
                with open(os.path.join(self.packs, name), "rb") as f:
                    f.seek(off)
                    payload = f.read(n)
                break
            except FileNotFoundError:
                self.refresh()  # repacked by another process
        else:
            raise DamagedBlob(f"blob {h[:12]} is missing from the store")
        try:
            data = _decode(payload)
        except zlib.error:
            data = None
        if data is None or digest(data) != h:
            raise DamagedBlob(f"blob {h[:12]} in the store is damaged")
        return data

    def hashes(self) -> set[str]:
        return set(self._index)

    def locate(self, h: str) -> tuple[str, int, int] | None:
        return self._index.get(h)

    def size(self) -> int:
        """Bytes of every pack on disk."""
        total = 0
        with contextlib.suppress(OSError), os.scandir(self.packs) as it:
            for e in it:
                with contextlib.suppress(OSError):
                    total += e.stat().st_size
        return total

    def repack(self, live: set[str]) -> tuple[int, int]:
        """Drop blobs not in ``live``: remove packs with nothing live, rewrite packs that are
        mostly dead, remove unfinished packs older than an hour. Call only while no walk can
        write (the store's exclusive lock). Returns (blobs removed, bytes on disk after)."""
        self.refresh()
        by_pack: dict[str, list[tuple[str, int, int]]] = {}
        for h, (name, off, n) in self._index.items():
            by_pack.setdefault(name, []).append((h, off, n))
        removed = 0
        for name in sorted(self._loaded):
            path = os.path.join(self.packs, name)
            blobs = by_pack.get(name, [])
            dead = [b for b in blobs if b[0] not in live]
            if not dead:
                continue
            total = sum(b[2] for b in blobs) or 1
            if len(dead) < len(blobs) and sum(b[2] for b in dead) / total < REPACK_DEAD_SHARE:
                continue
            keep = [b for b in blobs if b[0] in live]
            if keep:
                with open(path, "rb") as f, self.writer() as w:
                    for h, off, n in keep:
                        f.seek(off)
                        w._put_payload(h, f.read(n))
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            removed += len(dead)
        now = time.time()
        with contextlib.suppress(OSError):
            for name in os.listdir(self.packs):
                p = os.path.join(self.packs, name)
                if name.endswith(".pack") and name not in self._loaded:
                    with contextlib.suppress(OSError):
                        if now - os.lstat(p).st_mtime > STALE_UNFINISHED_S:
                            os.unlink(p)
        self.refresh()
        return removed, self.size()
