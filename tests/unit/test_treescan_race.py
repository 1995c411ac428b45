"""A walk whose directory changes, goes away or cannot be watched between its listing and its
watch (``TreeScan._watch``) still watches every other directory it listed, is not kept, and tells
whoever waits on the events (the live links thread): a directory left unwatched would report
nothing of what a run makes in it later."""

from __future__ import annotations

import os
import select
import shutil
from pathlib import Path

from run_bash.sandbox.treescan import TreeScan


def readable(fd: int, timeout: float) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


def test_a_directory_gone_before_its_watch_leaves_the_others_watched(tmp_path: Path) -> None:
    root = tmp_path / "p"
    for sub in ("a", "b", "c"):
        (root / sub).mkdir(parents=True)
    scan = TreeScan()
    told: list[bool] = []
    scan.on_events.append(lambda: told.append(True))
    walk = scan._walk
    gone: list[str] = []

    def then_remove(*args):
        found, named, truncated, seen = walk(*args)
        first = next(d for d in seen if d != str(root))  # the first one the watches come to
        shutil.rmtree(first)
        gone.append(first)
        return found, named, truncated, seen

    scan._walk = then_remove  # type: ignore[method-assign]
    try:
        scan.find(str(root))
        assert gone and told and scan.take_raced()
        scan._walk = walk  # type: ignore[method-assign]
        fd = scan.events_fd()
        assert fd is not None
        scan.read_events()  # the removal's own event
        assert not readable(fd, 0)
        # Every other directory listed is watched: a link made there is an event at once.
        others = [root / s for s in ("a", "b", "c") if str(root / s) != gone[0]]
        for d in others:
            os.symlink("/etc/hostname", d / "new")
            assert readable(fd, 5), d
            scan.read_events()
        # The walk was not kept: the next one lists again, and finds the links.
        scan.find(str(root))
        assert sorted(scan.links_since(0, [str(root)])[0]) == sorted(
            (str(d / "new"), "/etc/hostname") for d in others
        )
    finally:
        scan.close()


def test_a_walk_that_saw_no_change_tells_no_one(tmp_path: Path) -> None:
    # The control: the same walk, nothing changing under it.
    root = tmp_path / "p"
    for sub in ("a", "b"):
        (root / sub).mkdir(parents=True)
    scan = TreeScan()
    told: list[bool] = []
    scan.on_events.append(lambda: told.append(True))
    try:
        scan.find(str(root))
        assert not told and not scan.take_raced()
    finally:
        scan.close()
