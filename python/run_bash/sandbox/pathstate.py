"""The state of the entries of a ``PATH`` directory, taken before a run and compared after it
(``judge``): a program that changed, or a new one that shadows one found later on ``PATH``, must
not stay as the run left it (``pathguard.py`` says which directories are compared).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from run_bash.sandbox.pathguard import MAX_ENTRIES, PathDir, Sig
from run_bash.sandbox.places import Places


def entry_sig(path: str) -> Sig | None:
    """What an entry of a PATH directory is: its type, mode, inode, size and times, and for a
    symlink its text and its target's identity, mode, size and times. None when absent."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    sig: Sig = (
        stat.S_IFMT(st.st_mode),
        stat.S_IMODE(st.st_mode),
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )
    if stat.S_ISLNK(st.st_mode):
        try:
            text: str | None = os.readlink(path)
        except OSError:
            text = None
        try:
            t = os.stat(path)
            target: Sig | None = (
                t.st_dev,
                t.st_ino,
                t.st_mode,
                t.st_size,
                t.st_mtime_ns,
                t.st_ctime_ns,
            )
        except OSError:
            target = None
        sig += (text, target)
    return sig


def dir_state(path: str) -> dict[str, Sig] | None:
    """Every entry of a PATH directory and its state; None when it is not a directory."""
    try:
        with os.scandir(path) as it:
            names = [e.name for e in it]
    except OSError:
        return None
    out: dict[str, Sig] = {}
    for name in names[:MAX_ENTRIES]:
        sig = entry_sig(os.path.join(path, name))
        if sig is not None:
            out[name] = sig
    return out


def runnable(path: str) -> bool:
    """Whether a PATH lookup would run ``path``: a regular file (through its links) with an
    execute bit."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111)


def shadowed(pd: PathDir, name: str) -> str | None:
    """The command ``name`` in ``pd`` would shadow: the first executable of that name in a later
    ``PATH`` entry, unless it is the very same file. None when nothing is shadowed or the entry
    cannot be run."""
    mine = os.path.join(pd.path, name)
    try:
        st = os.stat(mine)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o111:
        return None
    for later in pd.later:
        cand = os.path.join(later, name)
        try:
            cst = os.stat(cand)
        except OSError:
            continue
        if stat.S_ISDIR(cst.st_mode) or not cst.st_mode & 0o111:
            continue
        if (cst.st_dev, cst.st_ino) == (st.st_dev, st.st_ino):
            return None  # a link to the very program PATH would find anyway
        return cand
    return None


@dataclass(frozen=True)
class Change:
    """An entry of a PATH directory that must not stay as a run left it.

    ``why`` says what happened; ``link`` is the text to put back for a symlink whose text
    changed (None: the entry goes to the quarantine)."""

    name: str
    why: str
    link: str | None = None


def _link(sig: Sig | None) -> str | None:
    """A symlink's text from its state (None: not a symlink, or unreadable)."""
    if sig is None or sig[0] != stat.S_IFLNK:
        return None
    text: str | None = sig[6]
    return text


def judge(
    pd: PathDir, before: Mapping[str, Sig] | None, name: str, writable: Places
) -> Change | None:
    """Whether the entry ``name`` of ``pd``, compared with its state before the run, must go.
    A link whose text is unchanged counts as changed only when its target lies where a run can
    write (the system's own programs are updated by the system); so does any entry of a directory
    outside every writable grant."""
    path = os.path.join(pd.path, name)
    was = before.get(name) if before is not None else None
    now = entry_sig(path)
    if now == was or now is None or not runnable(path):
        return None  # unchanged, removed (a later entry is found instead) or not a program
    if pd.free and _link(now) is not None:
        free = Places(pd.free)
        if path in free or os.path.realpath(path) in free:
            return None  # it leads where runs may change what it runs (``path_writable``)
    if pd.outside and os.path.realpath(path) not in writable:
        return None  # a directory no run writes: only what leads into a writable grant counts
    if was is None:
        later = shadowed(pd, name)
        if later is None:
            return None
        return Change(name, f"appeared and would run instead of {later} for you")
    old_link, new_link = _link(was), _link(now)
    if old_link is not None and old_link == new_link and was[:6] == now[:6]:
        if os.path.realpath(path) not in writable:
            return None
        return Change(name, "now runs a changed program (its target changed)")
    if old_link is not None:
        return Change(name, "was led elsewhere or replaced", link=old_link)
    return Change(name, "was changed (content, mode or type)")


def changes(pd: PathDir, before: Mapping[str, Sig] | None, writable: Places) -> list[Change]:
    """Every entry of ``pd`` that must not stay as the run left it (see ``judge``)."""
    now = dir_state(pd.path) or {}
    out = []
    for name in dict.fromkeys([*(before or {}), *now]):
        c = judge(pd, before, name, writable)
        if c is not None:
            out.append(c)
    return out
