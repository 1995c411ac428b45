"""The guard's watcher: one inotify instance per host, its thread and what each event means. A
mixin of ``Keeper`` (``guard.py``; see its docstring): **kill first** (matching an event is a
dictionary lookup and a name comparison), then the checks that read, then repair. Lost events
(the queue overflowed) are read from the state (``_changed_unseen``).
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
from collections.abc import Iterable
from typing import Any

from run_bash import fsdeps, inotify
from run_bash.inotify import Inotify
from run_bash.paths import is_under, lmode
from run_bash.sandbox import nofollow
from run_bash.sandbox.agentrules import (
    Problem,
    rules_dir_problems,
    rules_file_problems,
    rules_include_paths,
    rules_problems,
    rules_tree,
)
from run_bash.sandbox.guardscope import (
    GROW,
    INDEX,
    KILL_ANY,
    KILL_NAMES,
    PATH_DIR,
    RULES,
    Scope,
    Sub,
    dir_mode,
    is_dir_once,
    realpath_once,
    split_once,
)
from run_bash.sandbox.hostread import HostRead, RulesName
from run_bash.sandbox.members import ABSENT, State, matches, within
from run_bash.sandbox.nofollow import Fence, LinkInPath
from run_bash.sandbox.pathguard import PathDir, Sig
from run_bash.sandbox.pathstate import Change, changes, judge
from run_bash.sandbox.places import Places

# One watch of a plan (``Watcher._plan``): (path, kind, mask, names, ref), as its ``Sub`` has them.
Plan = tuple[str, str, int, frozenset[str], Any]
NO_NAMES: frozenset[str] = frozenset()
# Plans kept (one per host-read set in use; a host-read set is kept per policy, ``launching``).
MAX_PLANS = 16


class Watcher:
    """The watches and their thread, for ``Keeper``."""

    _fence: Fence
    _lock: threading.RLock
    _trusted: dict[str, State]
    _path_states: dict[str, dict[str, Sig] | None]
    _git_ident: dict[str, tuple[int, int, int]]
    _scopes: dict[str, Scope]
    _ino: Inotify | None
    _table: dict[int, list[Sub]]
    _table_lock: threading.Lock
    # Host-read set's id -> (it, its members' kinds, its plan, what making the plan read).
    _plans: dict[int, tuple[HostRead, tuple[str, ...], tuple[Plan, ...], fsdeps.Reads]]
    _plans_lock: threading.Lock
    _written: set[str]
    _rules: dict[str, State]  # rules names and what they lead to, as trusted
    _thread: threading.Thread | None
    _stop_r: int
    _stop_w: int
    _live: Any  # ``livelinks.LiveLinks``: the looks at what background runs make
    lost_events: int

    def _name(self, hr: HostRead, path: str) -> str:
        raise NotImplementedError  # ``Repairs``

    def _check(self, scope: Scope) -> None:
        raise NotImplementedError  # ``Keeper``

    def _ensure_watcher(self) -> Inotify:
        if self._ino is None:
            self._ino = Inotify()  # OSError: the caller refuses the run
            self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            self._thread = threading.Thread(target=self._loop, name="run_bash-guard", daemon=True)
            self._thread.start()
        return self._ino

    def _sub(self, ino: Inotify, scope: Scope, path: str, mask: int, sub: Sub) -> None:
        wd = ino.add(path, mask | inotify.IN_DONT_FOLLOW | inotify.IN_MASK_ADD)
        with self._table_lock:
            self._table.setdefault(wd, []).append(sub)
        scope.wds.add(wd)

    def _watch(self, scope: Scope, fresh: dict[str, State] | None = None) -> None:
        """Watch everything of ``scope`` (re-run after a repair moved inodes around). ``fresh``:
        states of members taken just now (``prepare``), which say whether each exists without
        asking again (what appears meanwhile is caught after watching, as below)."""
        ino = self._ensure_watcher()
        hr = scope.host_read
        for path, kind, mask, names, ref in self._planned(hr, fresh):
            try:
                self._sub(ino, scope, path, mask, Sub(scope, kind, mask, names, ref))
            except FileNotFoundError:
                continue  # gone meanwhile: the check after watching sees it
            except NotADirectoryError:
                continue
        # Anything created between looking and watching is caught here. (A member whose
        # directory is not there now is not there either: the directory is asked once.)
        missing: dict[str, bool] = {}
        for m in hr.members:
            trusted = self._trusted.get(m)
            if trusted is None or trusted[0] != "absent":
                continue
            parent = split_once(m)[0]
            gone = missing.get(parent)
            if gone is None:
                gone = missing[parent] = not os.path.lexists(parent)
            if not gone and os.path.lexists(m):
                scope.trip(f"{self._name(hr, m)} appeared")

    def _planned(self, hr: HostRead, fresh: dict[str, State] | None) -> tuple[Plan, ...]:
        """``_plan`` of ``hr``, the one kept for it while what making it read is all still the
        same (``fsdeps``: the same look-ups would answer the same) and the members' kinds taken
        just now are those it was made from. A project's runs watch the same places run after
        run; only which of them exist, are directories or lead elsewhere decides the watches."""
        kinds = _kinds(hr, fresh)
        if kinds is None:  # a member's kind is not known from ``fresh``: asked while planning
            return self._plan(hr, fresh)
        with self._plans_lock:
            hit = self._plans.get(id(hr))
        if hit is not None and hit[0] is hr and hit[1] == kinds and hit[3].still(self._written):
            return hit[2]
        with fsdeps.recording() as reads:
            plan = self._plan(hr, fresh)
        if reads.usable and reads.settled:
            with self._plans_lock:
                if len(self._plans) >= MAX_PLANS:
                    self._plans.clear()
                self._plans[id(hr)] = (hr, kinds, plan, reads)
        return plan

    def _plan(self, hr: HostRead, fresh: dict[str, State] | None) -> tuple[Plan, ...]:
        """What to watch for ``hr`` now: each watch as (path, kind, mask, names, ref), what its
        subscription (``Sub``) holds. Reads only whether paths exist, are directories and where
        they lead (``_planned`` keeps the answer while those read the same)."""
        # Whether each directory exists, looked up once per call: a project's top holds tens of
        # kept names. (Anything made between looking and watching is caught after watching.)
        dirs: dict[str, bool] = {}
        reals: dict[str, str | None] = {}
        git_places = (
            Places(hr.git_dirs, realpath=lambda p: realpath_once(p, reals)) if hr.git_dirs else None
        )
        todo: list[Plan] = []
        # The names watched in one directory for one purpose share one subscription (a
        # project's top holds tens of names that may not appear): one watch call, one look-up.
        names: dict[tuple[str, str], set[str]] = {}  # (directory, kind) -> names, mask ENTRIES
        for m in hr.members:
            is_dir = dir_mode(m, fresh.get(m) if fresh is not None else None)
            if is_dir is not None:
                mask = inotify.CONTENT | (inotify.ENTRIES if is_dir else 0)
                todo.append((m, KILL_ANY, mask, NO_NAMES, None))
            # (Whether it lies in a git dir matters only when its directory is not there yet.)
            grows_in_git = (
                git_places is not None
                and not is_dir_once(split_once(m)[0], dirs)
                and m in git_places
            )
            _add(names, self._watch_name(hr, m, KILL_NAMES, kill_growth=grows_in_git, dirs=dirs))
        for g in hr.git_dirs:
            mask = inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF
            todo.append((g, KILL_ANY, mask, NO_NAMES, None))
            _add(names, self._watch_name(hr, g, KILL_NAMES, kill_growth=True, dirs=dirs))
            # Its index, written in place or replaced: the live look judges it (``guard``'s
            # ``_check_indexes_live``; a background run's index is read by your next `git
            # restore` long before the run ends).
            todo.append((g, INDEX, inotify.ENTRIES, frozenset({"index"}), g))
            if stat.S_ISREG(lmode(os.path.join(g, "index"))):
                todo.append((os.path.join(g, "index"), INDEX, inotify.CONTENT, NO_NAMES, g))
        for pd in hr.path_dirs:
            # A unit that does not exist yet is a member (watched above).
            if os.path.isdir(pd.path):
                mask = inotify.ENTRIES | inotify.IN_ATTRIB | inotify.CONTENT
                todo.append((pd.path, PATH_DIR, mask, NO_NAMES, pd))
        for r in hr.rules:
            where = self._watch_name(hr, r.path, RULES, kill_growth=False, dirs=dirs)
            if where is not None:  # a subscription of its own: its events name the rules file
                d, kind, name = where
                todo.append((d, kind, inotify.ENTRIES, frozenset({name}), r))
            mode = lmode(r.path)
            if stat.S_ISDIR(mode):
                # CodeCompanion reads it whole: every directory in it is watched (one made
                # later is, once its making is judged: ``_dispatch`` watches the run again).
                for d in rules_tree(r.path)[0]:
                    todo.append((d, RULES, inotify.ENTRIES | inotify.CONTENT, NO_NAMES, r))
            elif stat.S_ISREG(mode):
                # Its content too: a run may write it in place (``echo @… >> CLAUDE.md``).
                todo.append((r.path, RULES, inotify.CONTENT, NO_NAMES, r))
            # And the names its references lead to in the project (one made a FIFO, or a link
            # out, after the file was judged).
            for p in rules_include_paths(hr, r.path) if mode else ():
                if p != r.path and hr.is_project(p):
                    where = self._watch_name(hr, p, RULES, kill_growth=False, dirs=dirs)
                    if where is not None:
                        d, kind, name = where
                        todo.append((d, kind, inotify.ENTRIES, frozenset({name}), r))
        for (d, kind), found in names.items():
            todo.append((d, kind, inotify.ENTRIES, frozenset(found), None))
        return tuple(todo)  # kept and shared by the runs that follow (``_planned``)

    def _watch_name(
        self, hr: HostRead, path: str, kind: str, *, kill_growth: bool, dirs: dict[str, bool]
    ) -> tuple[str, str, str] | None:
        """Where to watch for the entry ``path``, as (directory, kind, name): in its directory;
        when that directory does not exist yet, the deepest ancestor that does, for the next
        component (created: kill, when the path is inside a git directory; otherwise watch
        deeper). None when no ancestor exists. ``dirs``: whether each directory exists, as this
        watching found it."""
        parent, name = split_once(path)
        if is_dir_once(parent, dirs):
            return parent, kind, name
        d = parent
        while not is_dir_once(d, dirs):
            up, below = split_once(d)
            if up == d:
                return None
            name, d = below, up
        return d, KILL_NAMES if kill_growth or _inside_git(hr, path) else GROW, name

    def _unwatch(self, scope: Scope) -> None:
        self._drop(self._subs_of(scope))
        scope.wds.clear()

    def _subs_of(self, scope: Scope) -> dict[int, list[Sub]]:
        """The subscriptions of ``scope``, by watch."""
        with self._table_lock:
            return {
                wd: [s for s in self._table.get(wd, ()) if s.scope is scope] for wd in scope.wds
            }

    def _refresh_all(self) -> None:
        """Watch again after a repair replaced watched inodes, or a directory appeared on the way
        to a kept name. A scope's new watches come before its old ones go: a change made
        meanwhile is an event of one or the other (the watch of an inode that is still there is
        the same one, its subscriptions replaced), never of neither."""
        self._refresh(list(self._scopes.values()))

    def _refresh(self, scopes: Iterable[Scope]) -> None:
        """``_refresh_all`` for these scopes."""
        for scope in scopes:
            old = self._subs_of(scope)
            scope.wds.clear()
            try:
                self._watch(scope)
            except OSError:
                # Watched in part (the watch limit): the old watches stay beside the new ones.
                scope.wds.update(old)
                continue
            self._drop(old)

    def _drop(self, old: dict[int, list[Sub]]) -> None:
        """Remove these subscriptions (by identity); a watch none is left on goes."""
        ino = self._ino
        with self._table_lock:
            for wd, subs in old.items():
                left = [s for s in self._table.get(wd, ()) if not any(s is o for o in subs)]
                if left:
                    self._table[wd] = left
                else:
                    self._table.pop(wd, None)
                    if ino is not None:
                        ino.remove(wd)

    def _loop(self) -> None:
        ino = self._ino
        assert ino is not None
        while True:
            try:
                ready, _, _ = select.select([ino.fd, self._stop_r], [], [])
            except (OSError, ValueError):
                return
            if self._stop_r in ready:
                ino.close()
                stop_r, self._stop_r = self._stop_r, -1
                with contextlib.suppress(OSError):
                    os.close(stop_r)
                return
            try:
                events = ino.read()
            except OSError:  # what was queued is gone: lost, as in an overflow
                events = [(-1, inotify.IN_Q_OVERFLOW, "")]
            if events:
                try:
                    self._dispatch(events)
                except Exception:  # the guard must keep running
                    import logging

                    logging.getLogger("run_bash").exception("guard: event handling failed")

    def _dispatch(self, events: list[tuple[int, int, str]]) -> None:
        """Kill first (lookups only), then the checks that read, then repair."""
        kill: dict[Scope, str] = {}
        grow: set[Scope] = set()
        paths: list[tuple[Scope, PathDir, str]] = []
        rules: list[tuple[Scope, RulesName]] = []
        indexes: list[tuple[Scope, bool]] = []  # (scope, replaced rather than written)
        lost = False
        with self._table_lock:
            for wd, mask, name in events:
                if mask & inotify.IN_Q_OVERFLOW:
                    lost = True  # names were lost: the state says what they could have said
                    continue
                if mask & inotify.IN_IGNORED:
                    # The kernel dropped the watch (its inode is gone); the number may be reused.
                    for s in self._table.pop(wd, ()):
                        s.scope.wds.discard(wd)
                    continue
                for s in self._table.get(wd, ()):
                    if not mask & s.mask:
                        continue
                    if s.kind == KILL_ANY or (s.kind == KILL_NAMES and name in s.names):
                        kill.setdefault(s.scope, CHANGED)
                    elif s.kind == GROW and name in s.names:
                        grow.add(s.scope)
                    elif s.kind == PATH_DIR and name:
                        paths.append((s.scope, s.ref, name))
                    elif s.kind == RULES and (name in s.names or not s.names):
                        rules.append((s.scope, s.ref))
                    elif s.kind == INDEX and (name in s.names or not s.names):
                        indexes.append((s.scope, bool(name)))
        for scope, why in kill.items():
            scope.trip(why)
        with self._lock:
            for scope, pd, name in paths:
                if scope.ended:
                    continue
                c = judge(pd, self._path_states.get(pd.path), name, scope.places)
                if c is not None:
                    scope.trip(_on_path(pd, c))
            judged = self._judge_rules(rules)
            if lost:
                self.lost_events += 1
                for scope in list(self._scopes.values()):
                    if not scope.ended and not scope.tripped:
                        unseen = self._changed_unseen(scope)
                        if unseen is not None:
                            scope.trip(unseen)
            tripped = [s for s in self._scopes.values() if s.tripped and not s.ended]
            for scope in tripped:
                self._check(scope)
            # A rules file written, made or replaced: its new inode, and the names its
            # references now lead to, are watched; then it is judged once more (what was
            # written before those watches came made no event of theirs). So is an index that
            # was replaced.
            # (A run's own `git add` replaces the index at every call: only a background run's
            # index is watched again, as the live look needs; one that goes on in the background
            # later is watched again then, ``guard._judge_live``.)
            rewatch = {scope for scope, _r in judged}
            rewatch |= {s for s, replaced in indexes if replaced and s.live and not s.ended}
            if tripped or grow or lost:
                self._refresh_all()
            elif rewatch:
                self._refresh(rewatch)
            if judged:
                self._judge_rules(judged)
        if indexes:
            self._live.poke()  # after the watches: a later write wakes it again

    def _judge_rules(self, rules: list[tuple[Scope, RulesName]]) -> list[tuple[Scope, RulesName]]:
        """Judge the rules files these events named (each once); those of runs still going on
        that were not stopped now."""
        fine: list[tuple[Scope, RulesName]] = []
        for scope, r in dict.fromkeys(rules):
            if scope.ended or scope.tripped:
                continue
            if self._new_rules_problems(scope.host_read, r.path):
                scope.trip(self._rules_changed(scope.host_read, r))
            else:
                fine.append((scope, r))
        return fine

    def _new_rules_problems(self, hr: HostRead, path: str) -> list[Problem]:
        """Every problem of a rules name (``agentrules``) but those the user had before the run:
        one whose entry and whose referring file are both as trusted (your own `CLAUDE.md`
        including `~/.claude/shared.md` stays yours when a run rewrites the note it also
        includes; the same include added by the run is the run's)."""
        mode = lmode(path)
        if not mode:
            return []
        if stat.S_ISDIR(mode):
            found = rules_dir_problems(hr, path)
        elif stat.S_ISREG(mode):
            found = rules_file_problems(hr, path)
        else:
            found = [(k, w, p[0] if p else path, path) for k, w, *p in rules_problems(hr, path)]

        def kept(p: str) -> bool:
            return matches(p, self._trusted_rules(p))

        return [q for q in found if not (kept(q[3]) and kept(q[2]))]

    def _trusted_rules(self, path: str) -> State:
        """The trusted state of a rules name or of what decides it (``Keeper.prepare`` takes
        them); an entry of a rules directory, from that directory's own (``members.within``).
        ABSENT: none was taken (it was not there)."""
        got = self._rules.get(path)
        if got is not None:
            return got
        d = os.path.dirname(path)
        while d and d != os.path.dirname(d):
            top = self._rules.get(d)
            if top is not None:
                return within(top, d, path)
            d = os.path.dirname(d)
        return ABSENT

    def _changed_unseen(self, scope: Scope) -> str | None:
        """Events were lost (the queue overflowed while a run made many names): what they could
        have said, read from the state, as the check after a run reads it and bounded the same
        way. Why ``scope`` must stop, or None. Whatever changes after this look is an event again
        (the queue was just read), or another overflow and another look."""
        hr = scope.host_read
        for g in hr.git_dirs:
            ident = self._git_ident.get(g)
            if ident is None:
                continue
            try:
                st = nofollow.lstat(g, self._fence)
            except (OSError, LinkInPath):
                return f"{self._name(hr, g)} was moved or replaced"
            if (st.st_dev, st.st_ino) != ident[:2]:
                return f"{self._name(hr, g)} was moved or replaced"
        for m in hr.members:
            trusted = self._trusted.get(m)
            if trusted is None or not matches(m, trusted):
                return CHANGED
        for pd in hr.path_dirs:
            for c in changes(pd, self._path_states.get(pd.path), scope.places):
                return _on_path(pd, c)
        for r in hr.rules:
            if rules_problems(hr, r.path):
                return self._rules_changed(hr, r)
        return None

    def _rules_changed(self, hr: HostRead, r: RulesName) -> str:
        return f"agent rules file {self._name(hr, r.path)} changed"


def _inside_git(hr: HostRead, path: str) -> bool:
    return any(is_under(path, g) for g in hr.git_dirs)


def _kinds(hr: HostRead, fresh: dict[str, State] | None) -> tuple[str, ...] | None:
    """Each member's kind (absent, file, dir, link, other) in its state taken just now; None
    when one has no such state (``dir_mode`` would ask the file system)."""
    if fresh is None:
        return None
    try:
        kinds = tuple([fresh[m][0] for m in hr.members])
    except KeyError:
        return None
    return None if "unreadable" in kinds else kinds


# Why the watcher stopped a run (a scope's ``tripped``).
CHANGED = "a file the host reads was changed"


def _on_path(pd: PathDir, c: Change) -> str:
    return f"{c.name} in {pd.path} (on {pd.var}) {c.why}"


def _add(names: dict[tuple[str, str], set[str]], where: tuple[str, str, str] | None) -> None:
    """Put a name to watch (``_watch_name``) with the others of its directory and kind."""
    if where is not None:
        names.setdefault(where[:2], set()).add(where[2])
