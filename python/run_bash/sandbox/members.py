"""The members of the host-read set as states: what a member is (``capture``), whether it is still
that (``matches``, bounded by the trusted state and never blocking), and putting it back
(``Repairer``: what was there goes to the quarantine directory, the trusted state is written as
the owner, even through directories a run made unwritable, and never through a symbolic link a
run could have planted on the way: ``nofollow``)."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from typing import Any

from run_bash.errors import SpawnError
from run_bash.sandbox import nofollow
from run_bash.sandbox.hostread import read_nonblocking
from run_bash.sandbox.nofollow import Fence

# A member file larger than this cannot be kept (a copy is held in memory): the run is refused.
MAX_MEMBER_BYTES = 16 * 1024 * 1024
# A member directory (a hooks directory) with more entries or deeper than this is refused.
MAX_DIR_ENTRIES = 1024
MAX_DIR_DEPTH = 4
State = tuple[Any, ...]
ABSENT: State = ("absent",)
# A file whose inode change time is at least this old when it is captured keeps its stat
# signature in its state: an equal signature later means equal content (any write moves the
# change time, which user space cannot set back), so it is not read again. A younger one is read
# every time (a second write within one timestamp tick would keep the time).
SETTLED_NS = 2_000_000_000


# -------------------------------------------------------------------------------------------------
# States: what a member is, compared without blocking and bounded by the trusted state


class TooLarge(SpawnError):
    """A member is too large to keep a copy of: the run does not start."""


def _file_sig(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def capture(path: str, depth: int = 0, prev: State | None = None) -> State:
    """The state of ``path``: ("absent",), ("file", mode, uid, gid, data, sig),
    ("link", target), ("dir", mode, uid, gid, ((name, state), ...)), ("other", type, mode) or
    ("unreadable", why). ``sig`` is the file's stat signature when it had settled (else None);
    ``prev``, an earlier state of the same path, is returned as it is when its signature still
    holds (nothing is read again)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return ABSENT
    except OSError as e:
        return ("unreadable", e.errno)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        try:
            return ("link", os.readlink(path))
        except OSError as e:
            return ("unreadable", e.errno)
    if stat.S_ISREG(st.st_mode):
        if st.st_size > MAX_MEMBER_BYTES:
            raise TooLarge(
                f"{path} is larger than {MAX_MEMBER_BYTES >> 20} MiB: too large to keep a copy "
                "of; nothing was started"
            )
        sig = _file_sig(st)
        if (
            prev is not None
            and prev[0] == "file"
            and prev[5] == sig
            and prev[1:4] == (mode, st.st_uid, st.st_gid)
        ):
            return prev
        data = read_nonblocking(path, MAX_MEMBER_BYTES)
        if data is None:
            return ("unreadable", "not readable without blocking")
        settled = time.time_ns() - st.st_ctime_ns >= SETTLED_NS
        return ("file", mode, st.st_uid, st.st_gid, data, sig if settled else None)
    if stat.S_ISDIR(st.st_mode):
        if depth >= MAX_DIR_DEPTH:
            raise TooLarge(f"{path} is nested too deep to keep a copy of (limit {MAX_DIR_DEPTH})")
        names: list[str] = []
        try:
            with os.scandir(path) as it:
                for entry in it:
                    names.append(entry.name)
                    if len(names) > MAX_DIR_ENTRIES:
                        raise TooLarge(
                            f"{path} has more than {MAX_DIR_ENTRIES} entries: too many to keep a "
                            "copy of; nothing was started"
                        )
        except OSError as e:
            return ("unreadable", e.errno)
        before = dict(prev[4]) if prev is not None and prev[0] == "dir" else {}
        kids = tuple(
            (n, capture(os.path.join(path, n), depth + 1, before.get(n))) for n in sorted(names)
        )
        return ("dir", mode, st.st_uid, st.st_gid, kids)
    return ("other", stat.S_IFMT(st.st_mode), mode)


def within(state: State, root: str, path: str) -> State:
    """The state ``path`` had inside the directory ``root`` whose state is ``state`` (one
    ``capture`` holds every entry's): ABSENT when it was not there."""
    for part in os.path.relpath(path, root).split(os.sep):
        if state[0] != "dir":
            return ABSENT
        state = dict(state[4]).get(part, ABSENT)
    return state


def matches(path: str, state: State) -> bool:
    """Whether ``path`` is still ``state``. The work is bounded by ``state``: a directory is
    listed up to one entry more than it had, a file read up to its length, never blocking."""
    kind: str = state[0]
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return kind == "absent"
    except OSError as e:
        return state == ("unreadable", e.errno)
    if kind in ("absent", "unreadable"):
        return kind == "unreadable" and capture_or_mark(path) == state
    mode = stat.S_IMODE(st.st_mode)
    if kind == "link":
        if not stat.S_ISLNK(st.st_mode):
            return False
        try:
            target: str = state[1]
            return os.readlink(path) == target
        except OSError:
            return False
    if kind == "other":
        return (stat.S_IFMT(st.st_mode), mode) == state[1:]
    if (mode, st.st_uid, st.st_gid) != state[1:4]:
        return False
    if kind == "file":
        if not stat.S_ISREG(st.st_mode):
            return False
        if state[5] is not None and state[5] == _file_sig(st):
            return True  # settled and untouched since (see SETTLED_NS)
        data: bytes = state[4]
        if st.st_size != len(data):
            return False
        return read_nonblocking(path, len(data)) == data
    if kind == "dir":
        if not stat.S_ISDIR(st.st_mode):
            return False
        kids = dict(state[4])
        count = 0
        try:
            with os.scandir(path) as it:
                for entry in it:
                    count += 1
                    if count > len(kids) or entry.name not in kids:
                        return False
        except OSError:
            return False
        if count != len(kids):
            return False
        return all(matches(os.path.join(path, n), s) for n, s in kids.items())
    return False


# -------------------------------------------------------------------------------------------------
# Repair: quarantine what is there, write the trusted state, as the owner, never through a link


class Repairer:
    """Moves things into the quarantine directory and writes trusted states back. Every write
    reaches its path as ``nofollow.parent`` does: a symbolic link on the way inside ``fence``
    (a place a run can write) stops it with ``LinkInPath`` before anything is written, and the
    last component is never followed either. ``fence`` is a ``Fence``, or a function giving the
    current one."""

    def __init__(
        self, quarantine_root: str, fence: Fence | Callable[[], Fence] = nofollow.EVERYWHERE
    ) -> None:
        self.root = quarantine_root
        self._fence = fence

    @property
    def fence(self) -> Fence:
        return self._fence if isinstance(self._fence, Fence) else self._fence()

    def quarantine(self, path: str, tag: str) -> str:
        """Move ``path`` (whatever it is: a link is moved itself) out of the way; where it went.
        Into the quarantine directory when it is on the same file system (one rename, whatever
        its size), else renamed in place with a suffix and its exec bits removed (inert under
        any name). Raises ``LinkInPath`` (nothing moved) or another OSError."""
        with nofollow.parent(path, self.fence, owner=True) as (fd, name):
            os.stat(name, dir_fd=fd, follow_symlinks=False)  # nothing there: FileNotFoundError
            return self._away(fd, name, path, tag)

    def _away(self, fd: int, name: str, path: str, tag: str) -> str:
        """Move ``name`` (in the directory at ``fd``, which is ``path``'s) out of the way."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        # One flat name per original path: no `.git` or `hooks` directory is recreated in there.
        flat = path.strip("/").replace("%", "%25").replace("/", "%")
        with contextlib.suppress(OSError):
            return self._into_root(fd, name, f"{stamp}-{tag}", flat)
        base = f"{name}.run_bash-quarantined-{stamp}"
        dest, n = base, 1
        while nofollow.lstat_at(fd, dest) is not None:
            n += 1
            dest = f"{base}.{n}"
        os.rename(name, dest, src_dir_fd=fd, dst_dir_fd=fd)
        _disarm(fd, dest, 0o600)
        return os.path.join(os.path.dirname(path), dest)

    def _into_root(self, fd: int, name: str, run: str, flat: str) -> str:
        """Rename ``name`` into ``<root>/<run>/<flat>`` (``.2``, ``.3`` … when taken)."""
        with nofollow.parent(self.root, self.fence, create=True) as (up, root_name):
            with contextlib.suppress(FileExistsError):
                os.mkdir(root_name, 0o700, dir_fd=up)
            root_fd = os.open(root_name, nofollow.DIR, dir_fd=up)
        try:
            # What a run wrote may be meant for someone else's eyes: only the owner's.
            if stat.S_IMODE(os.fstat(root_fd).st_mode) != 0o700:
                nofollow.chmod_fd(root_fd, 0o700)
            with contextlib.suppress(FileExistsError):
                os.mkdir(run, 0o700, dir_fd=root_fd)
            run_fd = os.open(run, nofollow.DIR, dir_fd=root_fd)
        finally:
            os.close(root_fd)
        try:
            dest, n = flat, 1
            while nofollow.lstat_at(run_fd, dest) is not None:
                n += 1
                dest = f"{flat}.{n}"
            os.rename(name, dest, src_dir_fd=fd, dst_dir_fd=run_fd)
            _disarm(run_fd, dest)
            return os.path.join(self.root, run, dest)
        finally:
            os.close(run_fd)

    def restore(self, path: str, state: State, tag: str, create: bool = True) -> tuple[bool, str]:
        """Make ``path`` be ``state`` again; (checked ok, what was done). Raises ``LinkInPath``
        when a directory on the way is a symbolic link a run could have planted: nothing was
        written (the caller decides what to do with the link). Directories on the way that are
        gone (a run moved ``src`` away, and with it the ``src/.cargo/config.toml`` kept there)
        are made again (mode 0700) for what must be there, unless ``create`` is False (a link
        on the way was just moved to the quarantine: nothing takes its place)."""
        moved = ""
        try:
            with nofollow.parent(
                path, self.fence, owner=True, create=create and state[0] != "absent"
            ) as (
                fd,
                name,
            ):
                if nofollow.lstat_at(fd, name) is not None:
                    moved = self._away(fd, name, path, tag)
                _create(fd, name, state)
        except nofollow.LinkInPath:
            raise
        except (OSError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            return False, f"could not be restored ({why})"
        try:
            nofollow.lstat(path, self.fence)  # still reached without a link (compared next)
        except nofollow.LinkInPath as e:
            return False, f"could not be restored ({e.strerror})"
        except OSError:
            pass
        if not matches(path, state):
            return False, "could not be restored (it differs after writing it back)"
        done = "removed" if state[0] == "absent" else "restored"
        return True, done + (f"; what was there is in {moved}" if moved else "")


def _create(fd: int, name: str, state: State) -> None:
    """Write ``state`` as ``name`` in the directory at ``fd`` (nothing is there)."""
    kind = state[0]
    if kind == "absent":
        return
    if kind == "link":
        os.symlink(state[1], name, dir_fd=fd)
        return
    if kind == "file":
        if state[4] is None:
            raise ValueError(f"larger than {MAX_MEMBER_BYTES} bytes: no copy was kept")
        tmp = f".run_bash-restore-{os.getpid()}-{time.time_ns()}"
        out = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=fd,
        )
        try:
            os.write(out, state[4])
            _own(out, state)
            os.fchmod(out, state[1])
        finally:
            os.close(out)
        os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        return
    if kind == "dir":
        os.mkdir(name, 0o700, dir_fd=fd)
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            for kid, kid_state in state[4]:
                _create(sub, kid, kid_state)
            _own(sub, state)
            os.fchmod(sub, state[1])
        finally:
            os.close(sub)
        return
    raise ValueError(f"a {kind} entry cannot be recreated")


def _own(fd: int, state: State) -> None:
    if os.geteuid() == 0:
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != (state[2], state[3]):
            os.fchown(fd, state[2], state[3])


def capture_or_mark(path: str, prev: State | None = None) -> State:
    """``capture``, or a state that matches nothing when the entry is too large to copy."""
    try:
        return capture(path, prev=prev)
    except TooLarge:
        return ("unreadable", "too large")


def _disarm(fd: int, name: str, file_mode: int | None = None) -> None:
    """Leave what went to the quarantine (``name`` in the directory at ``fd``) inert where it
    lies: a directory gets mode 000, so that a tool started in it (a shell prompt's git, direnv,
    mise, an editor's exrc) reads none of what the run put there until the user opens it
    (``chmod u+rwx``) to look; a regular file gets ``file_mode`` when given. Best effort."""
    with contextlib.suppress(OSError):
        moved = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            mode = os.fstat(moved).st_mode
            if stat.S_ISDIR(mode):
                nofollow.chmod_fd(moved, 0)
            elif stat.S_ISREG(mode) and file_mode is not None:
                nofollow.chmod_fd(moved, file_mode)
        finally:
            os.close(moved)
