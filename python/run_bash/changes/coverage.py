"""Whether undo can take back what a command does to some paths: the approval gate's question.

Pure: it reads a snapshot (the project's index) and nothing else. A path is covered when undo
holds everything that is at it now: the path does not exist (nothing to lose), or it is a file
whose content is kept, or a directory in which nothing's content is missing from the store (no
ignored tree over the budget, no file over the size limit, no unreadable or special file, no
repository data). A path reached through a symlink, or outside the part of the project walked, is
not covered: what it names is not in the index. A ``..`` in a path is resolved as the kernel does,
after what comes before it: only over a directory the index holds (a ``..`` after a symlink names
the parent of the symlink's target, which the index does not know). A write in place reaches
every name of a file: a file with more than one name (a hard link) is not covered by undo of one.
An effect that follows symlinks (``find -L``, ``truncate`` of a glob's names, ``rm -r src/*/``)
is not covered under a path that holds a symlink: it acts where the symlink points.

One question is not the index's to answer: a second name made for a file from outside the
directories the index watches (``ln src/a ~/backup/a``, a store of hard links kept elsewhere)
tells no watch of the project (the kernel reports a link count only to a watch on the file
itself), so the index keeps the count it read. ``linked_now`` asks ``lstat`` for the files a
write in place reaches.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable

from .render import Change, display_path
from .snapshot import CONTENT_KINDS, KIND, MODE, Snapshot, join

KIND_WORDS = {
    "i": "ignored and over the undo budget",
    "b": "over undo.max_file_size",
    "u": "unreadable",
    "s": "a FIFO, socket or device",
    "g": "repository data (.git)",
    "c": "over undo.max_files",
}
GIT_DIR = ".git"  # the project's own repository, which git's own effects write
LINK_CHECK_MAX = 10000  # files a write in place may reach whose link count is asked afresh


def _under(rel: str, root: str) -> bool:
    return not root or rel == root or rel.startswith(root + "/")


def _physical(snap: Snapshot, rel: str) -> tuple[str, str | None]:
    """``rel`` with its ``..`` resolved as the kernel resolves them, and None; or why that
    cannot be told from the index ("", why): a ``..`` after a symlink, a file, a path that does
    not exist or one the index does not hold, or one that leads out of the project."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." not in parts:
        return "/".join(parts), None
    out: list[str] = []
    for part in parts:
        if part != "..":
            out.append(part)
            continue
        if not out:
            return "", f"{display_path(rel)} leads out of the project"
        here = "/".join(out)
        e = snap.entry(here)
        if e is None or not (e[KIND] == "d" or (e[KIND] != "l" and stat.S_ISDIR(e[MODE]))):
            what = "a symlink" if e is not None and e[KIND] == "l" else "no directory undo knows"
            return "", f"{display_path(rel)} has `..` after {display_path(here)}, {what}"
        out.pop()
    return "/".join(out), None


def uncovered(
    snap: Snapshot,
    rel: str,
    *,
    git: bool = False,
    inplace: bool = False,
    follow: bool = False,
    untracked: Callable[[str], bool] | None = None,
) -> str | None:
    """Why undo does not cover the project-relative path ``rel`` (None: it does). ``git``: the
    effect is git's own (reset, checkout, restore, clean without ``-x``), which writes the
    repository's index itself: the project's ``.git`` does not count (a nested repository's
    does: ``git clean -ffd`` deletes it). ``inplace``: the effect writes files in place
    (``truncate``, ``shred``): a file with another name under ``rel`` is not covered.
    ``follow``: the effect follows symlinks under ``rel``: one there is not covered.
    ``untracked``: the effect is only git's, which never touches an ignored file git does not
    track: an ignored directory beyond the budget does not count when this says git tracks
    nothing under it (asked of git)."""
    rel, why = _physical(snap, rel)
    if why is not None:
        return why
    if not any(_under(rel, root) for root in snap.scope):
        return f"{display_path(rel or '.')} is outside what the sandbox can write"
    parts = rel.split("/") if rel else []
    acc = ""
    for i, part in enumerate(parts):
        kids = snap.dirs.get(acc)
        here = join(acc, part)
        if kids is None:  # above the part walked (a scope root lies deeper)
            acc = here
            continue
        e = kids.get(part)
        if e is None:
            return None  # does not exist now: nothing to lose
        if e[KIND] == "l":
            return f"{display_path(here)} is a symlink"
        if e[KIND] not in CONTENT_KINDS:
            if git and here == GIT_DIR:
                return None
            return f"{display_path(here)} is {_why(e, here)}"
        if e[KIND] == "f":
            if i < len(parts) - 1:
                return f"{display_path(here)} is a file"
            break
        acc = here
    return (
        _hole_below(snap, rel, git, untracked)
        or (_linked_below(snap, rel) if inplace else None)
        or (_symlink_below(snap, rel) if follow else None)
    )


def _hole_below(
    snap: Snapshot, rel: str, git: bool, untracked: Callable[[str], bool] | None = None
) -> str | None:
    for d in sorted(snap.holes):
        if not _under(d, rel):
            continue
        for name, e in sorted(snap.dirs.get(d, {}).items()):
            path = join(d, name)
            if e[KIND] not in snap.holes[d] or (git and path == GIT_DIR):
                continue
            if untracked is not None and e[KIND] == "i" and untracked(path):
                continue  # git's own effect, and git tracks nothing there
            return f"{display_path(path)} is {_why(e, path)}"
    return None


def _linked_below(snap: Snapshot, rel: str) -> str | None:
    below = [path for path in snap.links if _under(path, rel)]
    if not below:
        return None
    path = min(below)  # the same name every time, without sorting every link for every path
    return (
        f"{display_path(path)} has more than one name (a hard link): a write in place "
        "changes every name, and undo puts back only this one"
    )


def _symlink_below(snap: Snapshot, rel: str) -> str | None:
    """The first symlink at or under ``rel`` (by path), as why an effect that follows it is not
    covered."""
    e = snap.entry(rel) if rel else None
    if e is not None and e[KIND] == "l":
        return f"{display_path(rel)} is a symlink"
    found = []
    for d, kids in snap.dirs.items():
        if _under(d, rel):
            found += [join(d, name) for name, k in kids.items() if k[KIND] == "l"]
    if not found:
        return None
    path = min(found)
    return (
        f"{display_path(path)} is a symlink, and the effect follows it: it acts where the "
        "symlink points, out of undo's reach"
    )


def _why(e: tuple[object, ...], path: str) -> str:
    kind = str(e[KIND])
    if kind == "i":
        return Change(path, None, e).reason(e)  # type: ignore[arg-type]
    return KIND_WORDS.get(kind, "not kept")


def covers(
    snap: Snapshot,
    project: str,
    paths: Iterable[str],
    *,
    git: bool = False,
    inplace: bool = False,
    follow: frozenset[str] = frozenset(),
    untracked: Callable[[str], bool] | None = None,
) -> str | None:
    """None when undo covers every absolute path in ``paths`` (``..`` in them as written: it is
    resolved against the index), else why not. ``follow``: those of ``paths`` under which the
    effect follows symlinks; ``untracked``: see ``uncovered``."""
    top = project.rstrip("/")
    for p in paths:
        if p != project and not p.startswith(top + "/"):
            return f"{p} is outside the project {project}"
        rel = p[len(top) + 1 :]
        why = uncovered(
            snap, rel, git=git, inplace=inplace, follow=p in follow, untracked=untracked
        )
        if why is not None:
            return why
    return None


def linked_now(snap: Snapshot, project: str, paths: Iterable[str]) -> str | None:
    """Why a write in place under the absolute ``paths`` is not covered, by what ``lstat`` says
    now (None: no file the index holds under them has another name). The index cannot know a
    name made from outside what it watches; more than ``LINK_CHECK_MAX`` files are not asked
    one by one, and count as not covered."""
    top = project.rstrip("/")
    seen = 0
    for p in paths:
        rel, why = _physical(snap, p[len(top) + 1 :] if p != project else "")
        if why is not None:
            return why
        e = snap.entry(rel) if rel else None
        files = [rel] if e is not None and e[KIND] != "d" else []
        for d, kids in snap.dirs.items():
            if _under(d, rel):
                files += [join(d, n) for n, k in kids.items() if k[KIND] != "d"]
        for f in sorted(files):
            seen += 1
            if seen > LINK_CHECK_MAX:
                return (
                    f"a write in place here reaches more than {LINK_CHECK_MAX} files, too many "
                    "to check each for another name (a hard link)"
                )
            try:
                st = os.lstat(os.path.join(top, f))
            except OSError:
                continue  # gone: nothing of it to write
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                return (
                    f"{display_path(f)} has more than one name (a hard link): a write in place "
                    "changes every name, and undo puts back only this one"
                )
    return None


def into_git(project: str, path: str) -> str | None:
    """The symbolic link of the project through which ``path`` (absolute, as the command line
    names it: ``..`` not collapsed) leads into a ``.git`` (None: it does not). Asked of the file
    system now, as the command's own open will resolve it (``os.path.realpath``), not of undo's
    index, which a link the user made since the last run is not in yet: a write there lands in
    git's own data, which the pause list's reading of the text cannot see. Outside the project
    it is the sandbox's to judge."""
    top = os.path.normpath(project)
    named = os.path.normpath(path)
    if not (named == top or named.startswith(top.rstrip("/") + "/")):
        return None
    if GIT_DIR in named[len(top) :].split("/"):
        return None  # named in the text: the pause list sees it
    real_top = os.path.realpath(top)
    real = os.path.realpath(path)
    if not (real == real_top or real.startswith(real_top.rstrip("/") + "/")):
        return None
    if GIT_DIR not in real[len(real_top) :].split("/"):
        return None
    # The first link on the way, as the text names it.
    rel = [p for p in path[len(top) :].split("/") if p not in ("", ".")]
    cur = top
    for part in rel:
        cur = os.path.join(cur, part)
        if os.path.islink(cur):
            return os.path.relpath(os.path.normpath(cur), top)
    return os.path.relpath(named, top)
