"""Content-addressed blob store: one file per distinct content, named by its SHA-256.

Blobs are written to a temp file and renamed into place, so a reader sees a whole blob or none;
every read checks the hash, so a blob damaged on disk is reported, never restored. Text that
compresses well is stored with zlib (level 1: the first snapshot of a project must stay fast);
anything else, raw.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib

RAW = b"r"
ZLIB = b"z"
SAMPLE_BYTES = 16 * 1024
COMPRESS_IF_BELOW = 0.8  # store compressed when a sample shrinks to less than this share


class DamagedBlob(Exception):
    """A blob is missing or does not match its hash."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Objects:
    """Blobs under ``root`` (``root/ab/cdef…``). Thread-safe: writes are atomic renames."""

    def __init__(self, root: str, tmp: str) -> None:
        self.root = root
        self.tmp = tmp
        self._dirs: set[str] = set()

    def path(self, h: str) -> str:
        return os.path.join(self.root, h[:2], h[2:])

    def has(self, h: str) -> bool:
        return os.path.exists(self.path(h))

    def put(self, data: bytes, h: str | None = None) -> tuple[str, int]:
        """Store ``data``; returns its hash and the bytes added to the store (0 when present)."""
        h = h or digest(data)
        dest = self.path(h)
        if os.path.exists(dest):
            return h, 0
        payload = RAW + data
        if len(data) > 64:
            sample = data[:SAMPLE_BYTES]
            if len(zlib.compress(sample, 1)) < COMPRESS_IF_BELOW * len(sample):
                payload = ZLIB + zlib.compress(data, 1)
        sub = os.path.dirname(dest)
        if sub not in self._dirs:
            os.makedirs(sub, mode=0o700, exist_ok=True)
            self._dirs.add(sub)
        fd, tmp = _mkstemp(self.tmp)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.rename(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return h, len(payload)

    def get(self, h: str) -> bytes:
        """The content of blob ``h``; raises DamagedBlob when it is missing or altered."""
        try:
            with open(self.path(h), "rb") as f:
                payload = f.read()
        except OSError as err:
            raise DamagedBlob(f"blob {h[:12]} is missing from the store ({err.strerror})") from None
        try:
            data = zlib.decompress(payload[1:]) if payload[:1] == ZLIB else payload[1:]
        except zlib.error:
            data = b""
        if payload[:1] not in (RAW, ZLIB) or digest(data) != h:
            raise DamagedBlob(f"blob {h[:12]} in the store is damaged")
        return data

    def stored_size(self, h: str) -> int:
        try:
            return os.stat(self.path(h)).st_size
        except OSError:
            return 0

    def all(self) -> list[tuple[str, int, float]]:
        """Every blob as (hash, bytes on disk, mtime)."""
        out = []
        try:
            subs = os.listdir(self.root)
        except FileNotFoundError:
            return out
        for sub in subs:
            d = os.path.join(self.root, sub)
            with contextlib.suppress(OSError), os.scandir(d) as it:
                for e in it:
                    with contextlib.suppress(OSError):
                        st = e.stat()
                        out.append((sub + e.name, st.st_size, st.st_mtime))
        return out

    def remove(self, h: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(h))


def _mkstemp(d: str) -> tuple[int, str]:
    while True:
        name = os.path.join(d, "tmp-" + os.urandom(8).hex())
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), name
        except FileExistsError:
            continue
