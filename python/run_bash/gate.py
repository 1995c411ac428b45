"""The approval gate: the one place that decides whether a command needs the user.

``decide`` takes the pause list's verdict, where the command would run, the caller's flags and the
results of the user's Lua-function rules, and answers ``{needs_approval, reason, rule,
decision_id}`` (``Answer``). ``check``, ``run``, ``:RunBash`` and the CodeCompanion tool all read
that answer; nothing else decides. ``Gate`` keeps the answers it gave, so a run is started on exactly
the answer the user was shown (its ``decision_id``), and the commands the user accepted "always" in
the approval window for the rest of the session.

The rules, in order: a command the user accepted "always" (same command, same sandbox mode) runs; a
pause-list hit, a Lua rule that says so or fails, Lua rules not evaluated yet, running without a
sandbox, or a caller that asks (``ask``) need the user; anything else runs at once.

Effects, not text: each pause-list reason has an effect class (``reversible``: undo takes it
back; ``irreversible``: everything else, every user rule included). Under a confining backend, a
command whose every reason is reversible runs without asking when the change store says undo
covers what those reasons name (``Undo``: every target inside the recorded project and outside
what undo does not keep); its answer carries ``undoable`` and what was checked (``cover``), which
is checked again on the snapshot taken just before the run starts. ``pauselist.ask_reversible``
(``ask_reversible``) brings the question back.

Pure: no Neovim, no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from run_bash.errors import UsageError
from run_bash.results import Wire

MAX_ANSWERS = 512
MAX_RULE_ERROR_CHARS = 200
NO_MATCH = "no pause-list rule matched"

# Who decided, as the audit log's `decided_by` says.
DECIDED_BY = {
    "auto": "no approval needed",
    "auto_undoable": "no approval needed: every reason is reversible and undo covers it",
    "user_accept": "the user accepted",
    "user_always": "the user accepted, for the rest of the session",
    "user_always_cached": "accepted earlier for the rest of the session",
    "user_reject": "the user rejected",
    "user_cancel": "the user cancelled",
    "host_exit": "the host stopped before anyone decided",
}
# The user's answers to an approval request, and how the audit log names them.
ANSWERS = {
    "accept": "user_accept",
    "always": "user_always",
    "always_cached": "user_always_cached",
    "reject": "user_reject",
    "cancel": "user_cancel",
}


@dataclass(frozen=True)
class Where:
    """Where a command would run: the backend, whether it confines, and why it is not the
    configured one ("" when it is)."""

    backend: str
    sandboxed: bool
    unavailable: str = ""
    # How the backend was chosen ("auto: sandlock works here (…)").
    chosen_because: str = ""


@dataclass(frozen=True)
class Undo:
    """What the change store says about a command whose every pause reason is reversible:
    ``covered``, else ``why`` not; ``spec`` is what was checked (plain data, checked again
    before the run starts)."""

    covered: bool
    why: str = ""
    spec: dict[str, Any] = field(default_factory=dict)


REVERSIBLE = "reversible"
IRREVERSIBLE = "irreversible"


@dataclass(frozen=True)
class LuaResult:
    """What a Lua-function rule said about one command: pause, or the error it raised."""

    pause: bool
    error: str | None = None


@dataclass(frozen=True)
class Answer(Wire):
    """The gate's answer for one command (sent to Lua as is)."""

    decision_id: str
    needs_approval: bool
    # Why it asks (the pause list's reason, or why there is no sandbox); why not, when it does not.
    reason: str
    rule: str | None
    cmd: str
    backend: str
    sandboxed: bool
    unavailable: str
    skip_sandbox: bool
    ask: bool
    # The pause list (with the Lua rules' results) flagged the command.
    pause: bool
    # The sub-command that made it pause.
    command: str | None
    # (rule name, argv) pairs the user's Lua-function rules must judge; pending until they have.
    lua_calls: list[list[Any]] = field(default_factory=list)
    lua_pending: bool = False
    # Accepted "always" earlier in this session: no prompt.
    always: bool = False
    # Who asks for it: "user" (:RunBash, the Lua API) or "agent" (the CodeCompanion tool).
    source: str = "user"
    # Where it would run (the caller's working directory).
    cwd: str = ""
    # How the backend was chosen ("auto: sandlock works here (…)").
    chosen_because: str = ""
    # The pause list's effect class of the command ("reversible" only when every reason is;
    # None: nothing paused), and every reason with its class and targets.
    effect: str | None = None
    hits: list[dict[str, Any]] = field(default_factory=list)
    # Every reason is reversible and undo covers it: it runs without asking.
    undoable: bool = False
    # Every reason is reversible but it asks: why (undo does not cover it, or ask_reversible).
    undo_why: str = ""
    # What undo was asked to cover (checked again before the run starts).
    cover: dict[str, Any] | None = None
    # Every simple command the pause list saw (argv), for what undo must cover.
    commands: list[list[str]] = field(default_factory=list)


def lua_results(value: object, calls: Sequence[Sequence[Any]]) -> list[LuaResult] | None:
    """Check ``lua_results`` from Lua: one ``{pause = bool}`` or ``{error = string}`` per call."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise UsageError(f"lua_results should be a list, not {type(value).__name__}")
    if len(value) != len(calls):
        raise UsageError(
            f"lua_results has {len(value)} entries for {len(calls)} Lua rule call(s); "
            "evaluate the lua_calls of this command's answer"
        )
    out = []
    for i, item in enumerate(value, 1):
        if not isinstance(item, Mapping):
            raise UsageError(f"lua_results[{i}] should be a table, not {type(item).__name__}")
        pause, error = item.get("pause"), item.get("error")
        if error is not None and not isinstance(error, str):
            raise UsageError(f"lua_results[{i}].error should be a string")
        if error is None and not isinstance(pause, bool):
            raise UsageError(f"lua_results[{i}].pause should be true or false, not {pause!r}")
        out.append(LuaResult(bool(pause) if error is None else True, error))
    return out


def quote_command(text: str) -> str:
    """``text`` on one line between backquotes, cut at 160 characters, as reasons show it."""
    text = " ".join(text.split())
    return f"`{text[:159]}…`" if len(text) > 160 else f"`{text}`"


def decide(
    decision_id: str,
    cmd: str,
    verdict: Mapping[str, Any],
    where: Where,
    *,
    skip_sandbox: bool = False,
    ask: bool = False,
    results: Sequence[LuaResult] | None = None,
    always: bool = False,
    source: str = "user",
    undo: Undo | None = None,
    ask_reversible: bool = False,
) -> Answer:
    """The gate's answer. ``verdict`` is the pause list's (``Verdict.to_dict()``); ``undo`` what
    the change store says about its reversible reasons (None: not asked)."""
    pause = bool(verdict.get("pause"))
    reason = str(verdict.get("reason") or NO_MATCH)
    rule = verdict.get("rule")
    command = verdict.get("command")
    calls = [[name, list(argv)] for name, argv in verdict.get("lua_calls") or []]
    pending = bool(calls) and results is None and not pause
    hits = [dict(h) for h in verdict.get("hits") or [] if isinstance(h, Mapping)]
    effect = verdict.get("effect") if pause else None
    if not pause and results:
        for (name, argv), res in zip(calls, results, strict=True):
            if not res.pause:
                continue
            pause, rule, command = True, name, " ".join(argv)
            if res.error is not None:
                err = res.error[:MAX_RULE_ERROR_CHARS]
                reason = f"your pause-list rule for {name} failed ({err}): pausing to be safe"
            else:
                reason = f"{quote_command(command)} matches your pause-list rule for {name}"
            break
    if pause and rule is not None and not any(h.get("rule") == rule for h in hits):
        # A reason the pause list's verdict does not list (a Lua rule): the user's own rules ask.
        hits.append(
            {
                "reason": reason,
                "rule": rule,
                "command": command,
                "effect": IRREVERSIBLE,
                "targets": None,
            }
        )
        effect = IRREVERSIBLE
    reversible = (
        pause
        and effect == REVERSIBLE
        and bool(hits)
        and all(h.get("effect") == REVERSIBLE for h in hits)
    )
    undoable = False
    undo_why = ""
    if reversible:
        if ask_reversible:
            undo_why = "pauselist.ask_reversible asks about what undo can take back too"
        elif not where.sandboxed:
            undo_why = "undo takes back what a sandboxed run does; this one has no sandbox"
        elif undo is None:
            undo_why = "undo was not asked"
        elif not undo.covered:
            undo_why = f"undo cannot take it all back: {undo.why}"
        else:
            undoable = not pending and not ask
    if not pause and pending:
        reason = "your Lua pause-list rules were not evaluated: asking to be safe"
    elif not pause and not where.sandboxed:
        if skip_sandbox:
            reason = "it runs without the sandbox, as asked (skip_sandbox)"
        elif where.unavailable:
            reason = f"it runs without a sandbox: {where.unavailable}"
        else:
            reason = 'it runs without a sandbox: `sandbox.backend` is "none"'
    elif not pause and ask:
        reason = "the caller asks to confirm it"
    needs = (pause and not undoable) or pending or not where.sandboxed or ask
    return Answer(
        decision_id=decision_id,
        needs_approval=needs and not always,
        reason=reason,
        rule=rule if isinstance(rule, str) else None,
        cmd=cmd,
        backend=where.backend,
        sandboxed=where.sandboxed,
        unavailable=where.unavailable,
        chosen_because=where.chosen_because,
        skip_sandbox=skip_sandbox,
        ask=ask,
        pause=pause,
        command=command if isinstance(command, str) else None,
        lua_calls=calls,
        lua_pending=pending,
        always=always and needs,
        source=source,
        effect=effect if pause else None,
        hits=hits,
        undoable=undoable,
        undo_why=undo_why,
        cover=dict(undo.spec) if undoable and undo is not None else None,
        commands=[list(a) for a in verdict.get("commands") or [] if isinstance(a, (list, tuple))],
    )


class Gate:
    """The answers given (by decision id, the most recent ``MAX_ANSWERS``) and the "always"
    acceptances of this session."""

    def __init__(self) -> None:
        self._answers: OrderedDict[str, Answer] = OrderedDict()
        self._always: set[tuple[str, str, bool]] = set()

    def is_always(self, source: str, cmd: str, sandboxed: bool) -> bool:
        return (source, cmd, sandboxed) in self._always

    def accept_always(self, answer: Answer) -> None:
        """Remember that the user accepted this command, in this sandbox mode, for the session."""
        self._always.add((answer.source, answer.cmd, answer.sandboxed))

    def keep(self, answer: Answer) -> Answer:
        self._answers[answer.decision_id] = answer
        self._answers.move_to_end(answer.decision_id)
        while len(self._answers) > MAX_ANSWERS:
            self._answers.popitem(last=False)
        return answer

    def __contains__(self, decision_id: object) -> bool:
        return decision_id in self._answers

    def ids(self) -> list[str]:
        return list(self._answers)

    def take(self, decision_id: object, cmd: str, skip_sandbox: bool) -> Answer:
        """The kept answer ``decision_id`` for this command (it is used once)."""
        if not isinstance(decision_id, str):
            raise UsageError(f"`decision_id` should be a string, not {type(decision_id).__name__}")
        answer = self._answers.get(decision_id)
        if answer is None:
            raise UsageError(
                f"decision_id {decision_id!r} is unknown or was used already; check the command again"
            )
        if answer.cmd != cmd or answer.skip_sandbox != skip_sandbox:
            raise UsageError(f"decision_id {decision_id!r} was given for another command")
        del self._answers[decision_id]
        return answer

    def drop(self, decision_id: str) -> Answer | None:
        return self._answers.pop(decision_id, None)

    def with_results(
        self,
        answer: Answer,
        results: Sequence[LuaResult],
        undo: Undo | None = None,
        ask_reversible: bool = False,
    ) -> Answer:
        """``answer`` again, with the Lua rules' results folded in."""
        verdict = {
            "pause": answer.pause,
            "reason": answer.reason if answer.pause else NO_MATCH,
            "rule": answer.rule,
            "command": answer.command,
            "lua_calls": answer.lua_calls,
            "effect": answer.effect,
            "hits": answer.hits,
            "commands": answer.commands,
        }
        where = Where(answer.backend, answer.sandboxed, answer.unavailable, answer.chosen_because)
        new = decide(
            answer.decision_id,
            answer.cmd,
            verdict,
            where,
            skip_sandbox=answer.skip_sandbox,
            ask=answer.ask,
            results=results,
            always=self.is_always(answer.source, answer.cmd, answer.sandboxed),
            source=answer.source,
            undo=undo,
            ask_reversible=ask_reversible,
        )
        return replace(new, lua_calls=answer.lua_calls, cwd=answer.cwd)
