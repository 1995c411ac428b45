"""The host's writes in places a run could write, never through a symbolic link a run planted.

After a run the guard writes inside the project and the other writable grants: it moves a git
directory back, moves what a run left to the quarantine directory, writes a trusted state back,
puts a ``PATH`` link back, gives a directory its owner's bits back. A run may have replaced any
directory on the way with a symbolic link (``mv emb emb2; ln -s ~/other emb``), and a write by
path would land wherever that link leads: outside every grant, in a place no run could write.

So each of those writes finds its path one component at a time from ``/``, each with
``openat(O_PATH | O_DIRECTORY | O_NOFOLLOW)`` from the descriptor of the one before, and acts on
the last component relative to its parent's descriptor (``renameat``, ``mkdirat``,
``symlinkat``, ``unlinkat``), which never follows the last component either. A symbolic link met
in a directory inside the ``Fence`` (every place a run of this host may write, as written and
resolved) stops the write with ``LinkInPath``, naming the link; nothing is written. A link met
outside it (``/home`` → ``/var/home``, the user's own ``~/proj`` → ``/data/proj``) was there
before any run and no run can change it: it is followed, and its target found by the same rule.
``changes/restore.py`` does the same for undo, from the project's descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator

from run_bash.paths import Tops

# A directory on the way, opened without following a link (a link answers ENOTDIR or ELOOP).
DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Links followed outside the fence before giving up, as the kernel does (ELOOP).
MAX_LINKS = 40


class LinkInPath(OSError):
    """A directory on the way is a symbolic link in a place a run can write: not followed, and
    nothing was written. ``link`` is the link's own path (its directory resolved), ``target``
    its text."""

    def __init__(self, link: str, target: str) -> None:
        super().__init__(errno.ELOOP, f"{link} is a symbolic link, which a repair never follows")
        self.link = link
        self.target = target


class Fence:
    """The places a run can write (the writable grants), as written and resolved when the fence
    is made: a symbolic link in a directory inside one of them is never followed."""

    def __init__(self, places: Iterable[str]) -> None:
        paths = [os.path.normpath(p) for p in places]
        self.roots = tuple(dict.fromkeys([*paths, *(os.path.realpath(p) for p in paths)]))
        self._tops = Tops(self.roots)

    def __contains__(self, directory: object) -> bool:
        return directory in self._tops


# No link is followed anywhere: for callers that know of no grant (tests, one-off tools).
EVERYWHERE = Fence(["/"])


def chmod_fd(fd: int, mode: int) -> None:
    """chmod the inode open at ``fd`` (an ``O_PATH`` descriptor too; never a symlink: callers
    check), not whatever its name leads to now."""
    os.chmod(f"/proc/self/fd/{fd}", mode)


def _lend(fd: int, need: int, lent: list[tuple[int, int]]) -> None:
    """Give the owner the ``need`` bits on the directory at ``fd`` when it is ours and lacks them
    (a run may have ``chmod``-ed it); ``lent`` remembers its mode to put back."""
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return
    mode = stat.S_IMODE(st.st_mode)
    if mode & need == need:
        return
    keep = os.dup(fd)
    try:
        chmod_fd(fd, mode | need)
    except OSError:
        os.close(keep)
        return
    lent.append((keep, mode))


def _walk(
    path: str, fence: Fence, owner: bool, create: bool, lent: list[tuple[int, int]]
) -> tuple[int, str]:
    """A descriptor of ``path``'s parent (the caller closes it) and ``path``'s last component."""
    path = os.path.normpath(path)
    head, name = os.path.split(path)
    if not os.path.isabs(path) or not name:
        raise ValueError(f"not an absolute path below /: {path!r}")
    todo = [p for p in head.split("/") if p]
    todo.reverse()  # popped from the end: the next component last
    fd = os.open("/", DIR)
    cur = "/"
    links = 0
    try:
        while todo:
            part = todo.pop()
            if part == ".":
                continue
            if part == "..":
                nfd = os.open("..", DIR, dir_fd=fd)
                os.close(fd)
                fd, cur = nfd, os.path.dirname(cur)
                continue
            if owner:
                _lend(fd, 0o100, lent)
            try:
                nfd = os.open(part, DIR, dir_fd=fd)
            except FileNotFoundError:
                where = os.path.join(cur, part)
                if not create:
                    raise FileNotFoundError(
                        errno.ENOENT, os.strerror(errno.ENOENT), where
                    ) from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                nfd = os.open(part, DIR, dir_fd=fd)  # a link made meanwhile: ENOTDIR, not followed
            except OSError as e:
                if e.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                where = os.path.join(cur, part)
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    raise NotADirectoryError(
                        errno.ENOTDIR, os.strerror(errno.ENOTDIR), where
                    ) from None
                target = os.readlink(part, dir_fd=fd)
                if cur in fence:
                    raise LinkInPath(where, target) from None
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path) from None
                if target.startswith("/"):
                    nfd = os.open("/", DIR)
                    os.close(fd)
                    fd, cur = nfd, "/"
                todo += reversed([p for p in target.split("/") if p])
                continue
            os.close(fd)
            fd, cur = nfd, os.path.join(cur, part)
        if owner:
            _lend(fd, 0o300, lent)
        return fd, name
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def parent(
    path: str, fence: Fence = EVERYWHERE, *, owner: bool = False, create: bool = False
) -> Iterator[tuple[int, str]]:
    """``(fd, name)``: a descriptor of the directory that holds ``path``, found without following
    a link inside ``fence`` (``LinkInPath``), and ``path``'s last component, to act on with the
    ``*at`` calls (``dir_fd=fd``). ``owner``: directories of ours on the way get their owner's
    search bit, the parent its write bit too, for the block (modes put back after it).
    ``create``: missing directories on the way are made (mode 0700)."""
    lent: list[tuple[int, int]] = []
    try:
        fd, name = _walk(path, fence, owner, create, lent)
        try:
            yield fd, name
        finally:
            os.close(fd)
    finally:
        for keep, mode in reversed(lent):
            with contextlib.suppress(OSError):
                chmod_fd(keep, mode)
            os.close(keep)


def lstat_at(fd: int, name: str) -> os.stat_result | None:
    """What ``name`` is in the directory at ``fd`` (never followed); None when absent."""
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def lstat(path: str, fence: Fence = EVERYWHERE) -> os.stat_result:
    """``os.lstat`` that follows no link inside ``fence`` on the way (``LinkInPath``)."""
    with parent(path, fence) as (fd, name):
        return os.stat(name, dir_fd=fd, follow_symlinks=False)


def lexists(path: str, fence: Fence = EVERYWHERE) -> bool:
    """Whether something is at ``path``, reached without following a link inside ``fence``
    (``LinkInPath`` when a link is on the way; other errors count as something there)."""
    try:
        lstat(path, fence)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except LinkInPath:
        raise
    except OSError:
        return True
    return True


def chmod(path: str, mode: int, fence: Fence = EVERYWHERE) -> None:
    """chmod ``path`` itself (a link there is refused), reached as ``parent`` does."""
    with parent(path, fence, owner=True) as (pfd, name):
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
        try:
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OSError(errno.ELOOP, "it is a symbolic link", path)
            chmod_fd(fd, mode)
        finally:
            os.close(fd)


def rename(
    src: str, dst: str, fence: Fence = EVERYWHERE, expect: tuple[int, int] | None = None
) -> None:
    """Rename ``src`` to ``dst``, both reached as ``parent`` does (as the owner). ``expect``:
    ``src``'s (device, inode), checked first."""
    with (
        parent(src, fence, owner=True) as (sfd, sname),
        parent(dst, fence, owner=True) as (
            dfd,
            dname,
        ),
    ):
        if expect is not None:
            st = os.stat(sname, dir_fd=sfd, follow_symlinks=False)
            if (st.st_dev, st.st_ino) != expect:
                raise OSError(errno.ESTALE, "it is no longer the same directory", src)
        os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)


def symlink(text: str, path: str, fence: Fence = EVERYWHERE) -> None:
    """Make ``path`` a symbolic link to ``text``, reached as ``parent`` does (as the owner)."""
    with parent(path, fence, owner=True) as (fd, name):
        os.symlink(text, name, dir_fd=fd)
