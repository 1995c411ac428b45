"""The guard's part in judging the commits a run leaves on a ref (``reftips``): before a run,
each git directory's refs signature, and the tips git lists asked again only when it changed
(the user committed or fetched between runs: those commits are theirs); after a run whose
signature changed, its new commits judged and every ref that leads to one put back.

Fail closed: refs git cannot list before a run count as none only where there are none (a
``.git`` being made: all a run leaves on them is its own); where there are some, the run does not
start (taking them for none would put every ref back). After a run, refs that cannot be judged,
or put back, are said so in its notice and judged again before the next run in that repository,
which does not start while they cannot be.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable, Iterable

from run_bash.errors import SpawnError
from run_bash.sandbox import gitindex, reftips
from run_bash.sandbox.gitask import HostReadError
from run_bash.sandbox.guardscope import Scope
from run_bash.sandbox.hostread import HostRead, kept_path
from run_bash.sandbox.proc import descendants, lease_holders

# Why git is not asked now.
LEASED = "a running command holds a file lease, which git's reading would break"


def runs_hold_leases(scopes: Iterable[Scope]) -> bool:
    """Whether a process of this host's (a run's) holds a file lease now (``/proc/locks``:
    read only where git is about to be asked, which costs as much, and only while a run goes
    on: ``scopes``, the guard's)."""
    if all(s.ended for s in scopes):
        return False
    held = lease_holders()
    return bool(held and held.intersection(descendants(os.getpid())))


# What the user's git would do with a commit found.
WOULD_WRITE = (
    "your next `git reset --hard`, `git checkout`, `git stash pop`, `git merge` or `git rebase`"
)


def _common(hr: HostRead, g: str) -> str:
    return next((r.common_dir for r in hr.repos if r.git_dir == g), g)


def work_tree_of(hr: HostRead, g: str) -> str | None:
    """The work tree of git directory ``g`` (its own, else one whose common dir it is)."""
    return next((r.work_tree for r in hr.repos if r.work_tree and r.git_dir == g), None) or next(
        (r.work_tree for r in hr.repos if r.work_tree and r.common_dir == g), None
    )


class RefsGuard:
    """Mixed into ``guard.Keeper``; every method runs with its big lock held."""

    # git dir -> the tips git listed when last asked, with the signature taken just before.
    _refs: dict[str, reftips.Tips]
    # git dir -> why what a run left on its refs is not judged yet (judged again before a run).
    _refs_pending: dict[str, str]
    _scopes: dict[str, Scope]  # Keeper's: the runs it guards
    # git dir -> its refs as git listed them beside a host's first policy there (``refs_ahead``).
    _ahead: dict[str, concurrent.futures.Future[reftips.Tips | None]]
    _ahead_lock: threading.Lock

    def _name(self, hr: HostRead, path: str) -> str:  # provided by Keeper
        raise NotImplementedError

    def _index_smuggled(self, scope: Scope, index: str, stopped: str) -> bool:  # by Keeper
        raise NotImplementedError

    def refs_ahead(self, git_dir: str, common_dir: str) -> None:
        """A host's first policy named a repository a run may write (``Discovery.on_repo``):
        while no run is going and its refs were never listed here, git lists them now, on a
        thread of their own, beside the rest of that policy. The run takes the list
        (``_refs_before``) only when the signature it takes then is the one taken before git
        was asked, as for a list kept from an earlier run; otherwise it asks again. The first
        run in a repository then waits for two git processes less (about 5 ms)."""
        if self._scopes or git_dir in self._refs:
            return
        with self._ahead_lock:
            if git_dir in self._ahead:
                return
            ahead = self._ahead[git_dir] = concurrent.futures.Future()

        def ask() -> None:
            try:
                ahead.set_result(reftips.ask(git_dir, reftips.signature(git_dir, common_dir)))
            except BaseException:  # the run asks again, and reports what fails then
                ahead.set_result(None)

        threading.Thread(target=ask, name="run_bash-refs", daemon=True).start()

    def _listed_ahead(self, g: str, sig: reftips.Sig) -> reftips.Tips | None:
        """The refs of ``g`` listed ahead (``refs_ahead``), when listed under ``sig``."""
        with self._ahead_lock:
            ahead = self._ahead.pop(g, None)
        if ahead is None:
            return None
        tips = ahead.result()  # (git is given a time limit: ``gitask.run_git``)
        return tips if tips is not None and tips.sig == sig else None

    def _refs_before(self, scope: Scope, covered: Callable[[str], bool]) -> None:
        """Before a run: the refs of each git directory it can write are known as git lists them
        now, unless another active run could have moved them (its own end judges them). Raises
        SpawnError when what an earlier run left on them is still not judged or put back."""
        hr = scope.host_read
        for g in hr.git_dirs:
            known = self._refs.get(g)
            if known is not None and covered(g):
                continue
            if known is not None and g in self._refs_pending:
                self._judge_refs(scope, g, g, "")
                why = self._refs_pending.get(g)
                if why is not None:
                    then = (
                        "the run does not start until it is let go"
                        if why == LEASED
                        else "fix it by hand, then run again"
                    )
                    raise SpawnError(
                        f"what an earlier run left on the refs of {self._name(hr, g)} cannot be "
                        f"judged or put back ({why}); {then}"
                    )
                continue
            sig = reftips.signature(g, _common(hr, g))
            if known is not None and known.sig == sig:
                continue  # nothing changed: no git call
            listed = self._listed_ahead(g, sig)
            if listed is not None:
                self._refs[g] = listed
                continue
            why = LEASED if runs_hold_leases(self._scopes.values()) else None
            if why is None:
                try:
                    self._refs[g] = reftips.ask(g, sig)
                    continue
                except HostReadError as e:
                    why = str(e)
            if reftips.has_refs(sig):
                # Refs git does not list now are never taken for none: all of them would then
                # look made by the run, and be put back (branches deleted).
                raise SpawnError(
                    f"git cannot list the refs of {self._name(hr, g)} now ({why}); the run does "
                    "not start until it can"
                )
            # No ref yet (a `.git` being made): everything a run leaves on it is the run's.
            self._refs[g] = reftips.Tips(sig)

    def _check_refs(
        self, scope: Scope, stopped: str, elsewhere: dict[str, str], live: bool = False
    ) -> None:
        """After a run: the commits it left on the refs of each git directory it could write
        (``reftips.judge``); a ref (or stash entry) that leads to one that holds what no run may
        write is put back (``reftips.take_back``), and then the index is judged again (it may
        stage what the branch moved back no longer has, ``gitindex.smuggled``)."""
        hr = scope.host_read
        judged = [
            self._judge_refs(scope, g, elsewhere.get(g, g), stopped, live) for g in hr.git_dirs
        ]
        if not any(judged):
            return
        for g in hr.git_dirs:
            index = gitindex.index_path(elsewhere.get(g, g))
            if os.path.isfile(index):
                self._index_smuggled(scope, index, stopped)

    def _judge_refs(self, scope: Scope, g: str, at: str, stopped: str, live: bool = False) -> bool:
        """Judge the refs of git directory ``g`` (now at ``at``) against those last known; True
        when something was put back. While a run holds a file lease, git is not run (its open
        would break the lease, which the checks of the members judge): the refs stay to judge,
        before the next run at the latest; a look at a background run (``live``) says nothing."""
        hr = scope.host_read
        known = self._refs.get(g)
        if known is None:
            return False
        sig = reftips.signature(at, _common(hr, g) if at == g else at)
        if g not in self._refs_pending and (
            known.sig == sig or (live and reftips.settled(known.sig) == reftips.settled(sig))
        ):
            # (At a look at a background run, a signature that is only too young to vouch for
            # itself is taken as unchanged: the run's end judges it. Else every look in the
            # 2 s after a ref moved would run git.)
            return False
        name = self._name(hr, at)
        work = work_tree_of(hr, g)
        if runs_hold_leases(self._scopes.values()):
            self._refs_pending[g] = LEASED
            if not live:
                scope.notices.append(
                    f"{name}: the refs the run changed are not judged yet ({LEASED}): do not "
                    "check out, reset to or pop what it left; they are judged before the next run "
                    f"here{stopped}"
                )
            return False
        try:
            now = reftips.ask(at, sig)
            verdict = reftips.judge(at, known, now, work, lambda p: kept_path(hr, p))
        except HostReadError as e:
            self._refs_pending[g] = str(e)
            scope.notices.append(
                f"{name}: the refs the run changed could not be judged ({e}): do not check out, "
                "reset to or pop what it left; they are judged again before the next run here, "
                f"which does not start until they can be{stopped}"
            )
            return False
        if not verdict.refs and not verdict.stash and verdict.why_all is None:
            self._refs[g] = now
            self._refs_pending.pop(g, None)
            return False
        done, failed = reftips.take_back(at, work, known, now, verdict)
        hits = list(
            dict.fromkeys([*verdict.found, *(f for f in verdict.refs.values() if not f.path)])
        )
        if verdict.why_all is not None:
            what = f"the refs the run moved were not judged: {verdict.why_all}"
        else:
            shown = "; ".join(
                f"commit {f.commit[:12]} holds {f.path} ({f.why})"
                if f.path
                else f"a ref names {f.commit[:12]}, {f.why}"
                for f in hits[:3]
            )
            more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
            what = f"the run left {shown}{more}, which {WOULD_WRITE} would write"
        if failed:
            self._refs_pending[g] = "; ".join(failed)
        else:
            self._refs_pending.pop(g, None)
            try:
                self._refs[g] = reftips.ask(at, reftips.signature(at, _common(hr, g)))
            except HostReadError as e:
                self._refs_pending[g] = str(e)
        undone = f"; {'; '.join(failed)}: do not check it out" if failed else ""
        scope.notices.append(
            f"{name}: {what}: {'; '.join(done) or 'nothing was put back'}{undone} (git keeps "
            f"the commits: `git show COMMIT` shows one, without writing it){stopped}"
        )
        return True
