"""Pause-list checker: decides which commands need a human's approval. Pure: no Neovim, no I/O.

Public API (used by the host, the CLI and the Lua shim through the host):
    check(cmd: str, rules: Mapping | None = None, *, strict: bool = False) -> Verdict
    Verdict(pause, reason, rule, command, commands, lua_rules, lua_calls, internal_error, hits,
    effect), Verdict.to_dict()
    Hit(reason, effect, targets, unknown, rule, command)
    parse_commands(cmd: str) -> list[list[str]]
    validate_rules(rules) -> list[str]; ask_reversible(rules) -> bool
``commands`` lists every simple command the checker saw (argv after unwrapping; wrappers come
before the command they wrap, ``argv[0]`` is the command's basename), so Lua-function rules can be
evaluated in Lua. ``lua_rules`` names the Lua-function rules whose command appeared; ``lua_calls``
are the exact ``(rule name, argv)`` pairs they must be called on (the rule gets ``argv[1:]``): the
same matching as every other rule, so Lua never matches names itself.

Each reason to pause has an effect class: ``reversible`` when the effect stays inside the files it
names (``targets``) and a byte-exact undo of those files takes it back, ``irreversible`` for
everything else (history, remote effects, signals, system changes, whatever is only known at run
time, every user rule). ``Verdict.effect`` is ``reversible`` only when every reason is.

The checker fails closed: when the command that runs (or, for a command with a rule, the words
its rule depends on) cannot be determined statically, the verdict pauses and says why. Input bash
would reject pauses as "could not be parsed". A bug in the checker itself also pauses, saying so
plainly; ``Verdict.internal_error`` then holds the exception for logs and tests, and
``strict=True`` lets it propagate instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from run_bash.checker import checks, gitdata
from run_bash.checker.analysis import Analysis, Found
from run_bash.checker.model import IRREVERSIBLE, REVERSIBLE, Effect, Hit, Unknown, in_dir
from run_bash.checker.rules import (
    DEFAULT_RULES,
    LUA_FUNCTION,
    TableRule,
    ask_reversible,
    effective_rules,
    validate_rules,
)
from run_bash.checker.table import lookup_names

__all__ = [
    "DEFAULT_RULES",
    "LUA_FUNCTION",
    "Hit",
    "Verdict",
    "ask_reversible",
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
            branch's history"; the most important reason (an irreversible one when there is one).
        rule: the pause-list rule (command name) of ``reason``; None when nothing matched or the
            checker paused because it could not tell what runs.
        command: the exact sub-command text of ``reason``.
        commands: every simple command seen, as argv after unwrapping wrappers.
        lua_rules: names of Lua-function rules whose command name appeared.
        lua_calls: (rule name, argv) for every command a Lua-function rule must judge.
        internal_error: when the checker itself failed (and so paused), the exception as
            "Type: message"; None otherwise.
        hits: every reason to pause found in the line, each with its rule, command, effect and
            targets.
        effect: "reversible" when it pauses and every hit is reversible, "irreversible" when one
            is not, None when it does not pause.
        programs: each command of ``commands`` as the line names it (``./rm``, ``/usr/bin/rm``,
            ``rm``): the table judges the name, but a program given by its path, or found after
            the line changed ``PATH``, may be any file.
        path_changed: the line sets ``PATH`` or what the dynamic loader reads (``LD_PRELOAD``,
            ``LD_LIBRARY_PATH``, ``LD_AUDIT``): a command may then run or load any file.
        writes: the paths the line's known writers change (``rm``, ``mv``, ``cp``'s
            destination, ``>``, …) as far as they can be told, relative to where it starts: the
            gate asks the project's state whether one leads into a ``.git`` (a symlink).
        env_changed: the line sets a variable (an assignment, also one before a command or
            through ``env NAME=…``, ``for``, ``read``, ``printf -v``, …): a command it starts may
            read another environment than the one the line started with.
    """

    pause: bool
    reason: str
    rule: str | None = None
    command: str | None = None
    commands: list[list[str]] = field(default_factory=list)
    lua_rules: list[str] = field(default_factory=list)
    lua_calls: list[tuple[str, list[str]]] = field(default_factory=list)
    internal_error: str | None = None
    hits: list[Hit] = field(default_factory=list)
    effect: Effect | None = None
    programs: list[str] = field(default_factory=list)
    path_changed: bool = False
    writes: list[str] = field(default_factory=list)
    env_changed: bool = False

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
            "effect": self.effect,
            "hits": [hit.to_dict() for hit in self.hits],
            "programs": list(self.programs),
            "path_changed": self.path_changed,
            "writes": list(self.writes),
            "env_changed": self.env_changed,
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
        return _paused(Hit("the command is not a string"))
    if not cmd.strip():
        return Verdict(False, NO_MATCH)
    try:
        return _verdict(cmd, effective_rules(rules))
    except Exception as err:  # fail closed on any checker bug (RecursionError included)
        if strict:
            raise
        hit = Hit(f"{_quote(cmd)} {INTERNAL_ERROR}", unknown=True, command=cmd)
        return replace(_paused(hit), internal_error=f"{type(err).__name__}: {err}")


def _paused(hit: Hit) -> Verdict:
    return Verdict(True, hit.reason, hit.rule, hit.command, hits=[hit], effect=IRREVERSIBLE)


def _finish(hit: Hit, key: str | None, found: Found, user: bool) -> Hit:
    """A rule's hit as a reason of the verdict: the whole sentence, its rule, command and class."""
    effect, targets = hit.effect, hit.targets
    if user:
        effect = IRREVERSIBLE  # the user's own rules ask, whatever they match
    if found.elsewhere or effect == IRREVERSIBLE:
        effect, targets = IRREVERSIBLE, None if found.elsewhere else targets
    elif targets is not None:
        resolved = [in_dir(found.cwd, t) for t in targets]
        if found.home and any(t is not None and t.startswith("~") for t in resolved):
            resolved.append(None)  # `~` is what the line set HOME to, not the user's home
        targets = None if any(t is None for t in resolved) else tuple(t for t in resolved if t)
    reason = f"{_quote(found.text)} {hit.reason}"
    overwrites = hit.overwrites
    if overwrites is not None:
        where = None if found.elsewhere else in_dir(found.cwd, overwrites[0])
        overwrites = (where, *overwrites[1:]) if where is not None else None
    prunes = hit.prunes
    if prunes is not None:
        where = None if found.elsewhere else in_dir(found.cwd, prunes[0])
        prunes = (where, *prunes[1:]) if where is not None else None
    return Hit(
        reason,
        effect,
        targets,
        hit.unknown,
        key,
        found.text,
        hit.follows,
        hit.sources,
        hit.index,
        overwrites,
        prunes,
    )


def _rank(hit: Hit) -> int:
    """The order reasons are preferred in: definite irreversible, unknown, reversible."""
    if hit.effect == REVERSIBLE:
        return 3
    return 1 if hit.unknown else 0


def _verdict(cmd: str, table: Mapping[str, Any]) -> Verdict:
    ana = _analyse(cmd)
    commands: list[list[str]] = []
    programs: list[str] = []
    lua_rules: list[str] = []
    lua_calls: list[tuple[str, list[str]]] = []
    hits: list[Hit] = []
    writes: list[str] = []
    syntax: Hit | None = None
    for ev in ana.events:
        if isinstance(ev, Unknown):
            hit = Hit(f"{_quote(ev.text)} {ev.reason}", unknown=True, command=ev.text)
            hits.append(hit)
            if ev.syntax and syntax is None:
                syntax = hit  # a parse failure is the reason to give, whatever else is unknown
            continue
        argv = [ev.name, *(a.show() for a in ev.argv[1:])]
        commands.append(argv)
        writes += gitdata.written_paths(ev.name, ev.argv, ev.cwd)
        programs.append(ev.argv[0].text if ev.argv else ev.name)
        into_git = gitdata.command_hit(ev.name, ev.argv, ev.cwd)
        if into_git is not None:
            hits.append(
                replace(into_git, reason=f"{_quote(ev.text)} {into_git.reason}", command=ev.text)
            )
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
        if rule is True:
            found = [Hit(f"runs `{key}`, which is on the pause list")]
        elif isinstance(rule, TableRule):
            found = rule.hits(ev.reading, ev.argv[1:])
        else:
            one = rule(ev.argv[1:])
            found = [one] if one is not None else []
        user = not isinstance(rule, TableRule)
        hits.extend(_finish(h, key, ev, user) for h in found)
    dirs = {".", *(d for d in ana.cd_targets() if d is not None)}
    writes += [p for w in ana.written for d in sorted(dirs) if (p := in_dir(d, w))]
    writes = list(dict.fromkeys(writes))
    device = next((p for w in [*ana.devices, *writes] if (p := checks.kernel_path(w))), None)
    if device is not None:
        # `dd of=` and `sysctl -w` by any other writer: `> /dev/sda`, `tee /proc/sys/…`, `cp`.
        reason = f"writes to a device or a kernel setting (`{device}`)"
        hits.append(Hit(f"{_quote(cmd)} {reason}", command=cmd))
    into_git = gitdata.written_hit(ana.written, ana.cd_targets())
    if into_git is not None:
        hits.append(replace(into_git, reason=f"{_quote(cmd)} {into_git.reason}", command=cmd))
    if hits:
        unique = list({(h.reason, h.rule): h for h in hits}.values())
        first = min(unique, key=_rank)
        if first.unknown and syntax is not None:
            first = syntax
        effect: Effect = REVERSIBLE if all(h.effect == REVERSIBLE for h in unique) else IRREVERSIBLE
        return Verdict(
            True,
            first.reason,
            first.rule,
            first.command,
            commands,
            lua_rules,
            lua_calls,
            hits=unique,
            effect=effect,
            programs=programs,
            path_changed=ana.path_changed,
            writes=writes,
            env_changed=bool(ana.variables),
        )
    reason = NO_MATCH
    if lua_rules:
        reason += "; Lua rules to evaluate: " + ", ".join(lua_rules)
    return Verdict(
        False,
        reason,
        None,
        None,
        commands,
        lua_rules,
        lua_calls,
        programs=programs,
        path_changed=ana.path_changed,
        writes=writes,
        env_changed=bool(ana.variables),
    )


def parse_commands(cmd: str) -> list[list[str]]:
    """Every simple command ``cmd`` runs, as argv after unwrapping wrappers (see :func:`check`)."""
    try:
        ana = _analyse(cmd)
    except Exception:  # a partial list is all a failed analysis can give
        return []
    return [
        [ev.name, *(a.show() for a in ev.argv[1:])] for ev in ana.events if isinstance(ev, Found)
    ]
