"""The guard and the post-run check: nothing a run writes into the host-read set stays there.

Backend-neutral. One ``Keeper`` per host (``SessionManager``) holds, for every member of the
host-read set (``hostread.py``), a **trusted state**: taken when the run about to start is the only
one that could write that member (no other active run's writable grants cover it), and kept
unchanged while any run that could write it is active. A run started while another one holds a
member never takes the member's current state as trusted; a member first seen that way is
*untrusted*: a change to it is quarantined, never restored from.

While runs are active, one inotify instance (created once per host, so exhausting the user's
inotify instances later cannot blind it) watches the members, their parent directories, the
git directories, the ``PATH`` directories inside writable grants and the agent rules files.

* **Kill first.** An event on a member (or on a git directory, or an ancestor of a member inside
  a git directory being created or moved) kills every run that could write it before anything is
  read: matching the event is a dictionary lookup and a name comparison.
* **Lost events are read from the state.** A run that makes names faster than the watcher reads
  them (40,000 files moved into the project's top) overflows its queue: the names are lost,
  not the run. Every active run's git directories, members, ``PATH`` directories and rules files
  are then compared with their trusted states, as after a run (``_changed_unseen``); a
  difference stops the run, anything later is an event again.
* **Then check and repair, bounded by what is protected.** Each member is compared with its
  trusted state using only the trusted state's size: a directory is listed up to one entry more
  than it had (40,000 entries moved into ``.git/hooks`` cost one rename: the directory is moved
  aside whole and rebuilt), a file is read up to its trusted length. Files are opened with
  ``O_NONBLOCK | O_NOFOLLOW``: a FIFO, a device, a symlink, a file too large or one held by a
  lease is a difference, never a wait.
* **Restore as the owner.** A directory on the way that a run made unwritable (``chmod 0500``) is
  given its owner's write and search bits for the repair and put back after it. What was there is
  moved to the quarantine directory (``$XDG_STATE_HOME/run_bash/quarantine``, never deleted), the
  trusted state is written, and the notice says "restored" only after comparing again.
* **Never through a link.** Every write after a run (a git directory moved back, a quarantine
  move, a restore, a ``PATH`` link put back, a mode) reaches its path without following a
  symbolic link in a place a run can write (``nofollow``): a run that replaced a directory on the
  way with a link (``mv emb emb2; ln -s ~/other emb``) gets that link moved to the quarantine,
  and nothing behind it is touched. A git directory left where a run moved it has its members
  compared there.
* **After every run** (exit, kill, timeout) and again before the next run of a project starts if
  a repair failed: the same comparison for every member, plus the checks that have no trusted
  state to compare with: a new repository in any tree the run could write (or a new git dir
  under a trusted one or a new one, ``nested_git_dirs``) must be inert, as git reads it
  (``inert``, ``gitask.judge_config``: only inert keys; no active hooks; no commondir to a repository that
  is not trusted) or it is quarantined. So must every new work tree, also one of a trusted git
  dir (a ``.git`` file or link that is not the kept one, ``git worktree add``): the hooks
  directory the user's git names there (``gitask.hooks_dir``, their global config included; a
  relative ``core.hooksPath`` is taken in that work tree) holds no hooks unless it is kept or no
  run can write it, nor a link out of the writable grants (git writes through it); each writable
  ``PATH`` directory is compared entry by entry with its state before the run (``pathguard``: a
  changed program, or a new one that shadows a later command, is quarantined, a retargeted link
  put back); an agent rules file whose ``@`` references may lead out of the project or into a
  denied path (``agentrules``) is restored to its trusted content, and a rules name that is not
  a regular file is quarantined, as is a link the run left (``linkcheck``). A file of a name kept
  at every level (``keptnames.EVERY_LEVEL_MEMBERS``, a relative PATH entry's directory) that the run
  made anywhere in its trees is quarantined too (``hostread.appeared``); while the run goes on,
  one that appears stops it (``_named_appeared``, on the tree scan's inotify). A commit the run
  left on a ref (or stash) that holds a kept file or a link out of the work tree has that ref put
  back (``refsguard``: git is asked only when the refs' signature changed).

All file I/O here runs on the guard's thread or on an executor thread, never on the host's RPC
loop, and never blocks on a file a sandbox can touch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Iterable

from run_bash import fsdeps
from run_bash.errors import SpawnError
from run_bash.inotify import Inotify
from run_bash.paths import is_under, lmode
from run_bash.sandbox import gitindex, indexbefore, nofollow, sequencer
from run_bash.sandbox.agentrules import Problem, rules_include_paths
from run_bash.sandbox.guardscope import (
    JUDGE_BUDGET_S,
    LIVE_TRIP,
    Scope,
    Sub,
)
from run_bash.sandbox.guardwatch import Watcher
from run_bash.sandbox.hostread import (
    MAX_SCAN_DIRS,
    Discovery,
    HostRead,
    HostReadError,
    RulesName,
    appeared,
    kept_path,
)
from run_bash.sandbox.inert import Kept, hooks_not_inert, not_inert
from run_bash.sandbox.linkcheck import git_dir_links, links_out
from run_bash.sandbox.livelinks import LiveLinks
from run_bash.sandbox.members import (
    ABSENT,
    Repairer,
    State,
    capture,
    capture_or_mark,
    matches,
)
from run_bash.sandbox.nofollow import Fence, LinkInPath
from run_bash.sandbox.pathguard import PathDir, Sig
from run_bash.sandbox.pathnotices import refusal_notices
from run_bash.sandbox.pathstate import changes, dir_state
from run_bash.sandbox.places import Places
from run_bash.sandbox.refsguard import RefsGuard, work_tree_of
from run_bash.sandbox.repairs import Repairs
from run_bash.sandbox.treescan import MAX_CHECK_DIRS, looks_like_git_dir, nested_git_dirs

# -------------------------------------------------------------------------------------------------
# The keeper


class Keeper(Repairs, Watcher, RefsGuard):
    """The host's guard: trusted states, the watcher and the checks. See the module docstring."""

    def __init__(self, quarantine_root: str, discovery: Discovery | None = None) -> None:
        # Every place a run of this host could write: no repair follows a symbolic link there.
        self._fence = Fence(())
        self.repairer = Repairer(quarantine_root, lambda: self._fence)
        self.quarantine_root = quarantine_root
        self.discovery = discovery or Discovery()
        self._lock = threading.RLock()
        self._trusted: dict[str, State] = {}
        # Members whose state was first taken while another run could write them: a change is
        # quarantined, never restored from it. Cleared when taken again with no run covering.
        self._suspect: set[str] = set()
        # PATH directory -> the state of each entry (``pathguard``); None: not a directory.
        self._path_states: dict[str, dict[str, Sig] | None] = {}
        self._git_ident: dict[str, tuple[int, int, int]] = {}  # git dir -> (dev, ino, mode)
        # What is kept read-only whole (``HostRead.sealed``) -> (dev, ino): a run that renames a
        # directory above one (`mv web/.yarn x`) and makes the name again must not keep it.
        self._sealed_ident: dict[str, tuple[int, int]] = {}
        self._rules: dict[str, State] = {}  # rules files and their include targets
        self._pending: dict[str, str] = {}  # member -> why its repair failed
        self._pending_moves: dict[str, str] = {}  # what must leave the project -> why it did not
        self._refs, self._refs_pending = {}, {}  # ``RefsGuard``
        self._ahead, self._ahead_lock = {}, threading.Lock()
        self.discovery.on_repo = self.refs_ahead  # (a host's first policy in a repository)
        # Trees a run filled past what can be walked: no run starts there until they shrink.
        self._unwalkable: dict[str, str] = {}
        self._scopes: dict[str, Scope] = {}
        self._written: set[str] = set()  # every writable grant given to a run of this host
        self._ino: Inotify | None = None
        self._table: dict[int, list[Sub]] = {}
        self._table_lock = threading.Lock()
        self._plans = {}  # what to watch per host-read set (``Watcher._planned``)
        self._plans_lock = threading.Lock()
        # How many times the watcher lost events: its queue overflowed or a read of it failed
        # (``_changed_unseen``).
        self.lost_events = 0
        self._thread: threading.Thread | None = None
        self._stop_r = self._stop_w = -1
        self._live = LiveLinks(self.discovery.trees.events_fd, self._judge_live)
        # Events another walk reads (a policy computed meanwhile) wake the live thread too.
        self.discovery.trees.on_events.append(self._live.poke)

    # -- what other parts of the host ask --------------------------------------------------------

    def untrusted(self) -> list[str]:
        """Every place a run of this host could write: symlinks there are never followed when
        granting PATH trees (``policy.trusted_realpath``)."""
        with self._lock:
            return sorted(self._written)

    # -- before a run ----------------------------------------------------------------------------

    def prepare(
        self, sid: str, host_read: HostRead, readable: Iterable[str] | None = None
    ) -> Scope:
        """Trusted states, the pre-run repair of what an earlier check could not fix, and the
        watches of a run about to start. Raises SpawnError (the run must not start) when a member
        cannot be kept or watched, or an earlier tampering is still unrepaired. ``readable``: the
        run's readable grants, which judge the links it leaves (``linkcheck``)."""
        scope = Scope(sid, host_read, Places(host_read.writable))
        scope.readable = None if readable is None else tuple(readable)
        with self._lock:
            if not self._written.issuperset(host_read.writable):
                self._written.update(host_read.writable)
                self._fence = Fence(self._written)
            others = [s for s in self._scopes.values() if not s.ended]

            def covered(path: str) -> bool:
                return any(path in s.places for s in others)

            fresh: dict[str, State] = {}  # the states taken now
            for m in host_read.members:
                if covered(m):
                    if m not in self._trusted:
                        self._suspect.add(m)
                        self._trusted[m] = capture_or_mark(m)
                    continue
                why = self._pending.get(m)
                if why is not None and m in self._trusted and matches(m, self._trusted[m]):
                    del self._pending[m]  # put right by hand
                elif why is not None and m in self._trusted:
                    ok, done = self._restore(m, self._trusted[m], scope)
                    if not ok:
                        raise SpawnError(
                            f"{m} was changed by an earlier run and {done}; fix it by hand, "
                            "then run again"
                        )
                    del self._pending[m]
                    scope.notices.append(
                        f"{self._name(host_read, m)} {done} (changed by an earlier run)"
                    )
                self._trusted[m] = fresh[m] = capture(m, prev=self._trusted.get(m))
                self._suspect.discard(m)
            for root in host_read.scan:
                why = self._unwalkable.get(root)
                if why is not None:
                    if not self.discovery.trees.find(root)[1]:
                        del self._unwalkable[root]
                    else:
                        raise SpawnError(why)
            # What an earlier check could not move out of the project is tried again first.
            for path in [p for p in self._pending_moves if p in scope.places]:
                if not self._exists(path):
                    del self._pending_moves[path]
                    continue
                done = self._quarantine(path, scope)
                if path in self._pending_moves:
                    raise SpawnError(
                        f"{path} was left by an earlier run and {done}; remove it by hand, "
                        "then run again"
                    )
                scope.notices.append(
                    f"{self._name(host_read, path)} (left by an earlier run) {done}"
                )
            for g in host_read.git_dirs:
                if not covered(g) or g not in self._git_ident:
                    with contextlib.suppress(OSError):
                        st = nofollow.lstat(g, self._fence)
                        self._git_ident[g] = (st.st_dev, st.st_ino, stat.S_IMODE(st.st_mode))
            if scope.readable is not None:  # the links there before the run are not its own
                self._walk_for_links(host_read)
                scope.link_mark = self.discovery.trees.link_mark()
            scope.sequencer = {g: sequencer.state(g) for g in host_read.git_dirs}
            scope.indexes = gitindex.state(host_read.git_dirs)
            scope.index_ok = dict(scope.indexes)
            scope.index_before = indexbefore.hold(host_read.git_dirs)
            scope.trusted_git = frozenset(self._trusted_git_dirs())
            self._refs_before(scope, covered)
            for p in host_read.sealed:
                if not covered(p) or p not in self._sealed_ident:
                    try:
                        st = nofollow.lstat(p, self._fence)
                    except OSError:
                        self._sealed_ident.pop(p, None)
                    else:
                        self._sealed_ident[p] = (st.st_dev, st.st_ino)
            for pd in host_read.path_dirs:
                if not covered(pd.path) or pd.path not in self._path_states:
                    self._path_states[pd.path] = dir_state(pd.path)
            for r in host_read.rules:
                for p in (r.path, *rules_include_paths(host_read, r.path)):
                    if not covered(p) or p not in self._rules:
                        self._rules[p] = capture_or_mark(p, self._rules.get(p))
            self._scopes[sid] = scope
            # What the names kept at every level keep, made anywhere in its trees, stops it
            # as it appears (``_judge_live``).
            self._live.start()
            try:
                self._watch(scope, fresh)
            except OSError as e:
                self.release(sid)
                limit = {
                    errno.EMFILE: " (fs.inotify.max_user_instances)",
                    errno.ENOSPC: " (fs.inotify.max_user_watches)",
                }.get(e.errno or 0, "")
                where = f": {e.filename}" if e.filename else ""
                raise SpawnError(
                    f"cannot watch the files the host reads from the project ({e.strerror}{limit}"
                    f"{where}); nothing was started"
                ) from None
        return scope

    def release(self, sid: str) -> None:
        """Forget a run that never started."""
        with self._lock:
            scope = self._scopes.pop(sid, None)
            if scope is not None:
                scope.ended = True
                self._unwatch(scope)
                indexbefore.release(scope.index_before)

    # -- after a run -----------------------------------------------------------------------------

    def guards(self, sid: str) -> bool:
        """Whether run ``sid`` has a scope to check when it ends (``finish`` has work to do)."""
        with self._lock:
            return sid in self._scopes

    def finish(self, sid: str, output: str = "", exit_code: int | None = None) -> list[str]:
        """The post-run check of a run whose processes are all gone; its notices. ``output`` (the
        end of what the run printed) and ``exit_code`` tell whether a failure came from a PATH
        directory kept read-only (the notice then names it and the option)."""
        with self._lock:
            scope = self._scopes.pop(sid, None)
            if scope is None:
                return []
            scope.ended = True
            self._unwatch(scope)
            try:
                self._check(scope)
            finally:
                indexbefore.release(scope.index_before)
            self._refresh_all()
            hr = scope.host_read
            scope.notices += refusal_notices(hr.path_dirs, output, exit_code, hr.cwd)
            # A linked worktree's admin dir is a git dir of its own and one of its common dir's
            # places: each state directory is reported once.
            reported: set[str] = set()
            for g, before in scope.sequencer.items():
                # One the run moved: every operation in progress there is reported.
                now = scope.moved.get(g, g)
                scope.notices += sequencer.left_by_run(
                    before if now == g else {}, now, self._name(hr, now), reported
                )
            return list(dict.fromkeys(scope.notices))

    def watch_links(self, sid: str) -> None:
        """Run ``sid`` goes on in the background (its first result was given): from now on the
        links it makes are judged as they appear (``livelinks``), not only when it ends. Never
        blocks: the judging runs on its own thread."""
        scope = self._scopes.get(sid)  # one lookup (the big lock may be held by a check)
        if scope is None or scope.readable is None:
            return
        scope.live = True
        self._live.start()

    def _judge_live(self) -> bool:
        """The links the runs watched by ``watch_links`` made since the last look, and the new
        repositories in their trees: one that leads out, or is not inert, is quarantined and
        stops its run. And for every run going on, what the names kept at every level keep that
        it made: that stops it (``_named_appeared``). Whether any run is still going on."""
        trees = self.discovery.trees
        with self._lock:
            # The events that woke this look; one a walk of it reads later is a change made while
            # it looked, which it may have seen only in part (a link found by the repository walk
            # after the link walk): that wakes no one (the descriptor is drained), so the next
            # look comes after the usual gap (``LiveLinks.again``).
            seen = trees.read_events()
            active = [s for s in self._scopes.values() if not s.ended]
            for scope in active:
                if not scope.tripped:
                    why = self._named_appeared(scope)
                    if why is not None:
                        scope.trip(why)
            live = [s for s in active if s.live]
            stopped = f"; the run was stopped ({LIVE_TRIP})"
            for scope in live:
                if not scope.live_watched:
                    # Its first look: what it replaced while in the foreground (its index)
                    # is watched as it is now (``guardwatch``).
                    scope.live_watched = True
                    self._refresh([scope])
                n = len(scope.notices)
                for _ in range(16):  # a walk that raced a change no event reports: again
                    since = max(scope.link_mark, scope.live_mark)
                    scope.live_mark = self._check_links(scope, stopped, since)
                    self._check_new_repos(scope, stopped)
                    if not trees.take_raced():
                        break
                self._check_indexes_live(scope, stopped)
                self._check_refs(scope, stopped, {}, live=True)  # a signature; git when it changed
                if len(scope.notices) > n:
                    scope.trip(LIVE_TRIP)
            if trees.events_read() != seen:
                self._live.again()
            return bool(active)

    def shutdown(self) -> None:
        """Stop the watcher (the host is exiting) and the tree scan's watches."""
        self._live.close()
        self.discovery.trees.close()
        stop_w, self._stop_w = self._stop_w, -1
        if stop_w >= 0:
            with contextlib.suppress(OSError):
                os.write(stop_w, b"x")
            os.close(stop_w)  # the watcher sees the byte, then the end of the pipe

    # -- the check -------------------------------------------------------------------------------

    def _others_covering(self, scope: Scope, path: str) -> list[Scope]:
        return [s for s in self._scopes.values() if s is not scope and path in s.places]

    def _check(self, scope: Scope) -> None:
        """Compare, repair and report (the big lock is held)."""
        hr = scope.host_read
        stopped = f"; the run was stopped ({scope.tripped})" if scope.tripped else ""
        note = scope.notices.append

        # The git directories: still the same directory under the same name. One the run moved
        # away that stays where it went has its protected files checked there.
        elsewhere: dict[str, str] = {}
        for g in hr.git_dirs:
            ident = self._git_ident.get(g)
            if ident is None:
                continue
            now = self._check_git_dir(scope, g, ident, stopped)
            if now is not None:
                elsewhere[g] = now
        scope.moved = elsewhere

        # What is kept whole: still the same directory (or file) under the same name.
        for p in hr.sealed:
            if self._sealed_swapped(p):
                what = (
                    f"what is there now {self._quarantine(p, scope)}"
                    if self._exists(p)
                    else "nothing is there now"
                )
                note(
                    f"{self._name(hr, p)}, kept read-only whole, was moved away (with a "
                    f"directory above it) or replaced inside the sandbox; {what}{stopped}"
                )

        # Every member: its trusted state, or quarantined when it never had a trusted one.
        for m in hr.members:
            trusted = self._trusted.get(m)
            if trusted is None:
                continue
            at = next((w + m[len(g) :] for g, w in elsewhere.items() if is_under(m, g)), m)
            if matches(at, trusted):
                continue
            others = self._others_covering(scope, at)
            for o in others:
                o.trip("a file the host reads changed while it ran")
            what = "created" if trusted[0] == "absent" else "changed"
            why = f", but {hr.reasons[m]}" if m in hr.reasons else ""
            if m in self._suspect:
                dest = self._quarantine(at, scope)
                note(f"{self._name(hr, at)} was {what} inside the sandbox{why}; {dest}{stopped}")
                continue
            if at != m:
                self._trusted[at] = trusted  # a repair left pending is tried again there
            ok, done = self._restore(at, trusted, scope)
            if ok:
                self._pending.pop(at, None)
            else:
                self._pending[at] = done
            note(
                f"{'' if why else 'protected file '}{self._name(hr, at)} was {what} inside the "
                f"sandbox{why}; {done}{stopped}"
            )

        named = self._check_new_repos(scope, stopped)
        self._check_named(scope, named, stopped)
        self._check_indexes(scope, stopped, elsewhere)
        for pd in hr.path_dirs:
            self._check_path_dir(scope, pd, stopped)
        for r in hr.rules:
            self._check_rules(scope, r, stopped)
        # Last: the checks above judge what reads through a link with the link in place.
        self._check_links(scope, stopped)
        # After the links: a commit is let be when the work tree has what it holds, and a link
        # the run left there that leads out is gone by now.
        self._check_refs(scope, stopped, elsewhere)

    def _check_git_dir(
        self, scope: Scope, g: str, ident: tuple[int, int, int], stopped: str
    ) -> str | None:
        """A git directory moved or replaced: moved back, or left where the run put it (its path
        then; the caller checks its protected files there). A directory on the way made a
        symbolic link is never followed: the link goes to the quarantine and the git directory
        stays where the run moved it."""
        hr = scope.host_read
        fence = self._fence
        link: LinkInPath | None = None
        try:
            st: os.stat_result | None = nofollow.lstat(g, fence)
        except LinkInPath as e:
            st, link = None, e
        except OSError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) == ident[:2]:
            if stat.S_IMODE(st.st_mode) != ident[2]:
                with contextlib.suppress(OSError):
                    nofollow.chmod(g, ident[2], fence)
                scope.notices.append(
                    f"the mode of {self._name(hr, g)} was changed inside the sandbox; restored{stopped}"
                )
            return None
        # Moved or replaced: find the original by identity where a run could have put it (the
        # walk enters no symbolic link), reached without following one.
        found = None
        roots = (*hr.scan, os.path.dirname(g)) if link is None else hr.scan
        for root in roots:
            for path, _kind in self.discovery.trees.find(root)[0]:
                with contextlib.suppress(OSError):
                    s2 = nofollow.lstat(path, fence)
                    if (s2.st_dev, s2.st_ino) == ident[:2]:
                        found = path
                        break
            if found:
                break
        name = self._name(hr, g)
        if link is not None:
            _moved, done = self._move_link(link, scope)
            if found:
                done += (
                    f"; the git directory stays at {self._name(hr, found)}, where the run moved "
                    "it, and its protected files were checked there"
                )
            else:
                done += "; the original was not found"
            scope.notices.append(
                f"git directory {name} was moved or replaced inside the sandbox; {done}{stopped}"
            )
            return found
        moved = ""
        if self._exists(g):
            moved = "; what replaced it " + self._quarantine(g, scope)
        if found:
            try:
                nofollow.rename(found, g, fence, expect=ident[:2])
                what = "moved back"
                found = None
            except OSError as e:
                what = (
                    f"could not be moved back from {found} ({e.strerror}): it stays there, and "
                    "its protected files were checked there"
                )
        else:
            what = "the original was not found"
        scope.notices.append(
            f"git directory {name} was moved or replaced inside the sandbox; {what}{moved}{stopped}"
        )
        return found

    def _trusted_git_dirs(self) -> set[tuple[int, int]]:
        return {i[:2] for i in self._git_ident.values()}

    def _walk_for_links(self, hr: HostRead) -> tuple[str, ...]:
        """Walk the trees a run of ``hr`` can write, and each git directory (a tree walk does
        not enter `.git`), so the tree scan has found every link there now; the roots."""
        roots = (*hr.scan, *hr.git_dirs)
        for root in roots:
            self.discovery.trees.find(root, frozenset(hr.sealed))
        return roots

    def _check_links(self, scope: Scope, stopped: str, since: int | None = None) -> int:
        """Every link the run left that leads where it could not go goes to the quarantine; the
        mark of the last link judged (``TreeScan.links_since``)."""
        hr = scope.host_read
        mark = scope.link_mark if since is None else since
        if scope.readable is not None:
            roots = self._walk_for_links(hr)
            found, mark = self.discovery.trees.links_since(mark, roots)
            for path, end, why in links_out(found, scope.readable, hr):
                scope.notices.append(
                    f"{self._name(hr, path)} is a symbolic link the run left to {end}, {why}: "
                    "whoever follows it outside the sandbox (CodeCompanion's file tools, your "
                    f"editor) would reach what the run could not; "
                    f"{self._quarantine(path, scope)}{stopped}"
                )
        return mark

    def _check_new_repos(self, scope: Scope, stopped: str) -> list[str]:
        """A repository git can now reach that was not trusted before the run must be inert;
        otherwise its `.git` entry (or git directory) is quarantined. Looked for in every tree
        the run could write, and among the worktree and submodule git directories of each git
        directory it could write into and of each new repository. A `.git` file or link that
        makes a new work tree for a trusted git dir is judged by the hooks directory git names
        there (``inert.hooks_not_inert``). The entries of the names kept at every level that the
        same walks found (``TreeScan.find_named``, for ``_check_named``)."""
        hr = scope.host_read
        trusted = set(scope.trusted_git)
        found: list[tuple[str, str]] = []
        named: list[str] = []
        kept_whole = frozenset(hr.sealed)  # read-only in the run: nothing new in them
        for root in hr.scan:
            in_root, named_here, truncated = self.discovery.trees.find_named(root, kept_whole)
            if truncated and not any(root in w for w in hr.warnings):
                # It could be walked before the run: the run made it too large for the usual
                # walk. The whole tree is walked (what the walks saw first: everything there
                # before the run, as its walk then was complete), and what is left past
                # MAX_CHECK_DIRS, all of it new, goes to the quarantine: a repository in it would
                # not be judged.
                known = self.discovery.trees.known()
                named_here = []
                in_root, left, links = self.discovery.trees.walk_on(
                    root, kept_whole, known, named=named_here
                )
                if scope.readable is not None:  # the links the usual walk did not reach
                    for link, end, leads in links_out(links, scope.readable, hr):
                        scope.notices.append(
                            f"{self._name(hr, link)} is a symbolic link the run left to {end}, "
                            f"{leads}: whoever follows it outside the sandbox would reach what "
                            f"the run could not; {self._quarantine(link, scope)}{stopped}"
                        )
                for branch in left:
                    scope.notices.append(
                        f"{self._name(hr, branch)} appeared during the run, in a tree of more than "
                        f"{MAX_CHECK_DIRS} directories, too many to look for repositories in; "
                        f"{self._quarantine(branch, scope)}{stopped}"
                    )
            if truncated and scope.ended and not any(root in w for w in hr.warnings):
                # Later runs could not be checked after them: refused until it is smaller.
                self._unwalkable[root] = (
                    f"the last run left more than {MAX_SCAN_DIRS} directories in {root}: new "
                    "repositories in it can no longer be checked after a run; remove what it "
                    "created, then run again"
                )
                scope.notices.append(self._unwalkable[root] + stopped)
            found += in_root
            named += named_here
        for g in hr.git_dirs:
            found += [(n, "bare") for n in nested_git_dirs(g, limit=None)]
        # `.git` entries before git directories: a link is judged while its target is there.
        queue = deque(sorted(dict.fromkeys(found), key=lambda f: f[1] == "bare"))
        seen: set[str] = set()
        kept = Kept(hr.members)
        deadline = time.monotonic() + JUDGE_BUDGET_S
        while queue:
            path, kind = queue.popleft()
            if path in hr.members or path in seen:
                continue  # a trusted `.git` file or link: compared with its trusted state
            seen.add(path)
            why: str | None = None
            try:
                target = path if kind == "bare" else self.discovery.resolve_entry(path)
            except HostReadError:
                target, why = path, "git cannot tell where it leads"
            if target is None:
                continue
            is_trusted = False
            with contextlib.suppress(OSError):
                st = os.stat(target)
                is_trusted = (st.st_dev, st.st_ino) in trusted
            # A git dir that is kept (or the user's own, which no run could write) needs no
            # judging; a `.git` file or link that is not the one it was kept with makes a new work
            # tree for it, whose hooks directory git may find somewhere else.
            own = is_trusted or not hr.is_writable(target)
            if own and (kind == "bare" or (os.path.isdir(path) and not os.path.islink(path))):
                continue
            if scope.live and not own:  # a write there wakes the next look (``livelinks``)
                self.discovery.trees.find(target, content=True)
                if not looks_like_git_dir(target):
                    continue  # still being made (`git init`): git does not read it yet
            if why is None and time.monotonic() > deadline:
                why = f"too many new repositories to judge in {JUDGE_BUDGET_S:g} s"
            if why is None and not own:
                try:
                    why = not_inert(target, trusted) or git_dir_links(target, hr.writable)
                except HostReadError as e:
                    why = str(e)
            if why is None:
                why = hooks_not_inert(hr, path, kind, target, kept)
            if why is None:
                if not own:
                    # Its own worktree and submodule git dirs, as those of a kept one.
                    queue += [(n, "bare") for n in nested_git_dirs(target, limit=None)]
                    # An operation in progress in it is the run's own list of next steps.
                    scope.notices += sequencer.left_by_run(
                        {}, target, self._name(hr, target), set()
                    )
                continue
            # The project (or a writable grant) itself made into a repository: its HEAD goes,
            # and it is none.
            top = path in hr.roots or path in hr.scan
            what = os.path.join(path, "HEAD") if top else path
            dest = self._quarantine(what, scope)
            scope.notices.append(
                f"new repository {self._name(hr, path)} is not inert ({why}); {dest}{stopped}"
            )
        return named

    def _check_named(self, scope: Scope, named: list[str], stopped: str) -> None:
        """What the names kept at every level keep, made by the run anywhere in its trees (a
        ``web/rust-toolchain.toml``, a ``web/node_modules/.bin`` with a relative
        ``node_modules/.bin`` on PATH): moved to the quarantine, as a member that appeared is
        (``hostread.appeared``; an existing one is a member, compared above)."""
        hr = scope.host_read
        for path, why in appeared(hr, named, self._exists):
            others = self._others_covering(scope, path)
            for o in others:
                o.trip("a file the host reads changed while it ran")
            dest = self._quarantine(path, scope)
            name = self._name(hr, path)
            said = (
                f"{name} was created inside the sandbox, but {why}"
                if why
                else (f"protected file {name} was created inside the sandbox")
            )
            scope.notices.append(f"{said}; {dest}{stopped}")

    def _sealed_swapped(self, path: str) -> bool:
        """Whether what is kept whole at ``path`` is no longer the directory (or file) it was."""
        ident = self._sealed_ident.get(path)
        if ident is None:
            return False
        try:
            st = nofollow.lstat(path, self._fence)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != ident

    def _named_appeared(self, scope: Scope) -> str | None:
        """While a run goes on: the first path that the names kept at every level keep that it
        made (``_check_named`` moves it when the run ends), or a directory kept whole that it
        moved away or replaced. Walks only trees inotify follows (a walk of an unchanged one
        costs nothing; one it cannot follow is checked at the end)."""
        hr = scope.host_read
        for p in hr.sealed:
            if self._sealed_swapped(p):
                return f"{self._name(hr, p)} was moved away or replaced"
        kept_whole = frozenset(hr.sealed)
        for root in hr.scan:
            if root in scope.blind or any(root in w for w in hr.warnings):
                continue
            _found, named, truncated = self.discovery.trees.find_named(root, kept_whole)
            if truncated or not self.discovery.trees.follows(root):
                scope.blind.add(root)  # walked at every change: left to the check at the end
                continue
            hit = appeared(hr, named)
            if hit:
                return f"{self._name(hr, hit[0][0])} appeared"
        return None

    def _check_indexes(self, scope: Scope, stopped: str, elsewhere: dict[str, str]) -> None:
        """An index of a kept git directory that the run changed must name only paths git itself
        accepts (``gitindex``): otherwise the host's next ``git checkout-index -a`` or ``git
        restore`` would write what it names (``.git/hooks/post-checkout``, ``../.bashrc``). Such
        an index goes to the quarantine; ``git reset`` makes a new one from HEAD. A git directory
        the run moved away (``elsewhere``) has its index checked where it is."""
        hr = scope.host_read
        for index in gitindex.changed(scope.indexes, hr.git_dirs, elsewhere):
            why = gitindex.judge(os.path.dirname(index), index)
            if why is not None:
                self._index_refused(scope, index, why, stopped)
            else:
                self._index_smuggled(scope, index, stopped)

    def _check_indexes_live(self, scope: Scope, stopped: str) -> None:
        """``_check_indexes`` while a run goes on in the background (the host's ``git restore``
        would not wait for its end): an index that changed since it was last judged fine is
        judged now. Its state is taken before git reads it: a write meanwhile is judged at the
        next look (the guard's watch of the index wakes it, ``guardwatch``). A state whose change
        time is younger than ``fsdeps.SETTLED_NS`` is not taken for judged: two writes within one
        timestamp tick, of the same size, would look like one."""
        for index in gitindex.changed(scope.index_ok, scope.host_read.git_dirs):
            now = gitindex.signature(index)
            why = gitindex.judge(os.path.dirname(index), index)
            if why is not None:
                self._index_refused(scope, index, why, stopped)
            elif self._index_smuggled(scope, index, stopped):
                pass  # taken back: judged again at the next look
            elif now is not None and time.time_ns() - now[4] > fsdeps.SETTLED_NS:
                scope.index_ok[index] = now

    def _index_smuggled(self, scope: Scope, index: str, stopped: str) -> bool:
        """Entries of an index git accepts that differ from ``HEAD`` and that the user's next
        ``git restore`` would write where no run may (``gitindex.smuggled``: a kept file, a link
        out of the work tree), are taken back when the run put them there: to what the index
        staged before the run (``indexbefore``); when that cannot be known, to what ``HEAD`` has,
        and the notice says how to stage one again. An index that cannot be asked, or put right,
        goes to the quarantine. True when something was found."""
        hr = scope.host_read
        git_dir = os.path.dirname(index)
        work = work_tree_of(hr, git_dir)
        if work is None:
            return False
        try:
            found = gitindex.smuggled(git_dir, index, work, lambda p: kept_path(hr, p))
        except HostReadError as e:
            self._index_refused(scope, index, f"could not be checked ({e})", stopped)
            return True
        was = next((gitindex.index_path(g) for g, w in scope.moved.items() if w == git_dir), index)
        before = indexbefore.staged(git_dir, scope.index_before.get(was), {f.path for f in found})
        if before is not None:  # what the index staged before the run is not the run's
            found = [
                f for f in found if (f.mode, f.oid) not in {e[:2] for e in before.get(f.path, [])}
            ]
        if not found:
            return False
        shown = "; ".join(f"{f.path} ({f.why}; staged as {f.mode},{f.oid})" for f in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        if before is not None:
            failed = gitindex.put_back(git_dir, index, work, before, found)
            to = "what the index staged there before the run"
        else:
            failed = gitindex.take_back(git_dir, index, work, [f.path for f in found])
            to = indexbefore.UNKNOWN + (" (`git fsck --lost-found` lists the rest)" if more else "")
        if failed is not None:
            self._index_refused(scope, index, f"stages {shown}{more}; {failed}", stopped)
            return True
        scope.notices.append(
            f"{self._name(hr, index)} was written inside the sandbox to stage {shown}{more}, "
            f"which your next `git restore` would write: taken back to {to}{stopped}"
        )
        return True

    def _index_refused(self, scope: Scope, index: str, why: str, stopped: str) -> None:
        dest = self._quarantine(index, scope)
        scope.notices.append(
            f"{self._name(scope.host_read, index)} was written inside the sandbox and "
            f"{why.removeprefix('its index ')}; {dest} "
            f"(`git reset` makes a new index from HEAD; the files in the work tree are as the "
            f"run left them){stopped}"
        )

    def _check_path_dir(self, scope: Scope, pd: PathDir, stopped: str) -> bool:
        """An entry of a writable PATH directory that changed and can be run, or a new one that
        shadows a later command, goes to the quarantine (a symlink whose text changed is put back
        as it was); True when one was found. When the directory itself is reached through a
        symbolic link in a writable place, that link goes instead, and nothing behind it is
        touched."""
        hit = False
        for c in changes(pd, self._path_states.get(pd.path), scope.places):
            hit = True
            path = os.path.join(pd.path, c.name)
            done, link_moved = self._move(path, scope)
            if c.link is not None and not link_moved and not self._exists(path):
                try:
                    nofollow.symlink(c.link, path, self._fence)
                    done = f"put back as it was (a link to {c.link}); what was there was {done}"
                except OSError as e:
                    done += f"; the link to {c.link} could not be put back ({e.strerror})"
            scope.notices.append(
                f"{path} {c.why} inside the sandbox (that directory is on your {pd.var}); "
                f"{done}{stopped}"
            )
            if link_moved:
                break  # the directory is no longer reached: nothing else of it is on PATH
        return hit

    def _check_rules_dir(self, scope: Scope, problems: list[Problem], stopped: str) -> bool:
        """The entries of a rules directory the user had that are wrong, each on its own: a file
        of theirs the run gave a reference that leads out gets its content back; anything else
        wrong (a new file, a link out, a FIFO, what a reference leads to) goes to the quarantine.
        True when something was wrong."""
        hr = scope.host_read
        hit = False
        for kind, why, where, source in problems:
            if not os.path.lexists(where):
                continue  # gone with an entry moved before it
            trusted = self._trusted_rules(where)
            if kind == "content" and trusted[0] == "file":
                ok, done = self._restore(where, trusted, scope)
                if ok:
                    done = "its previous content was put back"
                else:
                    self._pending[where] = done
            else:
                done = self._quarantine(where, scope)
            scope.notices.append(
                f"agent rules file {self._name(hr, source)} {why}; {done}{stopped}"
            )
            hit = True
        return hit

    def _check_rules(self, scope: Scope, r: RulesName, stopped: str) -> bool:
        """Agent rules: a rules file whose includes leave the project (or enter a denied path)
        gets its trusted content back; a rules name, or an entry it includes, that is not a
        regular file in the project is quarantined. What the user had before the run is left
        alone. True when something was wrong."""
        hr = scope.host_read
        path = r.path
        # Every problem, but those the user had before the run (``_new_rules_problems``).
        problems = self._new_rules_problems(hr, path)
        if not problems:
            return False
        trusted = self._rules.get(path, ABSENT)
        # A rules directory the user had: each entry on its own (one the run made goes whole,
        # below, and so does one with too many entries).
        if (
            stat.S_ISDIR(lmode(path))
            and trusted[0] != "absent"
            and all(p[2] != path for p in problems)
        ):
            return self._check_rules_dir(scope, problems, stopped)
        name = self._name(hr, path)
        restored = False
        for kind, why, where, _source in problems:
            if not os.path.lexists(where):
                continue  # gone with what went before it
            file_same = matches(path, trusted)
            where_same = where == path or matches(where, self._trusted_rules(where))
            done = []
            if not where_same or (kind == "type" and where == path):
                if trusted[0] == "absent" and is_under(where, path):
                    where = path  # a new directory of links: all of it goes
                done.append(self._quarantine(where, scope))
            if (
                not restored
                and not file_same
                and self._exists(path)
                and trusted[0] in ("file", "absent")
            ):
                restored = True
                ok, what = self._restore(path, trusted, scope)
                if not ok:
                    self._pending[path] = what
                if ok and trusted[0] == "file":
                    what = "its previous content was put back"
                done.append(what)
            if done:
                scope.notices.append(f"agent rules file {name} {why}; {'; '.join(done)}{stopped}")
            if where == path and kind == "type":
                break  # the rules name itself went: what it referred to is moot
        return True
