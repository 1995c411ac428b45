"""A set of directories, matched as written and with symlinks resolved."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from run_bash.paths import Tops


class Places:
    """A set of directories, matched as written and with symlinks resolved (both are computed
    once)."""

    def __init__(
        self, paths: Iterable[str], realpath: Callable[[str], str] = os.path.realpath
    ) -> None:
        self.paths = tuple(dict.fromkeys(os.path.normpath(p) for p in paths))
        self._realpath = realpath
        self.real = tuple(dict.fromkeys(realpath(p) for p in self.paths))
        self._tops = Tops(self.paths)
        self._real_tops = Tops(self.real)

    def __contains__(self, path: str) -> bool:
        if path in self._tops:
            return True
        return self._realpath(path) in self._real_tops


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
