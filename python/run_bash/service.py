"""The host's service: every RPC method as a plain-Python call. No RPC.

The rplugin adapter maps each ``run_bash.<method>`` RPC request onto ``Service.rpc`` and forwards
``emit(name, payload)`` to Lua. Methods return at once; long work (kill, waiting for results) runs as
tasks on the loop and answers through events.

Every argument from Lua is checked for type here (``boundary``), and every audit line is written
here: one decision line per run (``auto`` when nothing needed the user) and one run line when it
ends, including runs the user rejected or cancelled; one undo line per undo.

Change sets (``run_changes``): the store lives where Lua says (``RUN_BASH_UNDO``). Every request
about them (changes, diff, plan, undo, undo_runs, undo_usage) may read the project's files, so it
is answered by a ``reply`` event carrying the caller's token, from a worker thread's result.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from run_bash import codecache, modcache, startup
from run_bash.audit import RUN_FIELDS, AuditLog
from run_bash.backends import BACKENDS, CONFINING_BACKENDS, named_at_start
from run_bash.boundary import arity, choice, flag, options, text
from run_bash.config import (
    DEFAULT_WAIT_S,
    MAX_BG_AFTER_S,
    MAX_TIMEOUT_S,
    MAX_WAIT_S,
    Config,
    parse_config,
)
from run_bash.errors import ConfigError, RunBashError, UsageError
from run_bash.gate import (
    ANSWERS,
    IRREVERSIBLE,
    REVERSIBLE,
    Answer,
    Gate,
    Undo,
    Where,
    decide,
    lua_results,
    quote_command,
)
from run_bash.journal import Journal
from run_bash.matching import compile_pattern
from run_bash.results import RunResult, Wire, plain
from run_bash.sandbox.base import choose_backend, get_backend
from run_bash.sandbox.hostread import RulesName
from run_bash.sessions import Session, SessionManager, caller_id, check_cmd, new_id

if TYPE_CHECKING:
    from run_bash.fsdeps import Reads
    from run_bash.run_changes import RunChanges

log = logging.getLogger("run_bash")

Emit = Callable[[str, dict[str, Any]], None]

# The RPC methods and their arguments, in order (more arguments than these are refused; one left
# out is nil).
RPC: dict[str, tuple[str, ...]] = {
    "hello": ("early",),
    "setup": ("opts", "codecompanion"),
    "check": ("cmd", "opts"),
    "run": ("spec",),
    "decide": ("id", "decision", "reason"),
    "kill": ("id", "token"),
    "kill_all": ("token",),
    "sessions": (),
    "output": ("id", "opts"),
    "wait": ("id", "opts", "token"),
    "watch": ("id",),
    "pin": ("id", "reason"),
    "unpin": ("id", "reason"),
    "health": (),
    "rule_defaults": (),
    "tool_args": ("args",),
    "facts": (),
    "shutdown": (),
    "changes": ("id", "opts", "token"),
    "diff": ("id", "opts", "token"),
    "plan": ("id", "opts", "token"),
    "undo": ("id", "opts", "token"),
    "undo_runs": ("token",),
    "undo_usage": ("token",),
}
CHECK_OPTIONS = frozenset({"skip_sandbox", "ask", "lua_results", "decision_id", "cwd", "source"})
RUN_OPTIONS = frozenset(
    {
        "cmd",
        "cwd",
        "timeout",
        "bg_after",
        "skip_sandbox",
        "live",
        "ask",
        "approved",
        "unsandboxed_ok",
        "answer",
        "decision_id",
        "lua_results",
        "source",
        "wait_for",
        "id",
    }
)
WAIT_OPTIONS = frozenset({"wait_for", "timeout"})
SOURCES = ("user", "agent")
CHANGES_OPTIONS = frozenset({"cwd"})
UNDO_OPTIONS = frozenset({"cwd", "force"})


def same_data(a: object, b: object) -> bool:
    """Whether two values from Lua are the same data, types included (``True == 1`` and
    ``1 == 1.0`` in Python, but the options' checks tell them apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(same_data(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        return len(a) == len(b) and all(same_data(x, y) for x, y in zip(a, b, strict=True))
    return a == b


# Directories whose write grants ``Service._grants`` keeps at once.
GRANTS_KEPT = 64
# How long after ``ready`` the modules start-up imported are written for the next start.
MODULES_SAVED_AFTER_S = 1.0


class Service:
    """State of one host: config, the gate, sessions, the audit log."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        emit: Emit,
        *,
        environ: Mapping[str, str] | None = None,
        state_dir: str | None = None,
    ) -> None:
        self.loop = loop
        self._emit = emit
        self.environ = dict(os.environ if environ is None else environ)
        # ``_grants``' answers: (directory, hidden paths) -> (options, answer, what it read).
        self._grants_kept: dict[
            tuple[str, tuple[str, ...]], tuple[Config, tuple[list[str], list[str]], Reads]
        ] = {}
        self.config: Config = parse_config({})
        self.gate = Gate()
        self._held: dict[str, Answer] = {}  # session id -> the answer the user is asked about
        # Runs started without asking because undo covers them, until their snapshot says so.
        self._held_answers: dict[str, Answer] = {}
        # Decisions made and journaled whose audit line waits for the run to have started
        # (``_decided``): session id -> the decision line.
        self._made: dict[str, dict[str, Any]] = {}
        self._state_dir = state_dir or self.environ.get("RUN_BASH_STATE_DIR")
        self._temp_root = self.environ.get("RUN_BASH_TEMP_DIR") if state_dir is None else None
        self._mgr: SessionManager | None = None
        self._journal: Journal | None = None
        self._lined: set[str] = set()  # runs whose run line is written
        self._changes: RunChanges | None = None
        self._undo_ids: set[str] = set()  # ids given to undos (they are runs, not sessions)
        # The options ``hello`` applied, until ``setup`` comes: (opts, codecompanion, notices).
        self._early: tuple[object, object, list[str]] | None = None
        self.audit = AuditLog(None, 0)
        self._configure_audit()
        startup.mark("service")  # run_bash's modules imported, this object made

    def _configure_audit(self) -> None:
        cfg = self.config.audit
        path = self.environ.get("RUN_BASH_AUDIT")
        self.audit = AuditLog(path, cfg.max_bytes, cfg.enabled)
        self.journal.audit(path, cfg.max_bytes, cfg.enabled)

    @property
    def journal(self) -> Journal:
        """What this host opened and not yet closed, for the keeper (``journal.py``)."""
        if self._journal is None:
            self._journal = Journal(self.mgr.state_dir)
        return self._journal

    def rpc(self, method: str, args: tuple[object, ...]) -> Any:
        """Call RPC ``method``: more arguments than it takes are one UsageError; one left out is
        nil, as Lua leaves out a trailing nil (each method checks what it is given)."""
        if method not in RPC:
            raise UsageError(f"unknown method {method!r}")
        names = RPC[method]
        arity(method, args, names)
        return getattr(self, method)(*args, *[None] * (len(names) - len(args)))

    def emit(self, name: str, event: Wire | dict[str, Any]) -> None:
        """Forward an event to Lua as plain data; a run that ended goes to the audit log, at once
        after its result is on its way (the line's two file writes are not on the result's
        path; nothing else runs on the loop between them, and a host that dies in between has
        the line written from its journal, ``journal.reconcile``)."""
        payload = event.to_wire() if isinstance(event, Wire) else event
        try:
            self._emit(name, payload)
        finally:  # the line is written whatever became of the sending
            status = payload.get("status")
            if (name == "result" and status != "running") or name == "exited":
                self._run_line(payload)

    def _run_line(self, run: Mapping[str, Any]) -> None:
        """The one run line of a run (a second report of the same run, e.g. a result that comes
        in after the run was killed at exit, writes nothing)."""
        sid = str(run.get("id"))
        if sid in self._lined:
            return
        self._lined.add(sid)
        self._decided(sid)  # (it ended before its start was over: a failed spawn)
        undoable = self._held_answers.pop(sid, None)
        if undoable is not None:  # it started on undo's word: that was the decision
            cwd = str(run.get("cwd") or undoable.cwd)
            self._decision_line(undoable, cwd, "auto_undoable", session_id=sid)
            self.journal.decided(sid)
        self.audit.run(run)
        self.journal.closed(sid)

    def _open(
        self, s: Session, held: Answer | None = None, made: dict[str, Any] | None = None
    ) -> None:
        """Journal a run that began: when held, with the decision line nobody has written yet;
        ``made``: a decision taken whose line is written once the run has started
        (``_decided``)."""
        # Before it started, or this instant: nothing of it listens yet (finding out would read
        # every process of its tree).
        fields = s.fields(ports=False)
        run = {k: fields[k] for k in RUN_FIELDS if fields.get(k) is not None}
        decision = self._decision_record(held, s.cwd, "", session_id=s.id) if held else None
        self.journal.open(s.id, run, decision, made)
        if made is not None:
            self._made[s.id] = made

    def _decided(self, sid: str) -> None:
        """Write the decision line of a run journaled with it (``_open``'s ``made``), once."""
        record = self._made.pop(sid, None)
        if record is not None:
            self.audit.decision(record)
            self.journal.decided(sid)

    @property
    def recorder(self) -> RunChanges:
        """The change store's hook (``run_changes``)."""
        if self._changes is None:
            from run_bash.run_changes import RunChanges

            self._changes = RunChanges(
                self.environ.get("RUN_BASH_UNDO") or None,
                self.config.undo,
                loop=self.loop,
                home=self.environ.get("HOME"),
            )
            self._changes.grants = self._grants
            self._changes.others = self._other_run
        return self._changes

    def _grants(self, cwd: str) -> tuple[list[str], list[str]]:
        """What a sandboxed run in ``cwd`` may write by the rules, and the verified caches. Each
        recorded run's snapshot asks (``RunChanges.begin``): the answer for a directory is kept
        with the few paths computing it looked at (``fsdeps``), and computed again when one of
        them changed, or the options did."""
        from run_bash import fsdeps
        from run_bash.sandbox.policy import writable_grants

        config = self.config
        hidden = tuple(self._changes.private_paths()) if self._changes is not None else ()
        key = (cwd, hidden)
        hit = self._grants_kept.get(key)
        if hit is not None and hit[0] is config and hit[2].look():
            return list(hit[1][0]), list(hit[1][1])
        with fsdeps.recording() as reads:
            got = writable_grants(config, cwd, env=self.environ, hidden=hidden)
        if reads.usable and reads.settled:
            if len(self._grants_kept) >= GRANTS_KEPT:
                self._grants_kept.clear()
            self._grants_kept[key] = (config, got, reads)
        return list(got[0]), list(got[1])

    @property
    def mgr(self) -> SessionManager:
        if self._mgr is None:
            self._mgr = SessionManager(
                self.config,
                loop=self.loop,
                on_event=self.emit,
                state_dir=self._state_dir,
                temp_root=self._temp_root,
                environ=self.environ,
                changes=self.recorder,
            )
            self._mgr.on_hold = self._on_hold
        return self._mgr

    def _on_hold(self, s: Session) -> None:
        """A run the gate let through because undo covered it, which the snapshot taken just
        before it started says undo does not cover after all: it asks the user now."""
        answer = self._held_answers.pop(s.id, None)
        if answer is None:
            return
        why = s.hold or "undo does not cover it"
        held = replace(
            answer,
            needs_approval=True,
            undoable=False,
            undo_why=f"undo cannot take it all back now: {why}",
            cover=None,
        )
        self._held[s.id] = held
        s.notices[:] = [n for n in s.notices if not n.startswith("ran without asking")]
        self.emit("approve", {"id": s.id, "cwd": s.cwd, "answer": held.to_wire()})

    # -- configuration -------------------------------------------------------------------------------

    def hello(self, early: object = None) -> None:
        """Say ``ready``: Lua started the host without waiting and sends its options on this.
        What every run needs is loaded first (``preload``): nobody waits for a host that is
        starting, and the first command then finds it done. ``early``: the options Lua will send
        with ``setup`` (``{opts =, codecompanion =}``), applied now, so that the first run's
        sandbox and its project's undo index are made while the host starts."""
        try:
            self.preload(early)
        finally:
            if not gc.isenabled():  # the host started with collection off (``boot.py``)
                gc.freeze()  # what start-up loaded lives as long as the host: never scan it again
                gc.enable()
        startup.mark("ready")
        counts = (*codecache.stats(), *codecache.pattern_stats(), *modcache.stats())
        log.info(
            "start-up (ms from jobstart): %s; dataclass methods: %d kept, %d compiled; "
            "patterns: %d kept, %d compiled; modules: %d kept, %d changed",
            startup.report(),
            *counts,
        )
        self.emit("ready", {})
        codecache.save()  # start-up is over: what it compiled (if anything), for the next start
        modcache.done()
        if self.recorder.recording:  # what hashes the blobs of runs' changes fast (``digest``)
            from run_bash.changes.objects import load_fast_hash

            self.loop.call_later(MODULES_SAVED_AFTER_S, load_fast_hash)
        # The modules it imported, for the next start (``modcache``): a moment later, on a
        # worker (rewriting the file reads every module's bytecode), not on the first run's way.
        self.loop.call_later(MODULES_SAVED_AFTER_S, self.loop.run_in_executor, None, modcache.save)

    def preload(self, early: object = None) -> None:
        """Load what every run needs and answer the backend question for the options in force,
        so that the first command does not pay for it: the pause list's checker, the change
        store when runs are recorded, and the backend's availability (which waits for the
        sandbox launcher the host started first thing, or for bubblewrap's probe, started
        before the checker loads so that its sandboxes run meanwhile). What no run needs
        (health, diffs, undo, the command line) stays unloaded until it is used.

        The loading runs here, on the loop's thread, before ``ready``: an earlier change that
        moved the sandbox guard's and policy's imports and the guard's ``Keeper`` onto executor
        threads hung one full test run in three at teardown (a Neovim ``:qa!``), for a cause not
        found; so nothing is imported on another thread and the guard stays imported eagerly.
        The options that came with ``hello`` (``early``) are applied once it is all loaded, by
        ``setup`` itself: the workers that make the first run's sandbox and undo index start
        then, as after any ``setup``."""
        import importlib

        named = named_at_start(self.environ)
        # The backend the check below asks first ("auto" asks them in the registry's order).
        # bubblewrap's probe runs sandboxes: started now, they run while the rest loads.
        probing = (named if named in BACKENDS else CONFINING_BACKENDS[0]) == "bubblewrap"
        if probing:
            from run_bash.sandbox import bwprobe

            bwprobe.start()
        try:
            importlib.import_module("run_bash.checker")
            startup.mark("checker")
            if self.recorder.recording:
                importlib.import_module("run_bash.changes")
            if named != "none":  # how the host talks to the fork server it forked at its start
                importlib.import_module("run_bash.sandbox.launcher")
            if isinstance(early, dict):
                self._setup_early(early.get("opts"), early.get("codecompanion"))
            if named == "none":
                return  # no sandbox named: checking one would start the launcher for nothing
            try:
                # The backend the options name (its answer is kept for setup's new objects),
                # else the one "auto" picks.
                self.mgr.choice(named if named in BACKENDS else None)
            except Exception:  # asked again, and reported, at setup and at the first run
                log.exception("backend check at start-up")
        finally:
            if probing:  # taken whatever was chosen: no probe is left running
                try:
                    bwprobe.result()
                except Exception:
                    log.exception("bubblewrap's probe at start-up")

    def setup(self, opts: object = None, codecompanion: object = None) -> dict[str, Any]:
        """Validate and apply the user's options; return notices and what the tool needs to know.

        Problems that would make every run fail (a bad option, a sandlock profile that does not
        exist, extra bwrap arguments bwrap rejects) raise one ConfigError naming each; the
        previous configuration then stays in force. ``codecompanion`` is what CodeCompanion reads
        from a project by itself (``lua/run_bash/agent_files.lua``), checked after every run.
        """
        early, self._early = self._early, None
        if early is not None and same_data(early[0], opts) and same_data(early[1], codecompanion):
            # The same options came with ``hello`` and are in force: what they made is kept.
            return {**self.facts(), "notices": early[2]}
        rules, project_config = parse_codecompanion(codecompanion)
        config = parse_config(opts)
        chosen = choose_backend(config.sandbox.backend, lambda name: get_backend(name, config))
        problems = chosen.backend.validate()
        if problems:
            raise ConfigError(problems)
        self.config = config
        self._configure_audit()
        if self._mgr is not None:
            self._mgr.configure(config)
        self.recorder.configure(config.undo)
        self.mgr.agent_rules = rules
        self.mgr.project_config = project_config
        chosen = self.mgr.choice()
        if not chosen.backend.isolates and "run_bash.sandbox.launcher" in sys.modules:
            # The host started the sandbox launcher early, guessing a confining backend (a
            # host that never loaded the launcher has none to stop). Imported, not taken from
            # ``sys.modules``: a worker that is still importing it is waited for.
            from run_bash.sandbox.launcher import launcher

            launcher().release_unused()
        # The first command's sandbox, ready before it comes (Neovim's directory is the host's).
        self.mgr.prepare_for(os.getcwd())
        return {**self.facts(), "notices": [*config.notices, *chosen.backend.warnings()]}

    def _setup_early(self, opts: object, codecompanion: object) -> None:
        """Apply the options that came with ``hello`` (``setup``'s own path); when Lua's
        ``setup`` then sends the same, its answer is this one. Options it refuses change
        nothing: ``setup`` refuses them again, and Lua reports that."""
        try:
            reply = self.setup(opts, codecompanion)
        except Exception as err:
            log.info("options sent with hello not applied now: %s", err)
            return
        self._early = (opts, codecompanion, reply["notices"])
        startup.mark("setup")

    def facts(self) -> dict[str, Any]:
        """Where commands run and the limits that apply: what the tool's schema says."""
        chosen = self.mgr.choice()
        facts: dict[str, Any] = {
            "backend": chosen.backend.name,
            "sandboxed": bool(chosen.backend.isolates),
            "unavailable": chosen.unavailable,
            # How the backend was chosen ("auto: sandlock works here (…)").
            "chosen_because": chosen.reason,
            "default_timeout": self.config.default_timeout,
            "max_timeout": MAX_TIMEOUT_S,
            "max_bg_after": MAX_BG_AFTER_S,
            "max_wait": MAX_WAIT_S,
            "default_wait": DEFAULT_WAIT_S,
            "max_chars": self.config.output.max_chars,
            "notify_agent": self.config.background.notify_agent,
        }
        if chosen.error:
            # A backend named explicitly that does not work here: runs refuse until it is fixed.
            facts["backend_error"] = chosen.error
        return facts

    # -- the gate ------------------------------------------------------------------------------------

    def _where(self, skip_sandbox: bool) -> Where:
        requested = "none" if skip_sandbox else None
        backend, why = self.mgr.resolve_backend(requested)
        return Where(backend.name, bool(backend.isolates), why, self.mgr.choice(requested).reason)

    def _taken(self) -> dict[str, object]:
        """Every id in use: sessions, answers the gate keeps, undos."""
        taken = {**self.mgr.sessions, **dict.fromkeys(self.gate.ids())}
        return {**taken, **dict.fromkeys(self._undo_ids)}

    def _new_id(self) -> str:
        return new_id(self._taken())

    def _caller_id(self, value: object) -> str | None:
        """The id the caller chose for its run (``id``), checked: well formed and not in use."""
        sid = text("id", value)
        if sid is None:
            return None
        if caller_id(sid) in self._taken():
            raise UsageError(f"the id {sid!r} is taken: leave `id` out for a new one")
        return sid

    def _answer(
        self, cmd: str, *, skip: bool, ask: bool, results: object, source: str, cwd: str
    ) -> Answer:
        from run_bash.checker import check

        found = check(cmd, self.config.pauselist)
        verdict = self._no_branch({**found.to_dict(), "lua_calls": found.lua_calls}, cwd)
        verdict = self._into_git(verdict, cmd, cwd)
        where = self._where(skip)
        answer = decide(
            self._new_id(),
            cmd,
            verdict,
            where,
            skip_sandbox=skip,
            ask=ask,
            results=lua_results(results, verdict["lua_calls"]),
            always=self.gate.is_always(source, cmd, where.sandboxed),
            source=source,
            undo=self._undo_cover(verdict, cwd, where),
            ask_reversible=self._ask_reversible(),
        )
        return replace(answer, cwd=cwd)

    def _no_branch(self, verdict: dict[str, Any], cwd: str) -> dict[str, Any]:
        """``verdict`` without the reasons of a forced rename or copy of a branch that git says
        replaces nothing, and of a fetch whose configuration git says prunes no tags
        (``gitrefs``: state, not the text), while no other run works in that repository."""
        from run_bash.gitrefs import without_new_branches

        return without_new_branches(
            verdict, cwd, self.environ, lambda top: self._other_run(top, None) is not None
        )

    def _into_git(self, verdict: dict[str, Any], cmd: str, cwd: str) -> dict[str, Any]:
        """``verdict`` with one more reason, irreversible, when a path the line writes leads
        into a ``.git`` through a symlink of the project (state, not the text: ``rm
        src/lnk/index`` with ``src/lnk -> ../.git``)."""
        why = self.recorder.into_git(cwd, verdict.get("writes") or [])
        if why is None:
            return verdict
        why = f"{quote_command(cmd)} {why}"
        hit = {"reason": why, "rule": None, "command": cmd, "effect": IRREVERSIBLE}
        out = {**verdict, "hits": [*(verdict.get("hits") or []), {**hit, "targets": None}]}
        out.update(pause=True, effect=IRREVERSIBLE)
        if not verdict.get("pause"):
            out.update(reason=why, rule=None, command=cmd)
        return out

    def _other_run(self, project: str, sid: str | None) -> str | None:
        """A session other than ``sid`` still running that can write ``project``: its working
        directory is in it, or holds it (``RunChanges.others``)."""
        top = project.rstrip("/") + "/"
        for s in self.mgr.sessions.values():
            where = os.path.realpath(s.cwd) + "/"
            if s.id != sid and s.running and (where.startswith(top) or top.startswith(where)):
                return s.id
        return None

    def _ask_reversible(self) -> bool:
        """``pauselist.ask_reversible``, as the pause list reads it."""
        from run_bash.checker import ask_reversible

        return ask_reversible(self.config.pauselist)

    def _undo_cover(self, verdict: Mapping[str, Any], cwd: str, where: Where) -> Undo | None:
        """What the change store says about a verdict whose every reason is reversible (None
        for any other: nothing to ask it)."""
        hits = verdict.get("hits") or []
        if not (verdict.get("pause") and verdict.get("effect") == REVERSIBLE and hits):
            return None
        if not where.sandboxed:
            return None
        from run_bash.run_changes import cover_spec

        commands = [a for a in verdict.get("commands") or [] if isinstance(a, (list, tuple))]
        programs = verdict.get("programs")
        spec = cover_spec(
            cwd,
            hits,
            self.environ.get("HOME"),
            commands,
            programs if isinstance(programs, list) else None,
            verdict.get("path_changed") is not False,
            writes if isinstance(writes := verdict.get("writes"), list) else ["?"],
            verdict.get("env_changed") is not False,
        )
        cover = self.recorder.coverage(spec)
        return Undo(cover.ok, cover.why, spec.plain())

    def _gate(self, cmd: str, opts: Mapping[str, Any]) -> Answer:
        """The answer for ``cmd`` under ``opts`` (check's and run's common options)."""
        skip = flag("skip_sandbox", opts.get("skip_sandbox"))
        ask = flag("ask", opts.get("ask"))
        source = choice("source", opts.get("source") or "user", SOURCES)
        decision_id = text("decision_id", opts.get("decision_id"))
        cwd = text("cwd", opts.get("cwd")) or os.getcwd()
        if decision_id is None:
            return self._answer(
                cmd, skip=skip, ask=ask, results=opts.get("lua_results"), source=source, cwd=cwd
            )
        answer = self.gate.take(decision_id, cmd, skip)
        results = lua_results(opts.get("lua_results"), answer.lua_calls)
        if results is not None:
            where = Where(answer.backend, answer.sandboxed, answer.unavailable)
            verdict = {
                "pause": answer.pause,
                "effect": answer.effect,
                "hits": answer.hits,
                "commands": answer.commands,
            }
            undo = self._undo_cover(verdict, answer.cwd or os.getcwd(), where)
            answer = self.gate.with_results(answer, results, undo, self._ask_reversible())
        if ask and not answer.ask:
            answer = replace(answer, ask=True, needs_approval=True, always=False)
        return answer

    def check(self, cmd: object, opts: object = None) -> dict[str, Any]:
        """The gate's answer for ``cmd``: ``{needs_approval, reason, rule, decision_id, …}``.

        With ``lua_results`` (what the user's Lua-function rules said about ``lua_calls``) and the
        ``decision_id`` of the answer that listed those calls, the answer is updated. The answer is
        kept: ``run`` with its ``decision_id`` starts exactly what was shown.
        """
        cmd = check_cmd(cmd)
        return self.gate.keep(self._gate(cmd, options("check", opts, CHECK_OPTIONS))).to_wire()

    def tool_args(self, args: object) -> dict[str, Any]:
        """The CodeCompanion tool's arguments, checked and normalized (``agent.tool_args``)."""
        from run_bash.agent import tool_args

        return tool_args(args)

    # -- runs ----------------------------------------------------------------------------------------

    def run(self, spec: object) -> dict[str, Any]:
        """Start a command; the result arrives as a ``result`` event.

        The gate decides whoever calls. A command it lets through starts at once. One that needs
        the user starts only with the caller's word that the user agreed (``approved``, or
        ``unsandboxed_ok`` for running without a sandbox; ``answer`` says how, for the audit log);
        without it the run is held (status ``awaiting_approval``), an ``approve`` event asks Lua,
        and the user's answer comes back through ``decide``. ``id``: the id the caller already
        gave the run (Lua queues runs asked for while the host starts), else a new one.
        """
        received = time.monotonic()
        opts = options("run", spec, RUN_OPTIONS)
        cmd = check_cmd(opts.get("cmd"))
        sid = self._caller_id(opts.get("id"))
        if opts.get("wait_for") is not None:
            compile_pattern(opts.get("wait_for"))  # a bad pattern is refused before the gate runs
        approved = flag("approved", opts.get("approved"))
        unsandboxed_ok = flag("unsandboxed_ok", opts.get("unsandboxed_ok"))
        live = flag("live", opts.get("live"))
        how = choice(
            "answer", opts.get("answer") or "accept", ("accept", "always", "always_cached")
        )
        answer = self._gate(cmd, opts)
        kwargs: dict[str, Any] = {
            "cwd": opts.get("cwd"),
            "timeout": opts.get("timeout"),
            "bg_after": opts.get("bg_after"),
            "skip_sandbox": answer.skip_sandbox,
            "live": live,
            "sid": sid or answer.decision_id,
            "wait_for": opts.get("wait_for"),
            "marks": {"rpc": received, "gate": time.monotonic()},
        }
        consent = approved or unsandboxed_ok
        if answer.undoable and not consent:
            from run_bash.run_changes import CoverSpec

            kwargs["cover"] = CoverSpec.from_plain(answer.cover or {}, opts.get("cwd") or "")
        if answer.needs_approval and not consent:
            s = self.mgr.start(cmd, hold=True, **kwargs)
            self._held[s.id] = answer = replace(answer, cwd=s.cwd)
            self._open(s, held=answer)
            self.emit("approve", {"id": s.id, "cwd": s.cwd, "answer": answer.to_wire()})
            return s.info().to_wire()
        if not answer.sandboxed and answer.needs_approval and not unsandboxed_ok:
            raise UsageError(
                f"{cmd!r} would run WITHOUT a sandbox ({answer.reason}); pass "
                "`unsandboxed_ok = true` only when the user agreed to that"
            )
        decided_by = "user_always_cached" if answer.always else "auto"
        if consent:
            decided_by = ANSWERS[how]

        started: list[str] = []

        def opened(s: Session) -> None:
            """The run's journal entry, with its decision, before anything of it starts."""
            started.append(s.id)
            if "cover" in kwargs:
                # Its decision line waits: the snapshot before it starts may still make it ask.
                self._held_answers[s.id] = replace(answer, cwd=s.cwd)
                s.notices.append(
                    "ran without asking: every reason to pause is reversible and undo covers "
                    f"it (the user can take it back with :RunBashUndo {s.id})"
                )
                self._open(s, held=answer)
            else:
                # The journal holds the decision before anything of the run starts; its audit
                # line is written at once after the start (below), beside the command rather
                # than before it. A host that dies in between has it written from the journal.
                # (With the audit log off there is no line to write, now or by the keeper.)
                made = self._decision_record(answer, s.cwd, decided_by, session_id=s.id)
                self._open(s, made=made if self.audit.enabled else None)

        try:
            s = self.mgr.start(
                cmd, unsandboxed_ok=not answer.sandboxed, defer=True, opened=opened, **kwargs
            )
        finally:
            for sid in started:
                self._decided(sid)
        return s.info(ports=False).to_wire()  # it may have started this instant: see `_open`

    @staticmethod
    def _decision_record(
        answer: Answer,
        cwd: str,
        decided_by: str,
        *,
        session_id: str,
        user_reason: str | None = None,
    ) -> dict[str, Any]:
        return {
            "cmd": answer.cmd,
            "cwd": cwd,
            "backend": answer.backend,
            "sandboxed": answer.sandboxed,
            "pause": answer.pause,
            "rule": answer.rule,
            "reason": answer.reason,
            "decided_by": decided_by,
            "user_reason": user_reason,
            "source": answer.source,
            "session_id": session_id,
        }

    def _decision_line(
        self,
        answer: Answer,
        cwd: str,
        decided_by: str,
        *,
        session_id: str,
        user_reason: str | None = None,
    ) -> None:
        record = self._decision_record(
            answer, cwd, decided_by, session_id=session_id, user_reason=user_reason
        )
        self.audit.decision(record)

    def decide(self, sid: object, decision: object, reason: object = None) -> bool:
        """The user's answer about a held run, or about an answer ``check`` gave that was never run
        (the tool's reject or cancel): "accept" / "always" start the held run, "reject" / "cancel"
        drop it. Both get their audit lines. An answer for something no longer waiting is ignored
        (False)."""
        sid = text("id", sid)
        decision = choice("decision", decision, ("accept", "always", "reject", "cancel"))
        why = text("reason", reason)
        why = why.strip() if why and why.strip() else None
        held = self._held.get(sid) if sid else None
        s = self.mgr.sessions.get(sid) if sid else None
        if held is not None and s is not None and s.status == "awaiting_approval":
            del self._held[s.id]
            self._decision_line(held, s.cwd, ANSWERS[decision], session_id=s.id, user_reason=why)
            self.journal.decided(s.id)
            if decision in ("accept", "always"):
                if decision == "always":
                    self.gate.accept_always(held)
                return self.mgr.release(s.id)
            return self.mgr.refuse(s.id, decision, why)
        if sid is not None and sid in self.gate:
            if decision in ("accept", "always"):
                raise UsageError(
                    f"nothing is waiting under {sid!r}: start it with run (decision_id, approved)"
                )
            answer = self.gate.drop(sid)
            assert answer is not None
            self._unrun(answer, decision, why)
            return True
        return False

    def _unrun(self, answer: Answer, decision: str, why: str | None) -> None:
        """Audit lines for an answer the user refused before anything started."""
        cwd = answer.cwd or os.getcwd()
        self._decision_line(
            answer, cwd, ANSWERS[decision], session_id=answer.decision_id, user_reason=why
        )
        self._run_line(
            {
                "id": answer.decision_id,
                "cmd": answer.cmd,
                "cwd": cwd,
                "backend": answer.backend,
                "sandboxed": answer.sandboxed,
                "background": False,
                "status": "rejected" if decision == "reject" else "cancelled",
                "exit_code": None,
                "duration_s": 0.0,
                "output_bytes": 0,
            }
        )

    def kill(self, sid: object, token: object = None) -> dict[str, Any]:
        """Start killing a session; the outcome arrives as a ``reply`` event with ``token``."""
        session = self.mgr._get(sid)
        info = session.info().to_wire()
        if session.id in self._held:  # killing a run the user has not decided on cancels it
            self.decide(session.id, "cancel")
            self.loop.create_task(self._reply(token, self._already(session)))
            return info
        self.loop.create_task(self._reply(token, self.mgr.kill(session.id)))
        return info

    async def _already(self, s: Session) -> RunResult:
        return replace(s.result or self.mgr._result(s), already_ended=True)

    def kill_all(self, token: object = None) -> dict[str, Any]:
        """Start killing every running session (held ones are cancelled)."""
        for sid in list(self._held):
            self.decide(sid, "cancel")
        running = [s.id for s in self.mgr.sessions.values() if s.running]
        self.loop.create_task(self._reply(token, self.mgr.kill_all()))
        return {"count": len(running)}

    async def _reply(self, token: object, coro: Awaitable[object]) -> None:
        try:
            result = await coro
            payload: dict[str, Any] = {"token": token, "result": plain(result)}
        except RunBashError as err:
            payload = {"token": token, "error": str(err)}
        except Exception as err:  # reported, never raised into the loop
            log.exception("internal error")
            payload = {"token": token, "error": f"internal error: {err}"}
        self.emit("reply", payload)

    def sessions(self) -> list[dict[str, Any]]:
        return [info.to_wire() for info in self.mgr.list()]

    def output(self, sid: object, opts: object = None) -> dict[str, Any]:
        tail = options("output", opts, ("tail",)).get("tail")
        return self.mgr.output(sid, tail=tail).to_wire()

    def wait(self, sid: object, opts: object = None, token: object = None) -> dict[str, Any]:
        """Start waiting on a session (``{wait_for, timeout}``, see ``SessionManager.wait``); the
        outcome arrives as a ``reply`` event with ``token``. Bad arguments and an unknown id are
        an error at once."""
        o = options("wait", opts, WAIT_OPTIONS)
        waiting = self.mgr.wait(sid, o.get("wait_for"), o.get("timeout"))
        info = self.mgr._get(sid).info().to_wire()
        self.loop.create_task(self._reply(token, waiting))
        return info

    def watch(self, sid: object) -> dict[str, Any]:
        return self.mgr.watch(sid).to_wire()

    def pin(self, sid: object, reason: object) -> dict[str, Any]:
        """Keep a session in the history for ``reason`` (an open output buffer) until ``unpin``."""
        return self.mgr.pin(sid, reason).to_wire()

    def unpin(self, sid: object, reason: object) -> bool:
        return self.mgr.unpin(sid, reason)

    # -- change sets and undo --------------------------------------------------------------------------

    def _which(self, rid: object, opts: Mapping[str, Any]) -> tuple[str | None, str]:
        """The run id asked about (None: the latest run with changes in ``cwd``'s project)."""
        run_id = text("id", rid)
        if run_id is not None and not run_id.strip():
            raise UsageError("`id` is empty (leave it out for the latest run with changes)")
        s = self.mgr.sessions.get(run_id) if run_id is not None else None
        if s is not None and s.status in ("running", "awaiting_approval"):
            raise UsageError(
                f"run {run_id} has not ended yet: its change set is recorded when it ends"
            )
        return run_id, text("cwd", opts.get("cwd")) or os.getcwd()

    def changes(self, rid: object = None, opts: object = None, token: object = None) -> bool:
        """A run's change set, ``{run, project, label, summary, changes = {{path, kind, detail?,
        skipped?}}}``, in a ``reply`` event with ``token``."""
        run_id, cwd = self._which(rid, options("changes", opts, CHANGES_OPTIONS))
        self.loop.create_task(self._reply(token, self.recorder.changes(run_id, cwd)))
        return True

    def diff(self, rid: object = None, opts: object = None, token: object = None) -> bool:
        """A run's change set as a unified diff, ``{run, text}``, in a ``reply`` event."""
        run_id, cwd = self._which(rid, options("diff", opts, CHANGES_OPTIONS))
        self.loop.create_task(self._reply(token, self.recorder.diff(run_id, cwd)))
        return True

    def plan(self, rid: object = None, opts: object = None, token: object = None) -> bool:
        """What undoing a run would do now, ``{run, restore, remove, conflicts,
        not_recovered}``, in a ``reply`` event."""
        o = options("plan", opts, UNDO_OPTIONS)
        run_id, cwd = self._which(rid, o)
        force = flag("force", o.get("force"))
        self.loop.create_task(self._reply(token, self.recorder.plan(run_id, cwd, force)))
        return True

    def undo(self, rid: object = None, opts: object = None, token: object = None) -> bool:
        """Undo a run (``force``: conflicts too). The undo is a run of its own, with an id and a
        change set; the outcome, ``{run, undo_of, restored, removed, conflicts, not_recovered,
        errors, recorded}``, comes in a ``reply`` event and goes to the audit log."""
        o = options("undo", opts, UNDO_OPTIONS)
        run_id, cwd = self._which(rid, o)
        force = flag("force", o.get("force"))
        new = self._new_id()
        self._undo_ids.add(new)
        self.loop.create_task(self._reply(token, self._undo(run_id, cwd, force, new)))
        return True

    async def _undo(self, run_id: str | None, cwd: str, force: bool, new: str) -> dict[str, Any]:
        done = await self.recorder.undo(run_id, cwd, force, new)
        self.audit.undo(done)
        return done

    def undo_runs(self, token: object = None) -> bool:
        """Every kept change set, newest first, in a ``reply`` event."""
        self.loop.create_task(self._reply(token, self.recorder.runs()))
        return True

    def undo_usage(self, token: object = None) -> bool:
        """The store's path and size (for health), in a ``reply`` event."""
        self.loop.create_task(self._reply(token, self.recorder.usage()))
        return True

    # -- health and policy ------------------------------------------------------------------------------

    def health(self) -> list[dict[str, str]]:
        from run_bash.health import report

        return report(self.config, self.mgr)

    def rule_defaults(self) -> dict[str, list[str]]:
        """The built-in ``sandbox.rules`` lists, for ``function(defaults)`` rules evaluated in Lua."""
        from run_bash.sandbox.policy import default_rules

        return default_rules()

    def shutdown(self) -> bool:
        """Kill everything at once (VimLeavePre); the host exits soon after. Runs nobody decided
        on are cancelled and running ones killed, each with its audit lines."""
        if self._mgr is None:
            return True
        for sid, held in list(self._held.items()):
            s = self._mgr.sessions.get(sid)
            del self._held[sid]
            if s is not None and s.status == "awaiting_approval":
                self._decision_line(held, s.cwd, "host_exit", session_id=sid)
                self.journal.decided(sid)
                self._mgr.refuse(sid, "cancel")
        running = [s for s in self._mgr.sessions.values() if s.running]
        self._mgr.close_now()
        # Every command is dead now: nothing a sandbox controls is left to wait for, and the run
        # lines below carry the change sets (the wait is bounded).
        started = [s for s in running if s.launched is not None]
        self.recorder.finish_now(started, never_started=[s for s in running if s.launched is None])
        self.recorder.close()
        for s in running:
            run = {**s.info().to_wire(), "status": "killed", "killed": True}
            self._run_line(run)
        return True


def parse_codecompanion(raw: object) -> tuple[tuple[RulesName, ...], tuple[str, ...]]:
    """What CodeCompanion reads from a project, as Lua sends it: ``{rules = {{path = string,
    parser = string|nil}, ...}, project_config = {string, ...}}`` (nil: CodeCompanion is not
    loaded). Anything else is a UsageError."""
    if raw is None:
        return (), ()
    if not isinstance(raw, Mapping) or set(raw) - {"rules", "project_config"}:
        raise UsageError(f"codecompanion files should be {{rules, project_config}}, not {raw!r}")
    rules_raw = raw.get("rules") or []
    names_raw = raw.get("project_config") or []
    if not isinstance(rules_raw, list) or not isinstance(names_raw, list):
        raise UsageError("codecompanion files: rules and project_config should be lists")
    rules = []
    for i, item in enumerate(rules_raw, 1):
        if not isinstance(item, Mapping) or not isinstance(item.get("path"), str):
            raise UsageError(f"codecompanion rules entry {i} should be {{path = string}}: {item!r}")
        parser = item.get("parser")
        if parser is not None and not isinstance(parser, str):
            raise UsageError(
                f"codecompanion rules entry {i}: parser should be a string: {parser!r}"
            )
        if item["path"].strip():
            rules.append(RulesName(item["path"], parser))
    names = []
    for i, name in enumerate(names_raw, 1):
        if not isinstance(name, str):
            raise UsageError(f"codecompanion project_config entry {i} should be a string: {name!r}")
        if name.strip():
            names.append(name)
    return tuple(rules), tuple(names)
