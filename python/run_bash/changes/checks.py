"""The change store's own thread: the full walk that checks a quick run end, the snapshot's
write to disk and the collection, done when a project has been quiet for ``CHECK_DELAY_S``.

A mixin of ``ChangeStore`` (store.py). A check's walk gives way to any run that wants the
project: ``_locked`` counts the runs waiting for it, the walk stops at its next directory
(``_Stop``) and its events are given back to the watcher, so the run that stopped it lists only
what changed; the check is done again once the project is quiet.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any

from .render import Change
from .snapshot import TooManyFiles, diff, same_state
from .store import ChangeStore, _ancestors, _Project, _Stop, _write_inplace
from .walk import RuleBook

log = logging.getLogger("run_bash")
CHECK_DELAY_S = 0.5  # quiet time before the store's thread checks, persists and collects


def schedule(store: ChangeStore, key: str, project: str) -> None:
    with store._mu:
        store._to_check[key] = (project, time.monotonic() + CHECK_DELAY_S)
        if store._checker is None or not store._checker.is_alive():
            store._checker = threading.Thread(
                target=check_loop, args=(store,), name="run_bash-changes-check", daemon=True
            )
            store._checker.start()
        store._wake.notify_all()


def check_loop(store: ChangeStore) -> None:
    while True:
        with store._mu:
            if not store._to_check:
                store._wake.wait(timeout=60.0)
                if not store._to_check:
                    store._checker = None
                    return
                continue
            key, (project, due) = min(store._to_check.items(), key=lambda kv: kv[1][1])
            wait = due - time.monotonic()
            if wait > 0:
                store._wake.wait(timeout=wait)
                continue
            del store._to_check[key]
            store._checking += 1
        try:
            check(store, key, project, quiet=True)
        except Exception:  # a failed check leaves the quick change set; never kill the loop
            log.exception("run_bash: checking the end of a run in %s failed", project)
        finally:
            with store._mu:
                store._checking -= 1
                store._wake.notify_all()


def check(store: ChangeStore, key: str, project: str, quiet: bool = False) -> None:
    """Check the last quick end, write the snapshot, collect if due. ``quiet``: give way to
    any run that wants the project (it will be done after that run instead)."""
    store._init()
    with store._locked(key, project, check=True) as proj:
        state = store._read_state(key)
        try:
            check_locked(store, key, proj, state, proj if quiet else None)
        except _Stop:
            store.stopped += 1
            return  # the run that stopped it schedules the next one
        if proj.snapshot is not None and proj.gen == state["gen"]:
            store._save_snapshot(key, proj, state)
        store._write_state(key, state)
    store._maybe_collect()


def settle(store: ChangeStore) -> None:
    """Run now the checks still due after quick run ends (``get``, ``undo`` and ``close``
    call it, so what they read is complete)."""
    with store._mu:
        due = dict(store._to_check)
        store._to_check.clear()
    for key, (project, _when) in due.items():
        check(store, key, project)
    with store._mu:
        while store._checking:
            store._wake.wait()


def check_locked(
    store: ChangeStore, key: str, proj: _Project, state: dict[str, Any], stop: _Project | None
) -> None:
    """Walk the whole project after a quick run end; add to that run's change set what
    inotify did not report (a write through a hard link from outside the project, by a
    process outside run_bash through a shared mapping it still holds). Changes in
    directories with events since the run ended are someone else's and are not added."""
    pend = proj.pending
    if pend is None:
        return
    watcher = store._watcher(key)
    since = watcher.take()
    latest = store._load_snapshot(key, proj, state)
    if latest is not pend.after:
        proj.pending = None
        return
    try:
        full = store._scan(
            pend.project,
            latest,
            watcher,
            book=RuleBook(frozen=pend.before),
            roots=latest.scope,
            finishing=True,
            began_ns=pend.began_ns,
            events=since,
            stop=stop,
        )
    except (TooManyFiles, OSError):
        proj.pending = None
        return  # the watcher stays invalid: the next start walks and decides
    proj.pending = None
    full.rules_stale = latest.rules_stale
    store._set(proj, full)
    late = watcher.take()  # changes during the walk: it may have missed them
    since.merge(late)
    if not late:
        watcher.end_walk(proj.version)
    if since.unknown:
        return
    moved = since.moved
    missed = []
    for path, _was, now in diff(pend.after, full):
        parent = path.rpartition("/")[0]
        if parent in since.touched or parent not in pend.after.dirs:
            continue
        if any(a in moved for a in _ancestors(path)):
            continue
        missed.append((path, now))
    if not missed:
        return
    cs = pend.change_set
    by_path = {c.path: c for c in cs.changes}
    for path, now in missed:
        ch = by_path.get(path) or Change(path, pend.before.entry(path), None)
        ch.after = now
        by_path[path] = ch
    found = {path for path, _ in missed}
    cs.changes = sorted(  # an ignored tree named for a change deep in it stays named
        (c for c in by_path.values() if c.path not in found or not same_state(c.before, c.after)),
        key=lambda c: os.fsencode(c.path),
    )
    cs.__post_init__()
    extra = "some changes were found by the full check after the run (inotify missed them)"
    cs.note = f"{cs.note}; {extra}" if cs.note else extra
    runs = os.path.join(store._pdir(key), "runs")
    if not cs.seq:
        last = max((int(n[:8]) for n in os.listdir(runs) if n[:8].isdigit()), default=0)
        state["seq"] = cs.seq = max(state["seq"], last) + 1
    rec = json.dumps(cs.to_json(), separators=(",", ":")).encode()
    _write_inplace(os.path.join(runs, f"{cs.seq:08d}-{cs.run_id}.json"), rec)
    store.amended += 1
