"""What the guard (``guard.py``) keeps for each active run (``Scope``) and for each watch it holds
(``Sub``), where it moves what must not stay (``quarantine_dir``), and the path look-ups it makes
once per watching.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from run_bash.sandbox import gitindex, indexbefore, sequencer
from run_bash.sandbox.hostread import HostRead
from run_bash.sandbox.members import State
from run_bash.sandbox.places import Places


def quarantine_dir(env: Mapping[str, str]) -> str:
    """Where the guard moves things: ``$XDG_STATE_HOME/run_bash/quarantine`` (never granted)."""
    home = env.get("HOME") or os.path.expanduser("~")
    state = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return os.path.join(state, "run_bash", "quarantine")


# The most time the post-run check spends asking git about new repositories; the ones left then
# are quarantined unjudged (a run could leave thousands, each with an include git waits on).
JUDGE_BUDGET_S = 30.0

# Why a background run is stopped by the live judging of what it made (``livelinks``).
LIVE_TRIP = (
    "it made a link that leads out, a repository that is not inert, an index git refuses or a "
    "commit no run may leave, in the background"
)
# What a subscription on a watch descriptor means when an event arrives.
KILL_ANY = "kill-any"  # any event: a member itself, a member directory's contents, a git dir
KILL_NAMES = "kill-names"  # an entry event for one of ``names`` in this directory
GROW = "grow"  # one of ``names`` appeared here: watch deeper (a PATH dir or rules name later)
PATH_DIR = "path"  # an entry in a writable PATH directory: is it still what it was?
RULES = "rules"  # a rules name (or an entry inside a rules directory) changed
INDEX = "index"  # a git directory's index written or replaced: the live look judges it


@dataclass(eq=False)
class Sub:
    """One watch a run's scope asked for: what it is for and what it reports."""

    scope: Scope
    kind: str
    mask: int
    names: frozenset[str] = frozenset()
    ref: Any = None


@dataclass(eq=False)
class Scope:
    """One active run as the guard knows it."""

    sid: str
    host_read: HostRead
    places: Places
    kill: Callable[[], None] | None = None
    tripped: str = ""
    notices: list[str] = field(default_factory=list)
    wds: set[int] = field(default_factory=set)
    ended: bool = False
    # The in-progress git operations of each git directory before the run (``sequencer.py``).
    sequencer: dict[str, sequencer.State] = field(default_factory=dict)
    # The index file of each git directory before the run (``gitindex.py``).
    indexes: gitindex.State = field(default_factory=dict)
    # The same, as last judged fine while the run goes on in the background (``live``).
    index_ok: gitindex.State = field(default_factory=dict)
    # Each index as it was before the run, held to tell its entries from the run's
    # (``indexbefore.py``); released when the run's check is done.
    index_before: dict[str, indexbefore.Before] = field(default_factory=dict)
    # The git directories trusted when the run started, by (dev, ino): a repository that became
    # trusted later (another run's host-read set took it up while this one ran) may have been
    # made, and armed, by this run, which could write it all along; it is judged as new.
    trusted_git: frozenset[tuple[int, int]] = frozenset()
    # Git directories the run moved away that stay where it put them: path before -> now.
    moved: dict[str, str] = field(default_factory=dict)
    # The run's readable grants (None: its links are not judged) and the tree scan's count of
    # new links when it started: those found later are the run's (``_check_links``).
    readable: tuple[str, ...] | None = None
    link_mark: int = 0
    live: bool = False  # it went on in the background: its links are judged as they appear
    live_mark: int = 0  # the tree scan's count of new links at the last such look
    live_watched: bool = False  # watched again for its first such look
    # Trees whose kept names are looked for only when the run ends (``_named_appeared``).
    blind: set[str] = field(default_factory=set)

    def trip(self, why: str) -> None:
        """Stop the run now (no I/O but the kill itself)."""
        first = not self.tripped
        if first:
            self.tripped = why
        kill = self.kill
        if kill is not None and not self.ended:
            with contextlib.suppress(Exception):
                kill()

    def attach(self, kill: Callable[[], None]) -> None:
        """The run has started: how to stop it. A trip before this kills it at once."""
        self.kill = kill
        if self.tripped:
            with contextlib.suppress(Exception):
                kill()


# -- look-ups made once per watching ----------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def split_once(path: str) -> tuple[str, str]:
    """``os.path.split``, kept: the guard splits the same few hundred paths at every run."""
    return os.path.split(path)


def dir_mode(path: str, state: State | None) -> bool | None:
    """Whether ``path`` is a directory (None: it does not exist, or cannot be looked at), from
    its ``state`` taken just now when that says (an unreadable one does not), else asked."""
    if state is not None and state[0] != "unreadable":
        return None if state[0] == "absent" else state[0] == "dir"
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return None


def is_dir_once(path: str, seen: dict[str, bool]) -> bool:
    """``os.path.isdir(path)``, asked once per ``seen``."""
    hit = seen.get(path)
    if hit is None:
        hit = seen[path] = os.path.isdir(path)
    return hit


def realpath_once(path: str, reals: dict[str, str | None]) -> str:
    """``os.path.realpath(path)``, each name on the way looked at once per ``reals`` (a name
    that does not exist: None): below the deepest name that exists nothing can be a link, so
    the rest of the path is kept as written, as ``realpath`` keeps it."""
    if not os.path.isabs(path) or os.path.normpath(path) != path:
        return os.path.realpath(path)  # (``..`` after a link is the link's parent: not lexical)
    d, rest = path, ""
    while True:
        if d not in reals:
            reals[d] = os.path.realpath(d) if os.path.lexists(d) or d == "/" else None
        real = reals[d]
        if real is not None:
            return os.path.join(real, rest) if rest else real
        d, name = os.path.split(d)
        rest = name if not rest else name + "/" + rest
