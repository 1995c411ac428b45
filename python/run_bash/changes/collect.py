"""Retention of the change store: what it holds on disk (``usage``) and the collection that keeps it
under ``undo.max_store`` (idle projects dropped, oldest change sets first, unreferenced blobs
removed)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from typing import Any

from .snapshot import KIND, entry_data
from .store import PROJECT_IDLE_S, ChangeStore, _read_snapshot


def usage(store: ChangeStore) -> dict[str, Any]:
    """For health: ``{path, bytes, runs, projects}`` (bytes on disk, walked now)."""
    total = 0
    for dirpath, _dirs, files in os.walk(store.root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    projects = 0
    with contextlib.suppress(OSError):
        projects = len(os.listdir(os.path.join(store.root, "projects")))
    return {
        "path": store.root,
        "bytes": total,
        "runs": len(store._records()),
        "projects": projects,
    }


def collect(store: ChangeStore) -> dict[str, int]:
    """Enforce retention now: drop projects idle for 30 days, then while the store is over
    ``max_store`` drop the oldest change sets (then idle projects' snapshots), and remove
    blobs nothing refers to. Returns ``{bytes, removed_blobs, removed_runs}``.

    The newest change set of each project is never dropped for size: it is the run whose end
    just offered its undo (a run that deletes files and then writes more than the store holds
    must still be undone); the store stays over ``max_store`` until a later run replaces it."""
    store._init()
    removed_runs = 0
    with store._gc_lock(exclusive=True):
        drop_idle_projects(store)
        while True:
            removed_blobs, packs = store.objects.repack(live_hashes(store))
            size = packs + meta_bytes(store)
            if size <= store.limits.max_store:
                break
            every = store._records()  # oldest first per project
            newest = {r[0]: r[3] for r in every}
            records = sorted(
                (r for r in every if newest[r[0]] != r[3]), key=lambda r: os.stat(r[3]).st_mtime
            )
            if not records:
                if not drop_snapshots_of_idle(store):
                    break
                continue
            for rec in records[: max(1, len(records) // 4)]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(rec[3])
                    removed_runs += 1
        store._pruned = 0
        store._written = 0
        store._size_at_gc = size
        tmp = store._tmp
        for name in os.listdir(tmp):  # leftovers of a crashed write
            p = os.path.join(tmp, name)
            with contextlib.suppress(OSError):
                if time.time() - os.lstat(p).st_mtime > 3600:
                    os.unlink(p)
    return {"bytes": size, "removed_blobs": removed_blobs, "removed_runs": removed_runs}


def meta_bytes(store: ChangeStore) -> int:
    total = 0
    for dirpath, _d, files in os.walk(os.path.join(store.root, "projects")):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def live_hashes(store: ChangeStore) -> set[str]:
    live: set[str] = set()
    base = os.path.join(store.root, "projects")
    for key in os.listdir(base):
        pdir = os.path.join(base, key)
        with contextlib.suppress(OSError):
            for name in os.listdir(pdir):
                if name != "snap" and not name.startswith("snap-"):
                    continue
                got = _read_snapshot(os.path.join(pdir, name))
                if got is None:
                    continue
                for kids in got[1].dirs.values():
                    for e in kids.values():
                        if e[KIND] == "f":
                            live.add(entry_data(e))
    for _k, _s, _r, path in store._records():
        cs = store._read_record(path)
        if cs is None:
            continue
        for ch in cs.changes:
            for side in (ch.before, ch.after):
                if side is not None and side[KIND] == "f":
                    live.add(entry_data(side))
    with store._mu:
        held = [p.snapshot for p in store._projects.values() if p.snapshot is not None]
        held += [p.pending.after for p in store._projects.values() if p.pending is not None]
    for snap in held:  # snapshots this host holds in memory only (quick run ends)
        for kids in snap.dirs.values():
            for e in kids.values():
                if e[KIND] == "f":
                    live.add(entry_data(e))
    for tok in list(store._active.values()):  # runs of this host still in progress
        for kids in tok.before.dirs.values():
            for e in kids.values():
                if e[KIND] == "f":
                    live.add(entry_data(e))
    return live


def drop_idle_projects(store: ChangeStore) -> None:
    base = os.path.join(store.root, "projects")
    for key in os.listdir(base):
        state = store._read_state(key)
        store._live(state)
        if not state["active"] and time.time() - state.get("used", 0) > PROJECT_IDLE_S:
            remove_project(store, key)


def drop_snapshots_of_idle(store: ChangeStore) -> bool:
    """Drop the snapshot of the least recently used project with no active run (the whole
    project when it keeps no change set); False if none is left to drop."""
    base = os.path.join(store.root, "projects")
    best = None
    for key in os.listdir(base):
        state = store._read_state(key)
        store._live(state)
        pdir = os.path.join(base, key)
        has = any(n.startswith("snap") for n in os.listdir(pdir))
        if has and not state["active"] and (best is None or state.get("used", 0) < best[0]):
            best = (state.get("used", 0), key)
    if best is None:
        return False
    pdir = os.path.join(base, best[1])
    runs: list[str] = []
    with contextlib.suppress(OSError):
        runs = os.listdir(os.path.join(pdir, "runs"))
    if not runs:
        remove_project(store, best[1])
        return True
    with store._mu:  # its newest change set stays: only the snapshot goes
        store._projects.pop(best[1], None)
    for name in os.listdir(pdir):
        if name.startswith("snap"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(pdir, name))
    return True


def prune_runs(runs: str, keep: int) -> int:
    """Drop the change sets of a project older than its newest ``keep``, but not one of a run
    that went without asking because undo covered it (``unasked``): the gate's word that it
    can be taken back holds until the store is over ``max_store`` or the project is dropped.
    Returns how many went."""
    names = sorted(n for n in os.listdir(runs) if n.endswith(".json"))
    gone = 0
    for name in names[: max(0, len(names) - keep)]:
        path = os.path.join(runs, name)
        try:
            with open(path, "rb") as f:
                if json.loads(f.read()).get("unasked") is True:
                    continue
        except (OSError, ValueError, AttributeError):
            pass  # torn or unreadable: it reads as absent anyway
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            gone += 1
    return gone


def remove_project(store: ChangeStore, key: str) -> None:

    with store._mu:
        store._projects.pop(key, None)
    shutil.rmtree(store._pdir(key), ignore_errors=True)
