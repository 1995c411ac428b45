"""Finding repositories in a tree the way git discovers them: a ``.git`` entry, or a directory
that is itself a git directory.

``TreeScan`` walks the trees a run can write after each run; an unchanged directory (same inode,
ctime and mtime) is not listed again, so a walk of an unchanged tree costs one ``lstat`` per
directory. ``nested_git_dirs`` lists the worktree and submodule git directories inside a common
directory.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass

# Nested submodule git dirs (modules/a/modules/b/...) and worktree admin dirs looked at per repo.
MAX_GIT_DIRS = 512
# Directories of the trees walked to find repositories (one lstat each when unchanged).
MAX_SCAN_DIRS = 100_000


@dataclass(frozen=True)
class _DirInfo:
    ident: tuple[int, int, int]  # (inode, ctime_ns, mtime_ns): any entry added/removed changes it
    dotgit: bool
    bare: bool
    subdirs: tuple[str, ...]  # full paths of the subdirectories to walk


def looks_like_git_dir(names: Iterable[str] | str) -> bool:
    """Whether a directory has what git requires of a git directory: ``HEAD`` with ``objects``
    and ``refs``, or ``HEAD`` with a ``commondir`` link (a linked worktree's git directory, whose
    objects and refs live in the common directory). Names only: this finds a superset of what git
    accepts (each one found is judged)."""
    if isinstance(names, str):
        try:
            names = os.listdir(names)
        except OSError:
            return False
    have = set(names)
    return "HEAD" in have and ({"objects", "refs"} <= have or "commondir" in have)


class TreeScan:
    """Finds every ``.git`` entry and bare repository under a tree. A directory whose (inode,
    ctime, mtime) is unchanged since the last walk is not listed again (ctime cannot be set back
    from user space), so a walk of an unchanged tree costs one lstat per directory."""

    def __init__(self) -> None:
        self._dirs: dict[str, _DirInfo] = {}
        self._lock = threading.Lock()

    def find(
        self, root: str, skip: frozenset[str] = frozenset()
    ) -> tuple[list[tuple[str, str]], bool]:
        """``(path, kind)`` for every ``.git`` entry (kind "dotgit", the entry's path) and bare
        repository directory (kind "bare") under ``root``; symlinked directories are not entered,
        nor those in ``skip`` (kept read-only whole: nothing can appear in them). The flag says
        the walk stopped at ``MAX_SCAN_DIRS`` directories."""
        found: list[tuple[str, str]] = []
        seen: dict[str, _DirInfo] = {}
        cache = self._dirs  # read without the lock: entries are replaced whole, never mutated
        lstat, isdir, listing = os.lstat, stat.S_ISDIR, self._list
        stack = [root]
        truncated = False
        listed = False
        while stack:
            if len(seen) >= MAX_SCAN_DIRS:
                truncated = True
                break
            d = stack.pop()
            if d in skip:
                continue
            try:
                st = lstat(d)
            except OSError:
                continue
            if not isdir(st.st_mode):
                continue
            ident = (st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
            info = cache.get(d)
            if info is None or info.ident != ident:
                info = listing(d, ident)
                listed = True
            seen[d] = info
            if info.dotgit:
                found.append((d + "/.git", "dotgit"))
            if info.bare:
                found.append((d, "bare"))  # the root too: git takes a bare-shaped cwd for a repo
                stack += [
                    p for p in info.subdirs if p.rpartition("/")[2] not in ("objects", "refs")
                ]
            else:
                stack += info.subdirs
        if listed or truncated:
            with self._lock:
                # Keep what this walk saw; forget directories of this tree that are gone (a walk
                # that listed nothing again saw exactly the directories it saw before).
                if not truncated and not skip:
                    prefix = root.rstrip("/") + "/"
                    for path in [p for p in self._dirs if p.startswith(prefix) and p not in seen]:
                        del self._dirs[path]
                self._dirs.update(seen)
        return found, truncated

    @staticmethod
    def _list(d: str, ident: tuple[int, int, int]) -> _DirInfo:
        names: list[str] = []
        subdirs: list[str] = []
        dotgit = False
        _make_listable(d)
        try:
            with os.scandir(d) as it:
                for entry in it:
                    names.append(entry.name)
                    if entry.name == ".git":
                        dotgit = True
                        continue  # a git dir's inside is covered by its own members
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            subdirs.append(d + "/" + entry.name)
        except OSError:
            pass
        return _DirInfo(ident, dotgit, looks_like_git_dir(names), tuple(subdirs))


def _make_listable(d: str) -> None:
    """A directory of ours that a run made unreadable would hide what is in it: give the owner
    read and search permission back."""
    try:
        st = os.lstat(d)
    except OSError:
        return
    if st.st_uid == os.geteuid() and st.st_mode & 0o500 != 0o500:
        with contextlib.suppress(OSError):
            os.chmod(d, stat.S_IMODE(st.st_mode) | 0o500)


def nested_git_dirs(common: str) -> list[str]:
    """Linked worktree admin dirs (``worktrees/*``) and submodule git dirs (``modules/**``,
    nested ones too) under a common dir."""
    out: list[str] = []
    stack = [common]
    while stack and len(out) < MAX_GIT_DIRS:
        g = stack.pop()
        base = os.path.join(g, "worktrees")
        if os.path.isdir(base) and not os.path.islink(base):
            with contextlib.suppress(OSError), os.scandir(base) as it:
                out += [e.path for e in it if e.is_dir(follow_symlinks=False)]
        base = os.path.join(g, "modules")
        if os.path.islink(base) or not os.path.isdir(base):
            continue
        for root, dirs, files in os.walk(base):
            if looks_like_git_dir([*dirs, *files]):
                out.append(root)
                stack.append(root)
                dirs[:] = []  # its own modules/ is walked from the stack
            if len(out) >= MAX_GIT_DIRS:
                break
    return out[:MAX_GIT_DIRS]
