"""Pause-list checker: decides which commands need a human's approval. Pure: no pynvim, no I/O.

Public API (used by the host, the CLI and the Lua shim through the host):
    check(cmd: str, rules: Mapping | None = None, *, strict: bool = False) -> Verdict
    Verdict(pause, reason, rule, command, commands, lua_rules, lua_calls, internal_error),
    Verdict.to_dict()
    parse_commands(cmd: str) -> list[list[str]]
``commands`` lists every simple command the checker saw (argv after unwrapping; wrappers come
before the command they wrap, ``argv[0]`` is the command's basename), so Lua-function rules can be
evaluated in Lua. ``lua_rules`` names the Lua-function rules whose command appeared; ``lua_calls``
are the exact ``(rule name, argv)`` pairs they must be called on (the rule gets ``argv[1:]``): the
same matching as every other rule, so Lua never matches names itself.

The checker fails closed: when the command that runs (or, for a command with a rule, the words
its rule depends on) cannot be determined statically, the verdict pauses and says why. Input bash
would reject pauses as "could not be parsed". A bug in the checker itself also pauses, saying so
plainly; ``Verdict.internal_error`` then holds the exception for logs and tests, and
``strict=True`` lets it propagate instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from run_bash.checker.rules import (
    DEFAULT_RULES,
    LUA_FUNCTION,
    Hit,
    effective_rules,
    lookup_names,
    validate_rules,
)
from run_bash.checker.unwrap import Analysis, Found, Unknown

__all__ = [
    "DEFAULT_RULES",
    "LUA_FUNCTION",
    "Verdict",
    "check",
    "parse_commands",
    "validate_rules",
]

MAX_REASON_COMMAND = 160
NO_MATCH = "no pause-list rule matched"


@dataclass(frozen=True)
class Verdict:
    """The pause-list decision for one command line.

    Attributes:
        pause: True when a human should approve the command first.
        reason: why, naming the sub-command, e.g. "`git push --force` rewrites the remote
            branch's history".
        rule: the pause-list rule (command name) that matched; None when nothing matched or the
            checker paused because it could not tell what runs.
        command: the exact sub-command text that made it pause.
        commands: every simple command seen, as argv after unwrapping wrappers.
        lua_rules: names of Lua-function rules whose command name appeared.
        lua_calls: (rule name, argv) for every command a Lua-function rule must judge.
        internal_error: when the checker itself failed (and so paused), the exception as
            "Type: message"; None otherwise.
    """

    pause: bool
    reason: str
    rule: str | None = None
    command: str | None = None
    commands: list[list[str]] = field(default_factory=list)
    lua_rules: list[str] = field(default_factory=list)
    lua_calls: list[tuple[str, list[str]]] = field(default_factory=list)
    internal_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain dict, safe for JSON and msgpack."""
        return {
            "pause": self.pause,
            "reason": self.reason,
            "rule": self.rule,
            "command": self.command,
            "commands": [list(argv) for argv in self.commands],
            "lua_rules": list(self.lua_rules),
            "internal_error": self.internal_error,
        }


def _quote(text: str) -> str:
    text = " ".join(text.split()) if "\n" in text else text.strip()
    if len(text) > MAX_REASON_COMMAND:
        text = text[: MAX_REASON_COMMAND - 1] + "…"
    return f"`{text}`"


INTERNAL_ERROR = (
    "could not be analysed because of an error in the pause-list checker itself; "
    "approve it only if you trust it"
)


def _analyse(cmd: str) -> Analysis:
    ana = Analysis()
    ana.run(cmd)
    return ana


def check(cmd: object, rules: Mapping[str, Any] | None = None, *, strict: bool = False) -> Verdict:
    """Decide whether ``cmd`` should pause for approval.

    Args:
        cmd: the bash command line (any script).
        rules: the user's ``pauselist`` table; it is merged over the default rules (``false``
            turns a default off, ``"<lua-function>"`` defers that name to Lua).
        strict: let an exception inside the checker propagate instead of pausing (tests).
    """
    if not isinstance(cmd, str):
        return Verdict(True, "the command is not a string")
    if not cmd.strip():
        return Verdict(False, NO_MATCH)
    try:
        return _verdict(cmd, effective_rules(rules))
    except Exception as err:  # fail closed on any checker bug (RecursionError included)
        if strict:
            raise
        return Verdict(
            True,
            f"{_quote(cmd)} {INTERNAL_ERROR}",
            None,
            cmd,
            internal_error=f"{type(err).__name__}: {err}",
        )


def _verdict(cmd: str, table: Mapping[str, Any]) -> Verdict:
    ana = _analyse(cmd)
    commands: list[list[str]] = []
    lua_rules: list[str] = []
    lua_calls: list[tuple[str, list[str]]] = []
    hit: tuple[Hit, str | None, str] | None = None
    unknown: tuple[str, str | None, str] | None = None
    syntax = False
    for ev in ana.events:
        if isinstance(ev, Unknown):
            # A parse failure is the reason to give, whatever else is unknown.
            if unknown is None or (ev.syntax and not syntax):
                unknown = (f"{_quote(ev.text)} {ev.reason}", None, ev.text)
                syntax = ev.syntax
            continue
        assert isinstance(ev, Found)
        argv = [ev.name, *(a.show() for a in ev.argv[1:])]
        commands.append(argv)
        if hit is not None:
            continue
        key = next((k for k in lookup_names(ev.name) if k in table), None)
        if key is None:
            continue
        rule = table[key]
        if rule is False:
            continue
        if rule == LUA_FUNCTION:
            if key not in lua_rules:
                lua_rules.append(key)
            lua_calls.append((key, argv))
            continue
        found = (
            Hit(f"runs `{key}`, which is on the pause list") if rule is True else rule(ev.argv[1:])
        )
        if found is None:
            continue
        if found.unknown:
            if unknown is None:
                unknown = (f"{_quote(ev.text)} {found.reason}", key, ev.text)
                syntax = False
        else:
            hit = (found, key, ev.text)
    if hit is not None:
        found, key, text = hit
        reason = f"{_quote(text)} {found.reason}"
        return Verdict(True, reason, key, text, commands, lua_rules, lua_calls)
    if unknown is not None:
        reason, key, text = unknown
        return Verdict(True, reason, key, text, commands, lua_rules, lua_calls)
    reason = NO_MATCH
    if lua_rules:
        reason += "; Lua rules to evaluate: " + ", ".join(lua_rules)
    return Verdict(False, reason, None, None, commands, lua_rules, lua_calls)


def parse_commands(cmd: str) -> list[list[str]]:
    """Every simple command ``cmd`` runs, as argv after unwrapping wrappers (see :func:`check`)."""
    try:
        ana = _analyse(cmd)
    except Exception:  # a partial list is all a failed analysis can give
        return []
    return [
        [ev.name, *(a.show() for a in ev.argv[1:])] for ev in ana.events if isinstance(ev, Found)
    ]
