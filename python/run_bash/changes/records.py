"""Reading the kept change sets of a store: by run, the latest, all of them, as a diff.

A mixin of ``ChangeStore`` (store.py): it reads the ``projects/<key>/runs/*.json`` records the
store writes, and settles the store's pending checks before it answers with a change set's
content (so what it reads is complete).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

from .render import ChangeSet, display_path

if TYPE_CHECKING:
    from .objects import Objects


class Records:
    """The read side of the change store."""

    root: str
    objects: Objects

    def settle(self) -> None:
        raise NotImplementedError

    def _init(self) -> None:
        raise NotImplementedError

    @staticmethod
    def _key(project: str) -> str:
        raise NotImplementedError

    def _records(self) -> list[tuple[str, int, str, str]]:
        """Every kept change set as (project key, seq, run id, file path), oldest first per project."""
        out: list[tuple[str, int, str, str]] = []
        base = os.path.join(self.root, "projects")
        try:
            keys = os.listdir(base)
        except FileNotFoundError:
            return out
        for key in keys:
            runs = os.path.join(base, key, "runs")
            with contextlib.suppress(OSError):
                for name in os.listdir(runs):
                    seq, _, rest = name.partition("-")
                    if seq.isdigit() and rest.endswith(".json"):
                        out.append((key, int(seq), rest[:-5], os.path.join(runs, name)))
        out.sort(key=lambda r: (r[0], r[1]))
        return out

    def get(self, run_id: str) -> ChangeSet | None:
        """The kept change set of ``run_id`` (the latest one with that id), or None."""
        self.settle()
        found = None
        for _key, _seq, rid, path in self._records():
            if rid == run_id:
                cs = self._read_record(path)
                if cs is not None and (found is None or cs.ended > found.ended):
                    found = cs
        return found

    def latest(self, project: str | None = None) -> ChangeSet | None:
        """The most recent kept change set (in ``project`` when given; a check still due may
        add to its content, not change which run it is)."""
        best = None
        key = self._key(project) if project else None
        for k, _seq, _rid, path in self._records():
            if key is None or k == key:
                cs = self._read_record(path)
                if cs is not None and (best is None or cs.ended > best.ended):
                    best = cs
        return best

    def runs(self) -> list[dict[str, Any]]:
        """Every kept change set, newest first, as {run, project, ended, counts, undo_of, label}
        (as recorded: a check still due is not waited for)."""
        out: list[dict[str, Any]] = []
        for _k, _seq, _rid, path in self._records():
            cs = self._read_record(path)
            if cs is not None:
                out.append(
                    {
                        "run": cs.run_id,
                        "project": display_path(cs.project),
                        "ended": cs.ended,
                        "counts": cs.counts(),
                        "undo_of": cs.undo_of,
                        "label": cs.label,
                    }
                )
        out.sort(key=lambda r: -r["ended"])
        return out

    def kept_ids(self) -> set[str]:
        """The run ids whose change sets are kept now. Cheap (lists the run directories, reads
        no record, waits for no check): for callers deciding what to remember about a run."""
        return {rid for _k, _seq, rid, _path in self._records()}

    @staticmethod
    def _read_record(path: str) -> ChangeSet | None:
        try:
            with open(path, "rb") as f:
                return ChangeSet.from_json(json.load(f))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def changes(self, run_id: str) -> list[dict[str, Any]] | None:
        """``[{path, kind, skipped?}]`` for ``run_id``; None when no change set is kept for it."""
        cs = self.get(run_id)
        return None if cs is None else cs.to_list()

    def diff_text(self, run_id: str) -> str | None:
        """The run's change set as a unified diff (binary files by size and hash), or None."""
        cs = self.get(run_id)
        if cs is None:
            return None
        self._init()
        return cs.unified_diff(self.objects)
