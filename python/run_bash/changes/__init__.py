"""Reversible runs: what each command changed in its project, and undo. (Design: see store.py.)"""

from .render import Change, ChangeSet, display_path
from .snapshot import Snapshot
from .store import ChangeStore, Limits, NotRecorded, Token

__all__ = [
    "Change",
    "ChangeSet",
    "ChangeStore",
    "Limits",
    "NotRecorded",
    "Snapshot",
    "Token",
    "display_path",
]
