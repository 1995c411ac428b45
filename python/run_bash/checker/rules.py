"""Pause-list rules: the defaults (from the command table), user rules and their validation. Pure.

A rule receives the arguments of one command (after its name) and returns a :class:`Hit` when the
command should pause. ``Hit.unknown`` marks a fail-closed hit: the words that decide are only known
at run time.

User rule values (the ``pauselist`` option), by command name:

* ``true``: always pause that command; ``false``: never (turns a default rule off);
* ``"<lua-function>"``: a Lua function rule, evaluated by the Lua shim on the parsed commands;
* a table ``{ subcommands = …, flags = …, args = …, reason = … }``: see :func:`declarative`.

``ask_reversible`` is not a command: it is the boolean that brings back questions for pauses
whose every reason undo can take back (:func:`ask_reversible`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from run_bash.checker.model import Hit
from run_bash.checker.options import NO_OPTS, read
from run_bash.checker.reading import Reading, Row, judge, read_row
from run_bash.checker.table import TABLE, lookup_names, row_for
from run_bash.checker.words import Arg, normalize_path

LUA_FUNCTION = "<lua-function>"
RULE_KEYS = ("subcommands", "flags", "args", "reason")
ASK_REVERSIBLE = "ask_reversible"
__all__ = ["DEFAULT_RULES", "LUA_FUNCTION", "ask_reversible", "lookup_names", "validate_rules"]

Rule = Callable[[Sequence[Arg]], "Hit | None"]


class TableRule:
    """A default rule: the pause rules of a command's row in the table."""

    def __init__(self, name: str, row: Row) -> None:
        self.name = name
        self.row = row
        self.__doc__ = f"The default pause rules of `{name}`."

    def hits(self, reading: Reading | None, args: Sequence[Arg] = ()) -> list[Hit]:
        """Every reason to pause the command's reading gives (read here when not given)."""
        return judge(reading if reading is not None else read_row(self.name, self.row, args))

    def __call__(self, args: Sequence[Arg]) -> Hit | None:
        found = self.hits(None, args)
        return found[0] if found else None


DEFAULT_RULES: dict[str, TableRule] = {
    name: TableRule(name, row) for name, row in TABLE.items() if row.pausing()
}


def ask_reversible(rules: Mapping[str, Any] | None) -> bool:
    """``pauselist.ask_reversible``: ask also when every reason to pause is reversible.

    Default false: a pause that undo can take back need not ask (the gate decides when undo
    covers it).
    """
    return bool((rules or {}).get(ASK_REVERSIBLE, False) is True)


# -- declarative user rules -----------------------------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        return list(value.values())
    return [value]


def _subcommand_table(value: Any) -> dict[str, Any]:
    """Normalize ``subcommands``: a list of names or a table name -> true | false | rule table."""
    if isinstance(value, list):
        return dict.fromkeys(value, True)
    out: dict[str, Any] = {}
    for key, sub in value.items():
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            out[sub] = True  # list part of a mixed Lua table: { "publish", push = {...} }
        else:
            out[key] = sub
    return out


def _flag_hit(word: str, flags: Sequence[str]) -> str | None:
    if word.startswith("--"):
        name = word.split("=", 1)[0]
        for f in flags:
            if f == name or (f.startswith("--") and len(name) >= 4 and f.startswith(name)):
                return f
        return None
    if word.startswith("-") and len(word) > 1:
        if word in flags:
            return word
        letters = word[1:]
        if letters.isalnum():
            for f in flags:
                if len(f) == 2 and f[0] == "-" and f[1] in letters:
                    return f
    return None


def declarative(name: str, table: Mapping[str, Any]) -> Rule:
    """Build a rule from a user table.

    The rule matches when ANY listed condition holds:

    * ``subcommands``: the first operand (first word that is not an option, ``--`` ends options) is
      one of the names. As a table, ``{ push = { flags = { "--force" } } }``, a name maps to
      ``true`` or to a nested rule applied to the words after that subcommand.
    * ``flags``: an option word matches: ``--force`` matches ``--force``, ``--force=x`` and
      GNU-style abbreviations (``--forc``); a one-letter flag ``-f`` also matches inside a
      cluster (``-rf``).
    * ``args``: an operand matches a glob pattern (``"/"``, ``"/etc/*"``), literally or after
      path normalization.

    A word only known at run time counts as a match for ``flags`` when it could be an option, and
    for ``subcommands`` when it is in the subcommand position. ``reason`` replaces the message.
    """
    subs = _subcommand_table(table.get("subcommands") or {})
    sub_rules = {
        k: (declarative(f"{name} {k}", v) if isinstance(v, Mapping) else v) for k, v in subs.items()
    }
    flags = [str(f) for f in _as_list(table.get("flags") or [])]
    patterns = [str(p) for p in _as_list(table.get("args") or [])]
    custom = table.get("reason")

    def said(default: str) -> str:
        return str(custom) if custom else default

    row = row_for(name.split(" ")[0])
    spec = dataclasses.replace(row.opts, abbrev=False) if row is not None else NO_OPTS

    def rule(args: Sequence[Arg]) -> Hit | None:
        if sub_rules:
            s = read(args, spec, stop_after=1)
            if s.operands:
                first = s.operands[0]
                if first.value is None:
                    return Hit(
                        said(
                            f"may run a paused `{name}` subcommand: `{first.text}` is only known "
                            "at run time"
                        ),
                        unknown=True,
                    )
                sub = sub_rules.get(first.value)
                if sub is True:
                    return Hit(said(f"runs `{name} {first.value}`, which is on the pause list"))
                if callable(sub):
                    k = list(args).index(first)
                    hit = sub(args[k + 1 :])
                    if hit:
                        return Hit(said(hit.reason), unknown=hit.unknown)
            elif s.unknown is not None:
                return Hit(said(f"may run a paused `{name}` subcommand"), unknown=True)
        if flags or patterns:
            after = False
            for a in args:
                v = a.value
                if v == "--" and not after:
                    after = True
                    continue
                if v is None:
                    if flags and not after and a.may_be_option:
                        return Hit(
                            said(
                                f"may pass a paused `{name}` flag: `{a.text}` is only known at "
                                "run time"
                            ),
                            unknown=True,
                        )
                    continue
                if flags and not after:
                    f = _flag_hit(v, flags)
                    if f:
                        return Hit(said(f"uses `{f}`, which is on the pause list for `{name}`"))
                if patterns and (after or not v.startswith("-") or v == "-"):
                    norm = normalize_path(v) if "/" in v or v in (".", "..") else v
                    for p in patterns:
                        if fnmatch.fnmatchcase(v, p) or fnmatch.fnmatchcase(norm, p):
                            return Hit(
                                said(f"names `{v}`, which is on the pause list for `{name}`")
                            )
        return None

    return rule


def effective_rules(user: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge user rules over the defaults: name -> Rule | True | False | LUA_FUNCTION."""
    rules: dict[str, Any] = dict(DEFAULT_RULES)
    for name, value in (user or {}).items():
        if name == ASK_REVERSIBLE:
            continue
        if isinstance(value, Mapping):
            rules[name] = declarative(name, value)
        elif isinstance(value, bool) or value == LUA_FUNCTION or callable(value):
            rules[name] = value
    return rules


# -- validation -----------------------------------------------------------------------------------


def _is_str_list(value: Any) -> bool:
    items = _as_list(value) if isinstance(value, (list, Mapping)) else None
    return items is not None and all(isinstance(v, str) and v for v in items)


def _validate_table(key: str, table: Mapping[str, Any], problems: list[str]) -> None:
    if not any(table.get(k) for k in ("subcommands", "flags", "args")):
        problems.append(
            f"`{key}` should list subcommands, flags or args (use true to always pause)"
        )
    for k, v in table.items():
        dotted = f"{key}.{k}"
        if k not in RULE_KEYS:
            problems.append(
                f"unknown option `{dotted}` (expected subcommands, flags, args, reason)"
            )
        elif k == "reason":
            if not isinstance(v, str):
                problems.append(f"`{dotted}` should be string")
        elif k == "subcommands":
            if isinstance(v, list):
                if not _is_str_list(v):
                    problems.append(f"`{dotted}` should be list of strings or table")
                continue
            if not isinstance(v, Mapping):
                problems.append(f"`{dotted}` should be list of strings or table")
                continue
            for name, sub in v.items():
                if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
                    if not isinstance(sub, str) or not sub:
                        problems.append(f"`{dotted}` should be list of strings or table")
                elif isinstance(sub, bool):
                    continue
                elif isinstance(sub, Mapping):
                    _validate_table(f"{dotted}.{name}", sub, problems)
                else:
                    problems.append(f"`{dotted}.{name}` should be boolean or table")
        elif not _is_str_list(v):
            problems.append(f"`{dotted}` should be list of strings")


def validate_rules(rules: Mapping[str, Any]) -> list[str]:
    """Return one problem string per invalid ``pauselist`` entry (empty when all are valid)."""
    problems: list[str] = []
    for name, value in rules.items():
        key = f"pauselist.{name}"
        if name == ASK_REVERSIBLE:
            if not isinstance(value, bool):
                problems.append(f"`{key}` should be boolean, not {_type_name(value)}")
            continue
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            problems.append(f"`{key}` should be a command name")
            continue
        if "/" in name:
            problems.append(f"`{key}` should be a command name, not a path (rules match basenames)")
            continue
        if isinstance(value, bool) or value == LUA_FUNCTION:
            continue
        if isinstance(value, Mapping):
            _validate_table(key, value, problems)
            continue
        problems.append(f"`{key}` should be boolean, function or table")
    return problems


def _type_name(value: object) -> str:
    """The Lua type name a value came from (what the user wrote in their config)."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, (Mapping, list)):
        return "table"
    return "nil" if value is None else type(value).__name__
