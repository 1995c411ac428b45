"""Checks for values that come from Lua or from the agent: types, not truthiness.

Every problem is one ``UsageError`` that names the argument, e.g. "`approved` should be true or
false, not string 'no'". Absent values (``nil``, JSON ``null``) mean "not given".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from run_bash.config import as_table, describe
from run_bash.errors import UsageError


def flag(name: str, value: object) -> bool:
    """A boolean argument; absent is false."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise UsageError(f"`{name}` should be true or false, not {describe(value)}")
    return value


def text(name: str, value: object) -> str | None:
    """A string argument, or None when absent."""
    if value is None or isinstance(value, str):
        return value
    raise UsageError(f"`{name}` should be a string, not {describe(value)}")


def number(name: str, value: object, unit: str = "seconds") -> float | None:
    """A number argument, or None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise UsageError(f"`{name}` should be a number of {unit}, not {describe(value)}")
    return float(value)


def choice(name: str, value: object, allowed: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise UsageError(f"`{name}` should be one of {', '.join(allowed)}, not {describe(value)}")
    return value


def options(name: str, value: object, allowed: Collection[str]) -> Mapping[str, Any]:
    """A table of options; absent is empty; unknown keys are refused."""
    if value is None:
        return {}
    table = as_table(value)
    if table is None:
        raise UsageError(f"`{name}` should be a table, not {describe(value)}")
    unknown = sorted(str(k) for k in table if k not in allowed)
    if unknown:
        raise UsageError(
            f"unknown {name} option(s): {', '.join(unknown)} (known: {', '.join(sorted(allowed))})"
        )
    return table


def arity(method: str, args: Sequence[object], names: Sequence[str]) -> None:
    """Refuse more arguments than ``method`` takes."""
    if len(args) > len(names):
        takes = f"({', '.join(names)})" if names else "no arguments"
        raise UsageError(f"{method} takes {takes}, not {len(args)} argument(s)")


def _searchable_without_privileges(path: str) -> bool:
    """Whether every directory of ``path`` can be entered by this user without capabilities
    (a confined command has none, so root's override of permissions does not apply to it)."""
    uid, groups = os.geteuid(), {os.getegid(), *os.getgroups()}
    current = "/"
    for part in [p for p in path.split("/") if p] + [""]:
        try:
            st = os.stat(current)
        except OSError:
            return False
        if st.st_uid == uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid in groups:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            return False
        current = os.path.join(current, part)
    return True


def working_dir(value: object, confined: bool) -> str:
    """The command's working directory: absent means the host's; it must be a directory the
    command can enter. A confined command gets it without symbolic links: a sandbox holds the
    places it grants by their real paths, so a name through a link (``~/work -> /data/work``)
    leads nowhere inside it."""
    if value is None:
        return os.getcwd()
    if not isinstance(value, str):
        raise UsageError(f"`cwd` should be a string, not {describe(value)}")
    if not value.strip():
        raise UsageError("`cwd` is empty")
    path = os.path.abspath(os.path.expanduser(value))
    if not os.path.exists(path):
        raise UsageError(f"`cwd` {path} does not exist")
    if not os.path.isdir(path):
        raise UsageError(f"`cwd` {path} is not a directory")
    if not os.access(path, os.X_OK) or (confined and not _searchable_without_privileges(path)):
        raise UsageError(f"`cwd` {path}: permission denied")
    return os.path.realpath(path) if confined else path
