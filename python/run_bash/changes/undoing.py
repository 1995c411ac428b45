"""Undo: a kept change set taken back path by path, byte-exact, and the plan of it (what an undo
would restore, remove, leave as a conflict and not recover)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import TYPE_CHECKING, Any

from .objects import DamagedBlob
from .render import Change, ChangeSet, display_path
from .restore import Changed, Tree, Unsafe
from .snapshot import (
    BORN,
    CONTENT_KINDS,
    DIR_FLAGS,
    FILE_KINDS,
    INO,
    KIND,
    MODE,
    RACY_NS,
    Entry,
    Snapshot,
    born_after,
    entry_data,
    same_state,
)
from .store import ID_ALPHABET, NotRecorded, Token, _Plan

if TYPE_CHECKING:
    from .store import ChangeStore


def _held(snap: Snapshot | NotRecorded, ch: Change, cur: Entry | None, tainted: bool) -> bool:
    """Whether what is at ``ch.path`` now (``cur``) can be given back after the undo removes or
    replaces it: the undo's own start (``snap``) kept it, so undoing the undo brings it back.

    When that start is not recorded, only the run's own output qualifies: the path exactly as
    the run left it, with content its change set kept, and only when the run destroyed nothing
    whose content was not kept (``tainted``: the run's output may then hold those bytes)."""
    if cur is None:
        return True
    if cur[KIND] not in CONTENT_KINDS:
        return False
    if isinstance(snap, NotRecorded):
        a = ch.after
        return not tainted and a is not None and a[KIND] in CONTENT_KINDS and same_state(cur, a)
    e = snap.entry(ch.path)
    return e is not None and e[KIND] in CONTENT_KINDS and same_state(e, cur)


def _not_held(ch: Change, snap: Snapshot | NotRecorded, cur: Entry, tainted: bool) -> str:
    """Why ``_held`` said no (a "left in place" reason)."""
    if cur[KIND] not in CONTENT_KINDS:
        return f"not kept by this undo ({ch.reason(cur)})"
    if isinstance(snap, NotRecorded):
        if tainted and same_state(cur, ch.after):
            why = "it may hold content of paths the run changed that were not kept"
        else:
            why = "it is not as the run left it"
        return f"not kept by this undo ({why}; the undo's own {snap})"
    e = snap.entry(ch.path)
    if e is not None and e[KIND] not in CONTENT_KINDS:
        return f"not kept by this undo ({ch.reason(e)})"
    return "not kept by this undo (it changed as the undo began)"


def _above(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def _moved_from_unkept(cs: ChangeSet) -> dict[str, str]:
    """The paths the run left that are (or are in) what it moved from a path whose content
    undo does not keep (``mv node_modules nm2`` with ``node_modules/`` ignored beyond the
    budget): same inode, the old path gone or changed. Removing them would finish a loss the
    store cannot give back, so they stay. By path; the value is where it came from."""
    unkept = {
        c.before[INO]: c.path
        for c in cs.changes
        if c.before is not None and c.before[KIND] not in CONTENT_KINDS and c.before[INO]
    }
    if not unkept:
        return {}
    return {
        c.path: unkept[c.after[INO]]
        for c in cs.changes
        if c.after is not None and c.after[INO] in unkept and unkept[c.after[INO]] != c.path
    }


def _born_during(tree: Tree, path: str, ino: int, began: float) -> bool:
    """Whether the file at ``path`` (inode ``ino``) was born after the run began (by ``statx``):
    then it is not what the run moved from elsewhere, whatever its inode number. False when
    that cannot be told."""
    try:
        fd, name = tree._parent(path, reading=True)
    except (OSError, Unsafe):
        return False
    try:
        return born_after(fd, name, ino, int(began * 1e9))
    finally:
        os.close(fd)


def _older_than_the_run(tree: Tree, path: str, ino: int, began: float) -> bool:
    """Whether the file at ``path`` (inode ``ino``) was born well before the run began (by
    ``statx``): a run that destroyed content undo does not keep and left such a file at a new
    path moved it there (``mv node_modules/pkg src/pkg``). False when the birth time is not
    known."""
    try:
        fd, name = tree._parent(path, reading=True)
    except (OSError, Unsafe):
        return False
    try:
        if not born_after(fd, name, ino, 0):
            return False  # no birth time here
        return not born_after(fd, name, ino, int(began * 1e9) - RACY_NS)
    finally:
        os.close(fd)


def _plan(cs: ChangeSet, tree: Tree, force: bool, snap: Snapshot | NotRecorded) -> _Plan:
    """Each change: restore, remove, a conflict, or left as it is (``lost``, with why).

    ``snap`` is the undo's own start (or why it is not recorded). Undo never deletes or
    overwrites bytes it cannot give back: whatever is at a path now is removed or replaced only
    when ``snap`` keeps it, so that undoing the undo brings it back (``_held``; without a
    recorded start, only the run's own untainted output). A run's output may hold
    older bytes (``gzip`` of a file over the size cap, ``cp`` then ``rm``), and a file born
    during the run may be someone else's (saved while a background run went on); neither is
    destroyed on the strength of what the run's change set says. So: a path that existed before
    the run and whose content was not kept is left alone ("left in place" while it exists, "not
    recovered" when the run deleted it); a path the run created whose content was not kept is
    removed only when it is a file born during the run, unchanged since, and the undo's start
    kept it; a path that changed since the run is a conflict, replaced only with ``force`` and
    under the same rule."""
    restore: list[tuple[Change, Entry, Entry | None]] = []
    remove: list[tuple[Change, Entry | None]] = []
    conflicts: list[tuple[Change, str]] = []
    lost: list[tuple[Change, str]] = []
    # The run changed or deleted content that was not kept: its output may hold those bytes.
    tainted = any(c.before is not None and c.before[KIND] not in CONTENT_KINDS for c in cs.changes)
    moved = _moved_from_unkept(cs)
    if moved:  # a file the run made may have the inode number of one it deleted, freed meanwhile
        inos = {c.path: c.after[INO] for c in cs.changes if c.after is not None}
        moved = {p: src for p, src in moved.items() if not _born_during(tree, p, inos[p], cs.began)}
    kept_inos = {
        c.before[INO]
        for c in cs.changes
        if c.before is not None and c.before[KIND] in CONTENT_KINDS
    }
    for ch in cs.changes:
        b, a = ch.before, ch.after
        src = next((moved[p] for p in (ch.path, *_above(ch.path)) if p in moved), None)
        if src is not None and a is not None:
            lost.append((ch, f"left in place: moved here from {display_path(src)}, not kept"))
            continue
        if (
            tainted
            and b is None
            and a is not None
            and a[INO] not in kept_inos
            and _older_than_the_run(tree, ch.path, a[INO], cs.began)
        ):
            why = "left in place: older than the run, moved here from what undo does not keep"
            lost.append((ch, why))
            continue
        try:
            cur = tree.current(ch.path)
        except Unsafe as err:
            conflicts.append((ch, str(err)))
            continue
        except OSError as err:
            conflicts.append((ch, f"cannot read it ({err.strerror})"))
            continue
        if b is not None and b[KIND] not in CONTENT_KINDS:
            where = "not recovered" if cur is None else "left in place"
            lost.append((ch, f"{where}: {ch.reason(b)}"))
            continue
        if b is None and a is not None and a[KIND] not in CONTENT_KINDS:
            if cur is None:
                continue
            removable = a[BORN] and a[KIND] in FILE_KINDS and not stat.S_ISDIR(a[MODE])
            if not (removable and same_state(cur, a)):
                lost.append((ch, f"left in place: {ch.reason(a)}, made by the run"))
            elif not _held(snap, ch, cur, tainted):
                lost.append((ch, f"left in place: {_not_held(ch, snap, cur, tainted)}"))
            else:
                remove.append((ch, cur))
            continue
        if same_state(cur, b):
            continue
        changed = not same_state(cur, a)
        if changed and not force:
            conflicts.append((ch, _why_conflict(cur)))
            continue
        if not _held(snap, ch, cur, tainted):
            assert cur is not None
            since = "changed since the run, " if changed else ""
            lost.append((ch, f"left in place: {since}{_not_held(ch, snap, cur, tainted)}"))
            continue
        if changed:
            conflicts.append((ch, _why_conflict(cur)))
        if b is None:
            remove.append((ch, cur))
        else:
            restore.append((ch, b, cur))
    return {"restore": restore, "remove": remove, "conflicts": conflicts, "lost": lost}


def plan(store: ChangeStore, run_id: str, force: bool = False) -> dict[str, Any]:
    """What ``undo`` would do now, without doing it: ``{run, restore, remove, conflicts,
    not_recovered}`` (paths for display; conflicts and not_recovered as ``{path, why}``).
    Raises KeyError when no change set is kept for ``run_id``."""
    cs = store.get(run_id)
    if cs is None:
        raise KeyError(run_id)
    store._init()
    try:
        fd = os.open(cs.project, DIR_FLAGS)
    except FileNotFoundError:
        fd = -1  # the project directory itself is gone: everything is absent
    try:
        p = _plan(cs, Tree(fd, store.limits.max_file_size), force, store.peek(cs.project, cs.scope))
    finally:
        if fd >= 0:
            os.close(fd)
    return {
        "run": run_id,
        "project": display_path(cs.project),
        "restore": [display_path(ch.path) for ch, _, _ in p["restore"]],
        "remove": [display_path(ch.path) for ch, _ in p["remove"]],
        "conflicts": [{"path": display_path(ch.path), "why": w} for ch, w in p["conflicts"]],
        "not_recovered": [{"path": display_path(ch.path), "why": w} for ch, w in p["lost"]],
    }


def undo(
    store: ChangeStore, run_id: str, force: bool = False, new_run_id: str | None = None
) -> dict[str, Any]:
    """Take back what ``run_id`` changed, path by path.

    Modified and deleted files come back byte-exact with their mode, symlinks with their
    target, removed directories (empty ones too) are recreated, added paths and directories
    the run created are removed. A path that changed again since the run is a conflict: left
    alone unless ``force``. The undo is itself recorded as a run (``new_run_id``, default a
    fresh id) so it can be undone.

    Returns ``{run, restored, removed, conflicts, not_recovered, errors, recorded}``: paths for
    display; conflicts/not_recovered/errors as ``{path, why}``; ``run`` is the undo's own id
    and ``recorded`` its change-set summary (or why it was not recorded). Raises KeyError
    when no change set is kept for ``run_id``.
    """
    cs = store.get(run_id)
    if cs is None:
        raise KeyError(run_id)
    store._init()
    new_id = new_run_id or "u" + "".join(secrets.choice(ID_ALPHABET) for _ in range(5))
    if not os.path.lexists(cs.project) and os.path.isdir(os.path.dirname(cs.project)):
        with contextlib.suppress(FileExistsError):
            os.mkdir(cs.project)  # the run removed the project directory itself
    token = store._begin(new_id, cs.project, run_id, f"undo of run {run_id}", cs.scope)
    restored: list[str] = []
    removed: list[str] = []
    errors: list[tuple[Change, str]] = []
    left: list[tuple[Change, str]] = []
    try:
        fd = os.open(cs.project, DIR_FLAGS)
    except OSError as err:
        if isinstance(token, Token):
            store.abandon(token)
        raise FileNotFoundError(f"cannot open the project {cs.project}: {err.strerror}") from None
    try:
        tree = Tree(fd, store.limits.max_file_size)
        p = _plan(cs, tree, force, token.before if isinstance(token, Token) else token)
        # Deepest first: a directory the run created goes after what it holds; a path that
        # must change type loses its current form before the old one comes back.
        doomed = [(ch, cur) for ch, cur in p["remove"]]
        doomed += [
            (ch, cur)
            for ch, before, cur in p["restore"]
            if cur is not None and (cur[KIND] == "d") != (before[KIND] == "d")
        ]
        doomed.sort(key=lambda x: x[0].path.count("/"), reverse=True)
        for ch, cur in doomed:
            if cur is None:
                continue
            try:
                tree.remove(ch.path, cur)
                if ch.before is None:
                    removed.append(ch.path)
            except Changed as err:
                left.append((ch, f"left in place: {err}"))
            except OSError as err:
                if err.errno == errno.ENOTEMPTY:
                    left.append((ch, "left in place: it holds paths left in place or made since"))
                else:
                    errors.append((ch, _os_why(err)))
            except Unsafe as err:
                errors.append((ch, _os_why(err)))
        failed = {ch.path for ch, _ in errors} | {ch.path for ch, _ in left}
        dir_modes: list[tuple[str, int]] = []
        for ch, b, cur in sorted(p["restore"], key=lambda x: x[0].path.count("/")):
            if ch.path in failed:
                continue
            try:
                # What is there now was checked (``_plan``); it is replaced only if still that.
                expect = cur if cur is not None and cur[KIND] != "d" else None
                if b[KIND] == "d":
                    tree.mkdir(ch.path, b[MODE])
                    dir_modes.append((ch.path, b[MODE]))
                elif b[KIND] == "l":
                    tree.symlink(ch.path, entry_data(b), expect)
                else:
                    tree.write_file(ch.path, store.objects.get(entry_data(b)), b[MODE], expect)
                restored.append(ch.path)
            except Changed as err:
                left.append((ch, f"left in place: {err}"))
            except DamagedBlob as err:
                errors.append((ch, str(err)))
            except (OSError, Unsafe) as err:
                errors.append((ch, _os_why(err)))
        for path, mode in sorted(dir_modes, key=lambda x: x[0].count("/"), reverse=True):
            with contextlib.suppress(OSError, Unsafe):
                tree.chmod_dir(path, mode)
    finally:
        os.close(fd)
    recorded: str
    if isinstance(token, Token):
        recorded = store.finish(token).summary() or "no change"
    else:
        recorded = str(token)
    conflicts = p["conflicts"]
    return {
        "run": new_id if isinstance(token, Token) else None,
        "restored": [display_path(x) for x in restored],
        "removed": [display_path(x) for x in removed],
        "conflicts": [
            {"path": display_path(ch.path), "why": w + (" (forced)" if force else "")}
            for ch, w in conflicts
        ],
        "not_recovered": [
            {"path": display_path(ch.path), "why": w} for ch, w in [*p["lost"], *left]
        ],
        "errors": [{"path": display_path(ch.path), "why": w} for ch, w in errors],
        "recorded": recorded,
    }


def _why_conflict(cur: Entry | None) -> str:
    if cur is None:
        return "deleted since the run"
    return "changed since the run"


def _os_why(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror.lower()
    return str(err)
