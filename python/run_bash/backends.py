"""The one list of sandbox backends: their names (the values ``sandbox.backend`` takes), where each
lives, and whether it confines. A leaf module: the config (which validates the names) and the
sandbox package (which imports the backends) both read it, and neither needs the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AUTO", "BACKENDS", "BACKEND_NAMES", "CONFINING_BACKENDS", "REGISTRY", "BackendEntry"]


@dataclass(frozen=True)
class BackendEntry:
    """One registered backend: its name (= config value = module = key), where its class lives,
    and whether it confines commands (known without importing the module)."""

    name: str
    target: str  # "module:Class"
    isolates: bool


# The one list of backends. Modules are imported on first use, so a missing optional dependency of
# one backend never breaks the others.
REGISTRY: tuple[BackendEntry, ...] = (
    BackendEntry("sandlock", "run_bash.sandbox.sandlock:Sandlock", True),
    BackendEntry("bubblewrap", "run_bash.sandbox.bubblewrap:Bubblewrap", True),
    BackendEntry("none", "run_bash.sandbox.none:NoSandbox", False),
)
BACKENDS: dict[str, BackendEntry] = {e.name: e for e in REGISTRY}
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
CONFINING_BACKENDS: tuple[str, ...] = tuple(e.name for e in REGISTRY if e.isolates)
# `sandbox.backend = "auto"`: the first confining backend above that is available here, else none.
AUTO = "auto"
