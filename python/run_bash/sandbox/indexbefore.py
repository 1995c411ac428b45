"""Each git index as it was before a run, so that the post-run check takes back only the entries
the run put there (``gitindex.smuggled``), never the user's own staging (``git add -p .envrc``).

When a run in a repository starts, the bytes of each of its index files are read into memory
(``hold``): an ``open``, an ``fstat`` and one read (about 20 µs for 5,000 files, a 480 KB index;
nothing for a run outside a repository). A descriptor held on the file instead would not do: git
replaces the index by a rename, which changes the old file's change time as a write does, so a
run that wrote the old file in place (``cat x > .git/index``, or through a descriptor it opened
before git replaced it) and set its modification time back could not be told from git. A git
directory with no index had nothing staged. An index over ``MAX_COPY``, or one that is not a
regular file, is not kept.

Only after a run that changed an index and left an entry to take back are these bytes written to
a scratch file and git asked what it staged there (``GIT_INDEX_FILE=<copy> git ls-files
--stage``, ``staged``): run_bash never reads the index format itself. When the index before the
run is not kept or git cannot read the copy, ``staged`` says None and the caller takes back as if
the run had staged the entry, and says how to stage it again.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable

from run_bash.sandbox import gitask, gitindex
from run_bash.sandbox.gitask import HostReadError

# The largest index copied (an index takes about 100 bytes a file: 4 MiB is some 40,000 files and
# about 0.2 ms a run; a larger index is not kept, and the rare entry to take back is then taken
# back as when the index is unknown, with what restages it in the notice).
MAX_COPY = 4 * 1024 * 1024

# Where an entry is taken back to when the index before the run cannot be known.
UNKNOWN = (
    "what HEAD has; what the index staged before the run could not be known, so one of these may "
    "have been your own staging: `git update-index --cacheinfo MODE,OID,PATH` with what is shown "
    "stages it again"
)
# Path -> what it had staged there: (mode, oid, stage) as ``ls-files --stage`` says.
Entries = dict[str, list[tuple[str, str, str]]]


class Before:
    """One index before a run: its bytes, or None when there was none (nothing staged)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | None = None) -> None:
        self.data = data


def _read(fd: int, size: int) -> bytes | None:
    """The whole file, when it holds ``size`` bytes."""
    chunks, at = [], 0
    while at < size:
        chunk = os.pread(fd, min(size - at, 1 << 24), at)
        if not chunk:
            return None
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks) if os.pread(fd, 1, at) == b"" else None


def _copy(path: str) -> Before | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Before()
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_COPY:
            return None
        data = _read(fd, st.st_size)
        return None if data is None else Before(data)
    except OSError:
        return None
    finally:
        os.close(fd)


def hold(git_dirs: Iterable[str]) -> dict[str, Before]:
    """The index of each git directory as it is now, by its path; one that cannot be kept (not a
    regular file, unreadable, over ``MAX_COPY``) is left out."""
    out = {}
    for g in git_dirs:
        p = gitindex.index_path(g)
        b = _copy(p)
        if b is not None:
            out[p] = b
    return out


def release(held: dict[str, Before]) -> None:
    """Drop what ``hold`` kept (the run's check is done)."""
    held.clear()


def staged(git_dir: str, before: Before | None, paths: Iterable[str]) -> Entries | None:
    """What the index ``before`` staged at each of ``paths`` (a path it did not stage is not
    there), as git lists it; None when that cannot be known (not kept, or git cannot read it)."""
    spec = [f":(top,literal){p}" for p in paths]
    if before is None or not spec:
        return None if before is None else {}
    if before.data is None:
        return {}  # there was no index
    try:
        scratch = tempfile.mkdtemp(prefix="run_bash-index-")
    except OSError:
        return None
    try:
        copy = os.path.join(scratch, "index")
        with open(copy, "wb") as f:
            f.write(before.data)
        rc, out, _err = gitask.run_git(
            ["--git-dir", git_dir, "ls-files", "--stage", "-z", "--", *spec],
            "/",
            {},
            clean=True,
            limit=gitindex.MAX_LISTING,
            extra_env={"GIT_INDEX_FILE": copy, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, HostReadError):
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if rc != 0:
        return None
    entries: Entries = {}
    for line in out.split("\0"):
        head, tab, path = line.partition("\t")
        fields = head.split()
        if tab and len(fields) == 3:
            entries.setdefault(path, []).append((fields[0], fields[1], fields[2]))
    return entries
