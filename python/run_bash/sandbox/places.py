"""A set of directories, matched as written and with symlinks resolved."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from run_bash.paths import is_under


class Places:
    """A set of directories, matched as written and with symlinks resolved (both are computed
    once)."""

    def __init__(
        self, paths: Iterable[str], realpath: Callable[[str], str] = os.path.realpath
    ) -> None:
        self.paths = tuple(dict.fromkeys(os.path.normpath(p) for p in paths))
        self._realpath = realpath
        self.real = tuple(dict.fromkeys(realpath(p) for p in self.paths))

    def __contains__(self, path: str) -> bool:
        if any(is_under(path, p) for p in self.paths):
            return True
        real = self._realpath(path)
        return any(is_under(real, p) for p in self.real)


class RealPaths:
    """``os.path.realpath`` remembered for the length of one computation (a set is computed
    from one look at the file system; nothing is kept across runs)."""

    def __init__(self) -> None:
        self._memo: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        hit = self._memo.get(path)
        if hit is None:
            hit = self._memo[path] = os.path.realpath(path)
        return hit
