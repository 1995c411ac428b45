"""Runs and the change store (``run_bash.changes``): what each run changed, and undo.

``RunChanges`` is the hook ``SessionManager`` calls around every command: ``begin`` before it is
spawned (the spawn waits for it), ``finish`` when it is over (exit, timeout, kill, host shutdown),
before its final result is sent, so the result carries the change set's summary. It also answers
the host's change-set requests (changes, diff, plan, undo, runs, usage).

Threading: every ``ChangeStore`` call may block on the project's files, which a sandboxed command
controls (a FUSE mount, a huge tree), so each one runs on this hook's worker threads and the host
loop only awaits it. The one exception is ``finish_now`` at host shutdown, when every command has
been killed and nothing is left to wait for but the store.

What a session carries (``Session.changes``, sent to Lua and written to the audit log): None while
nothing is known (undo off, not started, still running); ``{"not_recorded": why}``; or
``{"summary", "counts", "paths"}`` (``summary`` is "" when the run changed nothing).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from run_bash.config import UndoConfig
from run_bash.errors import UsageError

if TYPE_CHECKING:  # the store is imported on first use: the host starts without it
    from run_bash.changes import ChangeSet, ChangeStore, Limits, NotRecorded, Token

log = logging.getLogger("run_bash")

T = TypeVar("T")
WORKERS = 4
# A project found too big to record (undo.max_files, undo.max_store) is not walked again for this
# long: finding that out reads it up to the cap, which would otherwise delay every run there.
TOO_BIG_RECHECK_S = 1800.0
DIFF_MAX_BYTES = 8 * 1024 * 1024  # a longer diff is cut (a buffer of it would stall the editor)
# A run whose change set could not be written at host shutdown within this time has none.
SHUTDOWN_FINISH_S = 3.0


class Run(Protocol):
    """What the hook reads and sets on a session."""

    id: str
    cmd: str
    cwd: str
    notices: list[str]
    changes: dict[str, Any] | None
    change_token: Token | None


def describe(cs: ChangeSet) -> dict[str, Any]:
    """A finished run's change set as a session carries it."""
    return {"summary": cs.summary(), "counts": cs.counts(), "paths": cs.brief()}


def _limits(config: UndoConfig) -> Limits:
    from run_bash.changes import Limits

    return Limits(
        max_file_size=config.max_file_size,
        max_files=config.max_files,
        keep=config.keep,
        max_store=config.max_store,
        ignored_file_max=config.ignored_file_max,
        ignored_total=config.ignored_total,
    )


class RunChanges:
    """The change store of one host, on its own worker threads.

    Args:
        root: the store directory (``stdpath("state")/run_bash/undo``, passed by Lua); None when
            the host was given none: runs are then not recorded and queries are refused.
        config: the ``undo`` options.
        loop: the host loop, which awaits the workers.
        home: the user's home directory (never a project).
    """

    def __init__(
        self,
        root: str | None,
        config: UndoConfig,
        *,
        loop: asyncio.AbstractEventLoop,
        home: str | None = None,
    ) -> None:
        self.root = root
        self.config = config
        self.loop = loop
        self.home = home
        self._store: ChangeStore | None = None
        self._store_mu = threading.Lock()  # several worker threads may need it first at once
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=WORKERS, thread_name_prefix="run_bash-undo"
        )
        self._kept: set[str] = set()
        self._too_big: dict[str, tuple[float, NotRecorded]] = {}  # project -> (when, outcome)
        self.diff_max = DIFF_MAX_BYTES

    # -- configuration ---------------------------------------------------------------------------

    @property
    def recording(self) -> bool:
        """Whether new runs are recorded (``undo.enabled`` and a store to record into)."""
        return self.root is not None and self.config.enabled

    def configure(self, config: UndoConfig) -> None:
        """Use ``config`` from now on (runs in progress finish under it too)."""
        self.config = config
        self._too_big.clear()  # the limits may have changed
        with self._store_mu:
            if self._store is not None:
                self._store.limits = _limits(config)

    @property
    def store(self) -> ChangeStore:
        if self.root is None:
            raise UsageError("no undo store: the host was started without one (RUN_BASH_UNDO)")
        with self._store_mu:
            if self._store is None:
                from run_bash.changes import ChangeStore

                self._store = ChangeStore(self.root, _limits(self.config), home=self.home)
            return self._store

    def private_paths(self) -> list[str]:
        """Paths no sandboxed command may read or change: the store. It is created (empty, 0700)
        when missing, undo off included: the backends cover a denied path that exists, and a
        missing one under a writable grant could be created and filled by a run, then trusted
        by this host once undo records."""
        if not self.root:
            return []
        with contextlib.suppress(OSError):  # one that cannot be made cannot be made inside either
            os.makedirs(self.root, mode=0o700, exist_ok=True)
        return [self.root]

    def is_kept(self, run_id: str) -> bool:
        """Whether the change set of ``run_id`` (a run of this host) is still kept, as of the last
        run that ended. Never blocks: pruning of session history asks it on the loop."""
        return run_id in self._kept

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.loop.run_in_executor(self._pool, fn, *args)

    # -- around a run ----------------------------------------------------------------------------

    async def begin(self, s: Run) -> None:
        """Snapshot the run's project before its command is spawned. Never raises: a run that
        cannot be recorded gets the notice "changes not recorded: <why>" and runs anyway."""
        if not self.recording:
            return
        try:
            token, why = await self._call(self._begin, s.id, s.cwd, s.cmd)
        except Exception as err:
            log.exception("recording the changes of %s failed", s.id)
            token, why = None, f"internal error ({err}; details in the log)"
        if why is not None:
            s.notices.append(f"changes not recorded: {why}")
            s.changes = {"not_recorded": why}
        else:
            s.change_token = token

    def _begin(self, run_id: str, cwd: str, cmd: str) -> tuple[Token | None, str | None]:
        """(token, None), or (None, why the run is not recorded)."""
        from run_bash.changes import NotRecorded

        store = self.store
        project = store.project_for(cwd)[0]
        known = self._too_big.get(project) if project else None
        if known is not None and time.monotonic() - known[0] < TOO_BIG_RECHECK_S:
            return None, known[1].reason
        got = store.begin(run_id, cwd, label=cmd)
        if project and isinstance(got, NotRecorded) and got.lasting:
            self._too_big[project] = (time.monotonic(), got)
        elif project:
            self._too_big.pop(project, None)
        return (None, got.reason) if isinstance(got, NotRecorded) else (got, None)

    def _finish(self, token: Token) -> ChangeSet:
        cs = self.store.finish(token)
        self._kept = self.store.kept_ids()  # this run's, less what retention dropped meanwhile
        return cs

    async def finish(self, s: Run) -> None:
        """Record what the run changed; its summary goes on the session (``changes``)."""
        token, s.change_token = s.change_token, None
        if token is None:
            return
        try:
            s.changes = describe(await self._call(self._finish, token))
        except Exception as err:
            log.exception("recording the changes of %s failed", s.id)
            s.changes = {"not_recorded": f"internal error ({err}; details in the log)"}
            s.notices.append(f"changes not recorded: internal error ({err})")

    async def abandon(self, s: Run) -> None:
        """Forget a begun run whose command never started."""
        token, s.change_token = s.change_token, None
        if token is not None:
            try:
                await self._call(self.store.abandon, token)
            except Exception:
                log.exception("abandoning the change set of %s failed", s.id)

    def finish_now(
        self,
        runs: Iterable[Run],
        timeout_s: float = SHUTDOWN_FINISH_S,
        never_started: Iterable[Run] = (),
    ) -> None:
        """Host shutdown (every command already killed): finish the runs still open, waiting at
        most ``timeout_s`` in all; a run not finished by then has no change set. Runs in
        ``never_started`` (snapshotted, not spawned yet) are forgotten: nothing of theirs ran."""
        for s in never_started:
            token, s.change_token = s.change_token, None
            if token is not None:
                self._pool.submit(self.store.abandon, token)
        pending = []
        for s in runs:
            token, s.change_token = s.change_token, None
            if token is not None:
                pending.append((s, self._pool.submit(self._finish, token)))
        deadline = time.monotonic() + timeout_s
        for s, fut in pending:
            try:
                s.changes = describe(fut.result(max(0.0, deadline - time.monotonic())))
            except Exception as err:
                late = isinstance(err, concurrent.futures.TimeoutError)
                why = "the host stopped first" if late else str(err)
                s.changes = {"not_recorded": why}

    def close(self) -> None:
        """Stop the workers without waiting (the host is exiting)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- queries (each on a worker) --------------------------------------------------------------

    def _resolve(self, run_id: str | None, cwd: str | None) -> str:
        """``run_id``, or the latest run with changes in the project of ``cwd`` (else anywhere)."""
        if run_id is not None:
            return run_id
        store = self.store
        project = store.project_for(cwd)[0] if cwd else None
        cs = (store.latest(project) if project else None) or store.latest()
        if cs is None:
            raise UsageError("no run with changes is kept")
        return cs.run_id

    @staticmethod
    def _unknown(run_id: str) -> UsageError:
        return UsageError(
            f"no change set is kept for run {run_id!r} (a run that changed nothing keeps none; "
            "the oldest are pruned: undo.keep, undo.max_store)"
        )

    def _get(self, run_id: str | None, cwd: str | None) -> ChangeSet:
        rid = self._resolve(run_id, cwd)
        cs = self.store.get(rid)
        if cs is None:
            raise self._unknown(rid)
        return cs

    async def changes(self, run_id: str | None, cwd: str | None) -> dict[str, Any]:
        """``{run, project, label, summary, changes: [{path, kind, detail?, skipped?}]}``."""

        def work() -> dict[str, Any]:
            cs = self._get(run_id, cwd)
            return {
                "run": cs.run_id,
                "project": cs.project,
                "label": cs.label,
                "undo_of": cs.undo_of,
                "summary": cs.summary(),
                "changes": cs.to_list(),
            }

        return await self._call(work)

    async def diff(self, run_id: str | None, cwd: str | None) -> dict[str, Any]:
        """``{run, text}``: the change set as a unified diff."""

        def work() -> dict[str, Any]:
            rid = self._resolve(run_id, cwd)
            text = self.store.diff_text(rid)
            if text is None:
                raise self._unknown(rid)
            if len(text) > self.diff_max:
                cut = text.rfind("\n", 0, self.diff_max) + 1
                rest = text[cut:].count("\n")
                text = text[:cut] + f"# … {rest} more lines not shown: the diff is too long\n"
            return {"run": rid, "text": text}

        return await self._call(work)

    async def plan(self, run_id: str | None, cwd: str | None, force: bool) -> dict[str, Any]:
        """What undo would do now: ``{run, project, label, restore, remove, conflicts,
        not_recovered}``."""

        def work() -> dict[str, Any]:
            cs = self._get(run_id, cwd)
            try:
                plan = self.store.plan(cs.run_id, force)
            except KeyError:
                raise self._unknown(cs.run_id) from None
            return {**plan, "label": cs.label, "force": force}

        return await self._call(work)

    async def undo(
        self, run_id: str | None, cwd: str | None, force: bool, new_id: str
    ) -> dict[str, Any]:
        """Undo a run (recorded as run ``new_id``): ``{undo_of, run, restored, removed, conflicts,
        not_recovered, errors, recorded, project}``."""

        def work() -> dict[str, Any]:
            cs = self._get(run_id, cwd)
            try:
                done = self.store.undo(cs.run_id, force, new_id)
            except KeyError:
                raise self._unknown(cs.run_id) from None
            except FileNotFoundError as err:
                raise UsageError(str(err)) from None
            self._kept = self.store.kept_ids()
            return {**done, "undo_of": cs.run_id, "project": cs.project, "force": force}

        return await self._call(work)

    async def runs(self) -> list[dict[str, Any]]:
        """Every kept change set, newest first: ``{run, project, ended, counts, undo_of,
        label}``."""
        return await self._call(self.store.runs)

    async def usage(self) -> dict[str, Any]:
        """``{path, bytes, runs, projects, enabled, keep, max_store, idle_days}`` for health."""
        from run_bash.changes.store import PROJECT_IDLE_S

        def work() -> dict[str, Any]:
            return {
                **self.store.usage(),
                "enabled": self.config.enabled,
                "keep": self.config.keep,
                "max_store": self.config.max_store,
                "idle_days": PROJECT_IDLE_S // 86400,
            }

        return await self._call(work)
