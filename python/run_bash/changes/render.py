"""Change sets and how they read: the agent's one line, the user's diff, the Lua list.

Pure apart from reading blobs for the diff. Paths are kept as ``str`` decoded with
``surrogateescape`` (exactly the bytes on disk); everything shown or sent over RPC goes through
``display_path``, which quotes names with control characters or bytes that are not UTF-8 the way
git does (``"a\\nb"``, ``"caf\\351"``), so the text is always valid UTF-8.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any, Protocol

from run_bash.statedir import human_size

from .snapshot import CONTENT_KINDS, DATA, KIND, MODE, SIZE, Entry, entry_data

SUMMARY_ITEMS = 10
DIFF_TEXT_MAX = 1024 * 1024  # larger files are shown by size and hash, like binary ones
_ESC = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\", "\a": "\\a",
        "\b": "\\b", "\f": "\\f", "\v": "\\v"}  # fmt: skip


def display_path(path: str) -> str:
    """``path`` as valid UTF-8 text: unchanged when plain, else quoted with C escapes."""
    if path.isprintable() and '"' not in path and "\\" not in path:
        try:
            path.encode("utf-8")
            return path
        except UnicodeEncodeError:
            pass
    out = []
    for ch in path:
        o = ord(ch)
        if ch in _ESC:
            out.append(_ESC[ch])
        elif 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\{o - 0xDC00:03o}")
        elif o < 0x20 or o == 0x7F or not ch.isprintable():
            out.append("".join(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def entry_to_json(e: Entry | None) -> list[Any] | None:
    return None if e is None else list(e)


def entry_from_json(v: Any) -> Entry | None:
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != 8 or not isinstance(v[0], str):
        raise ValueError("bad entry")
    return tuple(v)


REASONS = {
    "i": "ignored",
    "s": "FIFO, socket or device",
    "g": "repository data",
    "c": "over the file-count cap",
}


@dataclass
class Change:
    """One path whose state differs between the run's start and end."""

    path: str
    before: Entry | None
    after: Entry | None
    max_file_size: int = 0

    @property
    def kind(self) -> str:
        if self.before is None:
            return "added"
        if self.after is None:
            return "deleted"
        return "modified"

    @property
    def detail(self) -> str:
        """What changed for a modified path: content, mode, target or type."""
        b, a = self.before, self.after
        if b is None or a is None:
            return ""
        if b[KIND] != a[KIND]:
            return "type"
        if b[KIND] == "l":
            return "target"
        if b[KIND] == "f" and b[DATA] == a[DATA]:
            return "mode"
        return "mode" if b[KIND] == "d" else "content"

    def reason(self, e: Entry) -> str:
        """Why the content of ``e`` is not kept, e.g. "ignored, 312 MB, over
        undo.ignored_total"."""
        k = e[KIND]
        if k == "b":
            return f"over {human_size(self.max_file_size)}" if self.max_file_size else "too large"
        if k == "u":
            return str(e[DATA] or "unreadable")
        if k == "i":
            size = e[SIZE]
            shown = f"more than {human_size(-size)}" if size < 0 else human_size(size)
            why = f", {e[DATA]}" if e[DATA] else ""
            return f"ignored, {shown}{why}"
        return REASONS.get(k, k)

    @property
    def skipped(self) -> str | None:
        """Why this change cannot be taken back (its earlier content is not kept), else None."""
        b, a = self.before, self.after
        if b is not None and b[KIND] not in CONTENT_KINDS:
            return self.reason(b)
        if b is None and a is not None and a[KIND] not in CONTENT_KINDS:
            return self.reason(a)
        return None

    @property
    def is_dir(self) -> bool:
        e = self.after if self.after is not None else self.before
        if e is None:
            return False
        return e[KIND] == "d" or (e[KIND] not in "fl" and stat.S_ISDIR(e[MODE]))


class BlobSource(Protocol):
    def get(self, h: str) -> bytes: ...


@dataclass
class ChangeSet:
    """What one run changed in its project."""

    run_id: str
    project: str
    began: float
    ended: float
    changes: list[Change]
    overlaps: list[str] = field(default_factory=list)
    undo_of: str | None = None
    note: str | None = None
    max_file_size: int = 0
    seq: int = 0
    label: str | None = None  # what ran (the command), for lists and headers
    scope: tuple[str, ...] = ("",)  # the directories walked (see Snapshot.scope)
    # The run went without asking because undo covered it: kept past ``keep`` (``prune_runs``).
    unasked: bool = False

    def __post_init__(self) -> None:
        for ch in self.changes:
            ch.max_file_size = self.max_file_size

    # -- serialization ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "run": self.run_id,
            "project": self.project,
            "began": self.began,
            "ended": self.ended,
            "seq": self.seq,
            "overlaps": self.overlaps,
            "undo_of": self.undo_of,
            "label": self.label,
            "note": self.note,
            "max_file_size": self.max_file_size,
            "scope": list(self.scope),
            "unasked": self.unasked,
            "changes": [
                [c.path, entry_to_json(c.before), entry_to_json(c.after)] for c in self.changes
            ],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ChangeSet:
        if d.get("format") != 1:
            raise ValueError("unknown change-set format")
        return cls(
            run_id=str(d["run"]),
            project=str(d["project"]),
            began=float(d["began"]),
            ended=float(d["ended"]),
            changes=[Change(p, entry_from_json(b), entry_from_json(a)) for p, b, a in d["changes"]],
            overlaps=[str(x) for x in d.get("overlaps") or []],
            undo_of=d.get("undo_of"),
            label=d.get("label") if isinstance(d.get("label"), str) else None,
            note=d.get("note"),
            max_file_size=int(d.get("max_file_size") or 0),
            seq=int(d.get("seq") or 0),
            scope=tuple(str(x) for x in d.get("scope") or [""]),
            unasked=d.get("unasked") is True,
        )

    # -- views -----------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        out = {"added": 0, "modified": 0, "deleted": 0, "skipped": 0}
        for c in self.changes:
            if c.skipped:
                out["skipped"] += 1
            elif not c.is_dir:
                out[c.kind] += 1
        return out

    def to_list(self) -> list[dict[str, Any]]:
        """``[{path, kind, detail?, skipped?}]`` (kind: added / modified / deleted; directories
        end with ``/``; ``skipped`` says why the change cannot be taken back)."""
        out = []
        for c in self.changes:
            item: dict[str, Any] = {
                "path": display_path(c.path) + ("/" if c.is_dir else ""),
                "kind": c.kind,
            }
            if c.detail:
                item["detail"] = c.detail
            if c.skipped:
                item["skipped"] = c.skipped
            out.append(item)
        return out

    def _items(self) -> tuple[list[str], list[str], list[str]]:
        """Summary items: (changes, not tracked, not recovered), a whole added or deleted tree
        collapsed into one ``D build/ (312 files)`` item."""
        by_path = {c.path: c for c in self.changes}
        collapsed: set[str] = set()
        items: list[str] = []
        untracked: list[str] = []
        lost: list[str] = []
        for c in self.changes:
            if _ancestors_in(c.path, collapsed):
                continue
            shown = display_path(c.path) + ("/" if c.is_dir else "")
            if c.skipped:
                (lost if c.kind == "deleted" else untracked).append(f"{shown} ({c.skipped})")
                continue
            tag = {"added": "A", "modified": "M", "deleted": "D"}[c.kind]
            if c.is_dir and c.kind in ("added", "deleted"):
                inner = [d for p, d in by_path.items() if p.startswith(c.path + "/")]
                if all(d.kind == c.kind and not d.skipped for d in inner):
                    collapsed.add(c.path)
                    n = sum(1 for d in inner if not d.is_dir)
                    if n:
                        shown += f" ({n} file{'s' if n != 1 else ''})"
            items.append(f"{tag} {shown}")
        return items, untracked, lost

    def brief(self, limit: int = SUMMARY_ITEMS) -> list[str]:
        """The first ``limit`` summary items (``M src/app.py``, ``D build/ (312 files)``)."""
        return self._items()[0][:limit]

    def summary(self, limit: int = SUMMARY_ITEMS) -> str:
        """One line for the agent, e.g. ``Changed files: M src/app.py, A notes.md, D build/ (312
        files)``; "" when the run changed nothing and overlapped nothing."""
        items, untracked, lost = self._items()
        parts = []
        if items:
            parts.append("Changed files: " + _some(items, limit))
        if untracked:
            parts.append("not tracked: " + _some(untracked, 3))
        if lost:
            parts.append("not recovered: " + _some(lost, 3))
        if self.note:
            parts.append(self.note)
        if self.overlaps and (items or untracked or lost):
            ids = ", ".join(self.overlaps[:3])
            word = "session" if len(self.overlaps) == 1 else "sessions"
            parts.append(f"overlaps {word} {ids}: changes may be mixed")
        if not parts:
            return ""
        line = "; ".join(parts)
        return line if line.startswith("Changed files") else "Changed files: " + line

    def unified_diff(self, blobs: BlobSource) -> str:
        """The change set as a unified diff, for a ``filetype=diff`` buffer."""
        out = [f"# run {self.run_id} in {display_path(self.project)}"]
        if self.label:
            out.append("# $ " + " ⏎ ".join(self.label.splitlines()))
        if self.undo_of:
            out.append(f"# undo of run {self.undo_of}")
        if self.overlaps:
            out.append(f"# overlaps {', '.join(self.overlaps)}: changes may be mixed")
        if self.note:
            out.append(f"# {self.note}")
        for c in self.changes:
            out.extend(_diff_one(c, blobs))
        return "\n".join(out) + "\n"


def _some(items: list[str], limit: int) -> str:
    more = f", and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _ancestors_in(path: str, collapsed: set[str]) -> list[str]:
    if not collapsed:
        return []
    parts = path.split("/")
    return [p for p in ("/".join(parts[:i]) for i in range(1, len(parts))) if p in collapsed]


def _mode_str(e: Entry) -> str:
    if e[KIND] == "l":
        return "120000"
    if e[KIND] == "d":
        return f"04{e[MODE]:04o}"
    return f"10{e[MODE]:04o}"


def _content(e: Entry | None, blobs: BlobSource) -> bytes | None:
    if e is None:
        return b""
    if e[KIND] == "l":
        return os.fsencode(entry_data(e))
    if e[KIND] == "f":
        try:
            return blobs.get(entry_data(e))
        except Exception:
            return None
    return b""


def _describe(e: Entry | None) -> str:
    if e is None:
        return "absent"
    if e[KIND] == "f":
        return f"{human_size(e[SIZE])}, sha256 {entry_data(e)[:12]}"
    return f"{human_size(e[SIZE])}"


def _diff_one(c: Change, blobs: BlobSource) -> list[str]:
    p = display_path(c.path)
    b, a = c.before, c.after
    if c.skipped:
        verb = "not recovered" if c.kind == "deleted" else "not tracked"
        return [f"# {verb}: {p} ({c.skipped}; {c.kind})"]
    if (b is None or b[KIND] == "d") and (a is None or a[KIND] == "d"):
        if b is None and a is not None:
            return [f"# new directory {p}/ (mode {a[MODE]:04o})"]
        if a is None and b is not None:
            return [f"# deleted directory {p}/ (mode {b[MODE]:04o})"]
        if a is not None and b is not None:
            return [f"# directory {p}/ mode {b[MODE]:04o} -> {a[MODE]:04o}"]
    lines = [f"diff --run_bash a/{p} b/{p}"]
    if b is None:
        if a is not None:
            lines.append(f"new file mode {_mode_str(a)}")
    elif a is None:
        lines.append(f"deleted file mode {_mode_str(b)}")
    elif _mode_str(b) != _mode_str(a):
        lines += [f"old mode {_mode_str(b)}", f"new mode {_mode_str(a)}"]
    if (b is not None and b[KIND] == "d") or (a is not None and a[KIND] == "d"):
        lines.append(f"# {'directory' if b and b[KIND] == 'd' else 'file'} replaced by "
                     f"{'a directory' if a and a[KIND] == 'd' else 'a file'}")  # fmt: skip
        b = None if b is not None and b[KIND] == "d" else b
        a = None if a is not None and a[KIND] == "d" else a
    old, new = _content(b, blobs), _content(a, blobs)
    if b is not None and a is not None and b[KIND] == a[KIND] and b[DATA] == a[DATA]:
        return lines
    text_old, text_new = _text(old), _text(new)
    if text_old is None or text_new is None:
        lines.append(f"Binary files a/{p} and b/{p} differ ({_describe(b)} -> {_describe(a)})")
        return lines
    import difflib  # only a diff needs it: not loaded at the host's start (test_startup.py)

    body = difflib.unified_diff(
        text_old.splitlines(keepends=True),
        text_new.splitlines(keepends=True),
        f"a/{p}" if b is not None else "/dev/null",
        f"b/{p}" if a is not None else "/dev/null",
    )
    for line in body:
        if line.endswith("\n"):
            lines.append(line[:-1])
        else:
            lines += [line, "\\ No newline at end of file"]
    return lines


def _text(data: bytes | None) -> str | None:
    if data is None or len(data) > DIFF_TEXT_MAX or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
