"""A set of directories, matched as written and with symlinks resolved."""

from __future__ import annotations

import os
from collections.abc import Iterable

from run_bash.paths import is_under


class Places:
    """A set of directories, matched as written and with symlinks resolved (both are computed
    once)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = tuple(dict.fromkeys(os.path.normpath(p) for p in paths))
        self.real = tuple(dict.fromkeys(os.path.realpath(p) for p in self.paths))

    def __contains__(self, path: str) -> bool:
        if any(is_under(path, p) for p in self.paths):
            return True
        real = os.path.realpath(path)
        return any(is_under(real, p) for p in self.real)
