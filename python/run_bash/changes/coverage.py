"""Whether undo can take back what a command does to some paths: the approval gate's question.

Pure: it reads a snapshot (the project's index) and nothing else. A path is covered when undo
holds everything that is at it now: the path does not exist (nothing to lose), or it is a file
whose content is kept, or a directory in which nothing's content is missing from the store (no
ignored tree over the budget, no file over the size limit, no unreadable or special file, no
repository data). A path reached through a symlink, or outside the part of the project walked, is
not covered: what it names is not in the index.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .render import Change, display_path
from .snapshot import CONTENT_KINDS, KIND, Snapshot, join

KIND_WORDS = {
    "i": "ignored and over the undo budget",
    "b": "over undo.max_file_size",
    "u": "unreadable",
    "s": "a FIFO, socket or device",
    "g": "repository data (.git)",
    "c": "over undo.max_files",
}


def _under(rel: str, root: str) -> bool:
    return not root or rel == root or rel.startswith(root + "/")


def uncovered(snap: Snapshot, rel: str, *, git: bool = False) -> str | None:
    """Why undo does not cover the project-relative path ``rel`` (None: it does). ``git``: the
    effect is git's own (reset, checkout, restore, clean without ``-x``), which writes the
    repository's index itself: its ``.git`` does not count."""
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
            if git and e[KIND] == "g":
                return None
            return f"{display_path(here)} is {_why(e, here)}"
        if e[KIND] == "f":
            return None if i == len(parts) - 1 else f"{display_path(here)} is a file"
        acc = here
    return _hole_below(snap, rel, git)


def _hole_below(snap: Snapshot, rel: str, git: bool) -> str | None:
    for d in sorted(snap.holes):
        if not _under(d, rel):
            continue
        kinds = snap.holes[d].replace("g", "") if git else snap.holes[d]
        if not kinds:
            continue
        for name, e in sorted(snap.dirs.get(d, {}).items()):
            if e[KIND] in kinds:
                path = join(d, name)
                return f"{display_path(path)} is {_why(e, path)}"
    return None


def _why(e: tuple[object, ...], path: str) -> str:
    kind = str(e[KIND])
    if kind == "i":
        return Change(path, None, e).reason(e)  # type: ignore[arg-type]
    return KIND_WORDS.get(kind, "not kept")


def covers(snap: Snapshot, project: str, paths: Iterable[str], *, git: bool = False) -> str | None:
    """None when undo covers every absolute, normalized path in ``paths``, else why not."""
    for p in paths:
        if p != project and not p.startswith(project.rstrip("/") + "/"):
            return f"{p} is outside the project {project}"
        rel = os.path.relpath(p, project)
        why = uncovered(snap, "" if rel == "." else rel, git=git)
        if why is not None:
            return why
    return None
