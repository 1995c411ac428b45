"""The one list of sandbox backends: their names (the values ``sandbox.backend`` takes), where each
lives, and whether it confines. A leaf module: the config (which validates the names) and the
sandbox package (which imports the backends) both read it, and neither needs the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = [
    "AUTO",
    "BACKENDS",
    "BACKEND_NAMES",
    "CONFINING_BACKENDS",
    "NAMED_BACKEND_ENV",
    "REGISTRY",
    "BackendEntry",
    "named_at_start",
]


class BackendEntry(NamedTuple):
    """One registered backend: its name (= config value = module = key), where its class lives,
    and whether it confines commands (known without importing the module). (Not a dataclass:
    the host reads this module before it forks its sandbox launcher, and imports as little as
    it can until then: ``start.py``.)"""

    name: str
    target: str  # "module:Class"
    isolates: bool


# The one list of backends. Modules are imported on first use, so a missing optional dependency of
# one backend never breaks the others. The order is ``auto``'s preference (``choose_backend``):
# both confining backends enforce the same intent, and bubblewrap costs a command's file system
# calls nothing, while sandlock's supervisor answers each open, stat, readlink and directory read
# (``make bench``, a 5,000-file project: `git status` 14 ms against 62 ms, `grep -r` 52 ms
# against 1.1 s). sandlock is taken first where the options need what only it enforces
# (``Backend.falls_short``).
REGISTRY: tuple[BackendEntry, ...] = (
    BackendEntry("bubblewrap", "run_bash.sandbox.bubblewrap:Bubblewrap", True),
    BackendEntry("sandlock", "run_bash.sandbox.sandlock:Sandlock", True),
    BackendEntry("none", "run_bash.sandbox.none:NoSandbox", False),
)
BACKENDS: dict[str, BackendEntry] = {e.name: e for e in REGISTRY}
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
CONFINING_BACKENDS: tuple[str, ...] = tuple(e.name for e in REGISTRY if e.isolates)
# `sandbox.backend = "auto"`: the first confining backend above that is available here and enforces
# the options in full, else the first available one, else none.
AUTO = "auto"

# The backend the user's options name, as Lua saw them when it started the host (``host.lua``).
NAMED_BACKEND_ENV = "RUN_BASH_BACKEND"


def named_at_start(environ: Mapping[str, str]) -> str | None:
    """The backend the options named when the host was started (``RUN_BASH_BACKEND``), or None.
    Only a hint for start-up work done before the options arrive (which launcher to start, which
    backend to check before ``ready``); the options themselves decide every run."""
    name = environ.get(NAMED_BACKEND_ENV)
    return name if name in BACKENDS or name == AUTO else None
