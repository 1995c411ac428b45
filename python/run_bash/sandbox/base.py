"""The backend contract and the one registry of backends.

A backend turns a ``RunSpec`` (the command, its cwd, environment, output fd, private temp dir and the
effective ``Policy``) into a running process. The runtime (``sessions.py``) owns everything around it:
the output pipe, timeouts, waiting (through a pidfd on ``Launched.pid``), the sweep of descendants and
the private temp dir. A backend never inherits the host's fds 0/1/2 to the child: stdin is /dev/null,
stdout and stderr are ``spec.stdout_fd``, nothing else is passed.

Contract::

    class Backend:
        name: ClassVar[str]          # "sandlock" | "bubblewrap" | "none" = config value = module = key
        isolates: ClassVar[bool]     # False for "none": every command then needs approval
        def __init__(self, config: Mapping) -> None      # the effective config (config.parse_config)
        def availability(self) -> Availability           # cheap after the first call (cached)
        def validate(self) -> list[str]                  # config problems specific to this backend
        def spawn(self, spec: RunSpec) -> Launched        # raises SpawnError; never runs unconfined

``Launched.pid`` must exit when the command's root process exits. ``Launched.reap()`` is called once
after that and returns the exit status (>= 0) or ``-signal``. ``Launched.terminate(sig)`` signals every
process of the run that the backend knows about (the runtime also signals the process tree and the
processes tagged with the session id). ``Launched.close()`` releases backend resources; it is idempotent.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from run_bash.errors import SpawnError

if TYPE_CHECKING:
    from run_bash.config import Config
    from run_bash.sandbox.policy import Policy

__all__ = [
    "BACKENDS",
    "Availability",
    "Backend",
    "Launched",
    "RunSpec",
    "SpawnError",
    "get_backend",
]


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here, and if not why and what to do."""

    ok: bool
    reason: str = ""
    advice: str = ""
    version: str = ""


@dataclass(frozen=True)
class RunSpec:
    """Everything a backend needs to start one command."""

    cmd: str
    cwd: str
    env: Mapping[str, str]
    stdout_fd: int
    tmpdir: str
    session_id: str
    # The effective policy; None for the "none" backend (a confining backend then builds it).
    policy: Policy | None = None
    # Where stderr goes when it is not ``stdout_fd`` (the command line passes its own stderr).
    stderr_fd: int | None = None


class Launched(Protocol):
    """A started command, as the runtime sees it."""

    pid: int
    notices: list[str]

    def reap(self) -> int: ...

    def terminate(self, sig: int) -> None: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """See the module docstring."""

    name: ClassVar[str]
    isolates: ClassVar[bool]

    def availability(self) -> Availability: ...

    def validate(self) -> list[str]: ...

    def warnings(self) -> list[str]: ...

    def spawn(self, spec: RunSpec) -> Launched: ...


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


def backend_class(name: str) -> type:
    """Return the backend class registered as ``name``."""
    try:
        target = BACKENDS[name].target
    except KeyError:
        raise SpawnError(
            f"unknown sandbox backend {name!r} (choose one of {', '.join(BACKENDS)})"
        ) from None
    module, _, cls = target.partition(":")  # ImportError propagates to get_backend
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


class BrokenBackend:
    """Stands in for a backend whose module failed to load: unavailable, with the reason."""

    isolates: ClassVar[bool] = True

    def __init__(self, name: str, error: BaseException) -> None:
        self.name = name  # type: ignore[misc]
        self.error = error

    def availability(self) -> Availability:
        return Availability(
            False, f"the {self.name} backend failed to load: {self.error}", "run `make deps`"
        )

    def validate(self) -> list[str]:
        return []

    def warnings(self) -> list[str]:
        return []

    def spawn(self, spec: RunSpec) -> Launched:
        raise SpawnError(self.availability().reason)


def get_backend(name: str, config: Config) -> Backend:
    """Instantiate the backend ``name`` for the effective ``config``.

    A backend whose module cannot be imported comes back as a ``BrokenBackend`` (unavailable), so
    one broken optional dependency never takes the others down.
    """
    try:
        cls = backend_class(name)
    except SpawnError:
        raise
    except Exception as err:
        return BrokenBackend(name, err)  # type: ignore[return-value]
    return cls(config)  # type: ignore[no-any-return]
