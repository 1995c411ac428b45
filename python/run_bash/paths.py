"""Path expansion for sandbox rules: ``~``, ``$VAR`` / ``${VAR}``, XDG fallbacks, existence rules.

Rules are written the way the original plugin took them (``"~/.cache/pip"``,
``"$XDG_CONFIG_HOME/git"``, ``"."``). Expansion is pure apart from the environment mapping and the
``exists`` callback it is given, so tests can drive it without touching the real home directory.

* ``~`` and ``~/…`` expand to ``home``; ``~user`` is left to :func:`os.path.expanduser`.
* ``$VAR`` and ``${VAR}`` expand from ``env``. An unset XDG base-directory variable falls back to
  its specified default (``$XDG_CONFIG_HOME`` → ``~/.config`` …); any other unset variable makes the
  path unresolvable (``None``): a rule never silently turns into a different path.
* Relative paths are taken relative to ``base`` (the project directory).
* Readable and writable paths that do not exist are skipped; denied paths are kept (a secret that
  appears later must still be denied).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping

__all__ = [
    "XDG_FALLBACKS",
    "expand",
    "expand_rules",
    "is_under",
]

# Defaults of the XDG base-directory specification, used when the variable is unset or empty.
XDG_FALLBACKS: dict[str, str] = {
    "XDG_CONFIG_HOME": "~/.config",
    "XDG_CACHE_HOME": "~/.cache",
    "XDG_DATA_HOME": "~/.local/share",
    "XDG_STATE_HOME": "~/.local/state",
}

_VAR_RE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _home(env: Mapping[str, str], home: str | None) -> str:
    if home:
        return home
    value = env.get("HOME")
    return value if value else os.path.expanduser("~")


def expand(
    path: str,
    *,
    env: Mapping[str, str] | None = None,
    home: str | None = None,
    base: str | None = None,
) -> str | None:
    """Expand one rule path to a normalized absolute path, or None when it cannot be resolved."""
    if not isinstance(path, str) or not path.strip():
        return None
    env = os.environ if env is None else env
    home_dir = _home(env, home)
    missing = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal missing
        name = match.group(1) or match.group(2)
        value = env.get(name)
        if value:
            return value
        fallback = XDG_FALLBACKS.get(name)
        if fallback is not None:
            return home_dir + fallback[1:]
        missing = True
        return ""

    text = path.strip()
    if text == "~" or text.startswith("~/"):
        text = home_dir + text[1:]
    text = _VAR_RE.sub(substitute, text)
    if missing:
        return None
    if text.startswith("~"):
        text = os.path.expanduser(text)
        if text.startswith("~"):
            return None
    if not os.path.isabs(text):
        text = os.path.join(base or os.getcwd(), text)
    return os.path.normpath(text)


def expand_rules(
    paths: Iterable[str] | None,
    *,
    must_exist: bool,
    env: Mapping[str, str] | None = None,
    home: str | None = None,
    base: str | None = None,
    exists: Callable[[str], bool] = os.path.lexists,
) -> list[str]:
    """Expand a list of rule paths, dropping unresolvable ones and (if ``must_exist``) missing ones.

    Order is kept and duplicates are removed.
    """
    out: list[str] = []
    seen: set[str] = set()
    for raw in paths or ():
        resolved = expand(raw, env=env, home=home, base=base)
        if resolved is None or resolved in seen:
            continue
        if must_exist and not exists(resolved):
            continue
        seen.add(resolved)
        out.append(resolved)
    return out


def is_under(path: str, parent: str) -> bool:
    """True when ``path`` equals ``parent`` or lies beneath it (both normalized absolute paths)."""
    if parent == "/":
        return path.startswith("/")
    return path == parent or path.startswith(parent.rstrip("/") + "/")


class Tops:
    """A set of normalized absolute directories; ``path in tops`` is ``any(is_under(path, t)
    for t in tops)`` in one look-up per component of ``path`` (whatever the set's size)."""

    def __init__(self, parents: Iterable[str]) -> None:
        self._set = frozenset(p.rstrip("/") or "/" for p in parents)
        self._root = "/" in self._set

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str) or not path.startswith("/"):
            return False
        if self._root:
            return True
        p = path.rstrip("/")
        while p:
            if p in self._set:
                return True
            p = p[: p.rfind("/")]
        return False

    def __bool__(self) -> bool:
        return bool(self._set)


def lmode(path: str) -> int:
    """The mode of ``path`` itself (an ``lstat``: a symlink is not followed); 0 when it does not
    exist or cannot be looked at. One call where ``lexists`` and ``islink`` would make two."""
    try:
        return os.lstat(path).st_mode
    except (OSError, ValueError):
        return 0
