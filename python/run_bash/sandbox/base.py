"""The backend contract, the one registry of backends, and what every started run shares.

A backend turns a ``RunSpec`` (the command, its cwd, environment, output fd, private temp dir and the
effective ``Policy``) into a running process. The runtime (``sessions.py``) owns everything around it:
the output pipe, timeouts, waiting (through a pidfd on ``Launched.pid``), the sweep of descendants and
the private temp dir. A backend never inherits the host's fds 0/1/2 to the child: stdin is /dev/null,
stdout and stderr are ``spec.stdout_fd`` (``spec.stderr_fd`` when given), nothing else is passed.

Contract (``Backend`` below)::

    name: ClassVar[str]          # a REGISTRY name = config value = module name
    isolates: ClassVar[bool]     # False for "none": every command then needs approval
    prepares: ClassVar[bool]     # True when it can prepare a run's sandbox ahead (spare.py)
    __init__(config: Config)     # the effective config (config.parse_config)
    availability() -> Availability   # cheap after the first call (cached)
    validate() -> list[str]      # config problems that would make every run fail (setup errors)
    warnings() -> list[str]      # config notes worth saying once (options applied differently)
    falls_short() -> str         # what of the options it cannot enforce ("" = all; auto reads it)
    spawn(spec) -> Launched      # raises SpawnError; never runs unconfined
    prepare(spec) -> Spare       # (prepares) a spare: the sandbox of spec around TRAMPOLINE
    spare_key(spare, spec) -> object  # (prepares) what spare must equal (spare.key) to serve spec
    adopt(spare) -> Launched     # (prepares) the spare a run takes, as its Launched
    ready_ahead() -> None        # (prepares) start what a first run's sandbox needs, whatever its policy

``Launched.pid`` must exit when the command's root process exits; ``Launched.pidfd()`` gives a new
pidfd of it (the runtime waits on it). ``Launched.reap()`` is called once
after that and returns the exit status (>= 0) or ``-signal``. ``Launched.terminate(sig)`` signals every
process of the run that the backend knows about (the runtime also signals the process tree and the
processes tagged with the session id). ``Launched.close()`` releases backend resources; it is
idempotent. ``Launched.notices`` collects what the user and the agent should read about the run.
``LaunchedBase`` implements all of that except the backend's own wait.

What the host reads later from the project (the policy's ``git_dirs`` and ``protected``) is kept by
binds where the backend can make them (``Policy.protect_binds()``); the runtime's guard
(``guard.py``) watches the rest and checks everything after the run. Backends start no guard.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from run_bash.backends import (
    AUTO,
    BACKEND_NAMES,
    BACKENDS,
    CONFINING_BACKENDS,
    REGISTRY,
)
from run_bash.errors import SpawnError
from run_bash.sandbox.proc import signal_group

if TYPE_CHECKING:
    from run_bash.config import Config
    from run_bash.sandbox.cgroups import RunCgroup
    from run_bash.sandbox.netholder import Loopback
    from run_bash.sandbox.policy import Policy
    from run_bash.sandbox.spare import Spare

__all__ = [
    "AUTO",
    "BACKENDS",
    "BACKEND_NAMES",
    "CONFINING_BACKENDS",
    "REGISTRY",
    "Availability",
    "Backend",
    "Choice",
    "Launched",
    "LaunchedBase",
    "RunSpec",
    "SpawnError",
    "choose_backend",
    "get_backend",
    "once",
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
    # The command's stdin (a prepared sandbox's command pipe, ``spare.py``); None: /dev/null.
    stdin_fd: int | None = None
    # A prepared sandbox (``spare.py``): it does not hold its project's network namespace in use
    # until a run takes it (``Loopbacks.hold``).
    prepared: bool = False


# How long ``kill_and_wait`` waits for SIGKILLed processes to exit (one in uninterruptible sleep
# finishes its system call first).
KILL_WAIT_S = 2.0


def kill_and_wait(
    members: Callable[[], Iterable[int]],
    timeout: float = KILL_WAIT_S,
    unconfined: Iterable[int] = (),
) -> bool:
    """SIGKILL the processes ``members()`` lists (a cgroup's) and wait at most ``timeout`` until
    each has exited (its pidfd is readable then, after any system call it was in has finished);
    whether all have. Each is signalled through a pidfd opened first and only if ``members()``
    still lists it then: a pid that was reused meanwhile is never signalled. The ``unconfined``
    ones (a backend's own process) are killed but not waited for."""
    skip = set(unconfined)
    opened: dict[int, int] = {}
    for pid in members():
        with contextlib.suppress(OSError):  # already gone
            opened[pid] = os.pidfd_open(pid)
    listed = set(members()) if opened else set()
    fds = []
    for pid, fd in opened.items():
        if pid not in listed or pid in skip:
            if pid in listed:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
            continue
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        fds.append(fd)
    deadline = time.monotonic() + timeout
    exited = True
    try:
        for fd in fds:
            try:
                ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            except (OSError, ValueError):
                continue
            exited = exited and bool(ready)
    finally:
        for fd in fds:
            os.close(fd)
    return exited


class Launched(Protocol):
    """A started command, as the runtime sees it."""

    pid: int
    notices: list[str]
    # The tag its processes carry in their environment (``RUN_BASH_SESSION``): the session's id,
    # or the prepared sandbox's it ran in ("" when the runtime's own id applies).
    session_id: str
    # Stages of the backend's own start (``time.monotonic()``), for ``make bench``.
    stages: dict[str, float]
    # The project's network namespace the run lives in (None: the host's, or its own).
    loopback: Loopback | None

    def pidfd(self) -> int: ...

    def reap(self) -> int: ...

    def reaped(self) -> int | None: ...

    def terminate(self, sig: int) -> None: ...

    def kill_remaining(self, timeout: float = KILL_WAIT_S) -> bool: ...

    def ended(self) -> None: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """See the module docstring."""

    name: ClassVar[str]
    isolates: ClassVar[bool]
    prepares: ClassVar[bool]

    def __init__(self, config: Config) -> None: ...

    def availability(self) -> Availability: ...

    def validate(self) -> list[str]: ...

    def warnings(self) -> list[str]: ...

    def falls_short(self) -> str: ...

    def spawn(self, spec: RunSpec) -> Launched: ...

    def prepare(self, spec: RunSpec) -> Spare: ...

    def spare_key(self, spare: Spare, spec: RunSpec, keep: bool = False) -> object: ...

    def adopt(self, spare: Spare) -> Launched: ...

    def ready_ahead(self) -> None: ...


class LaunchedBase:
    """The life cycle every backend's run shares.

    ``reap`` waits once (the backend's ``_wait``); ``terminate`` signals the run's process group
    and its root; ``kill_all`` SIGKILLs all of the run the backend knows about (the guard calls it
    when a file the host reads changes); ``close`` kills what still runs, once, then lets go of
    what the run held: its cgroup (saying when the kernel killed a process of it for memory) and
    its project's network namespace.
    """

    # Set by the backend when the run has them.
    session_id: str = ""
    cgroup: RunCgroup | None = None
    loopback: Loopback | None = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.notices: list[str] = []
        self.stages: dict[str, float] = {}
        self._status: int | None = None
        self._closed = False

    def _wait(self) -> int:
        """Block until the root process exits; its status (>= 0) or ``-signal``."""
        raise NotImplementedError

    def pidfd(self) -> int:
        """A new pidfd of the root process (the caller closes it). Raises ProcessLookupError
        when it is already gone."""
        return os.pidfd_open(self.pid)

    def note(self, notices: list[str]) -> None:
        """Add ``notices`` not already there."""
        self.notices.extend(n for n in notices if n not in self.notices)

    def _poll(self) -> int | None:
        """The status when the root has exited and it can be had without waiting; else None."""
        return None

    def reap(self) -> int:
        if self._status is None:
            self._status = self._wait()
        return self._status

    def reaped(self) -> int | None:
        """``reap``'s answer when it needs no waiting (the root's exit was seen); else None."""
        if self._status is None:
            self._status = self._poll()
        return self._status

    def terminate(self, sig: int) -> None:
        signal_group(self.pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, sig)

    def kill_all(self) -> None:
        self.terminate(signal.SIGKILL)

    def kill_remaining(self, timeout: float = KILL_WAIT_S) -> bool:
        """SIGKILL whatever of an ended run is still in its cgroup (its processes were swept;
        this catches one that left the tree) and wait at most ``timeout`` until each has exited
        (whether all have), so that no write of theirs still in flight lands after the post-run
        check: the runtime calls it before that check (without waiting first, on its loop; then,
        only if something is still exiting, on a worker), then ``close`` on a worker."""
        if self.cgroup is None:
            return True
        return kill_and_wait(self.cgroup.pids, timeout, self.unconfined())

    def unconfined(self) -> set[int]:
        """The backend's own processes in the run's cgroup, outside the confinement (none here):
        ``kill_remaining`` kills them with the rest but does not wait for their exit (the
        backend's clean-up, ``close``, does)."""
        return set()

    def ended(self) -> None:
        """Add to ``notices`` what the run's result says about how it ended (processes the
        kernel killed for memory), before what it held goes (``close``, which adds them too)."""
        if self.cgroup is not None:
            self.note(self.cgroup.notices())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._status is None:
            with contextlib.suppress(Exception):
                self.kill_all()
            with contextlib.suppress(Exception):
                self.reap()
        if self.cgroup is not None:
            self.note(self.cgroup.notices())
        release(self.session_id, self.cgroup, self.loopback)
        self.cgroup = self.loopback = None


class PopenLaunched(LaunchedBase):
    """A command started with ``subprocess.Popen`` in a new session (its pid is its group's)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(proc.pid)
        self.proc = proc

    def _wait(self) -> int:
        return self.proc.wait()

    def _poll(self) -> int | None:
        return self.proc.poll()


def release(session_id: str, cgroup: RunCgroup | None, loopback: Loopback | None) -> None:
    """Let go of what a run held: its cgroup (removed) and its project's network namespace."""
    if cgroup is not None:
        from run_bash.sandbox.cgroups import CGROUPS

        CGROUPS.release(cgroup)
    if loopback is not None:
        from run_bash.sandbox.netholder import LOOPBACKS

        LOOPBACKS.release(loopback, session_id)


def once(said: set[str], notes: list[str]) -> list[str]:
    """The notes not reported before (configuration warnings are said once per backend)."""
    out = [n for n in notes if n not in said]
    said.update(out)
    return out


@dataclass(frozen=True)
class Choice:
    """The backend a run uses, and why.

    ``unavailable``: why commands run without a sandbox although one was wanted ("" otherwise).
    ``reason``: how the backend was chosen (health, setup, the tool description).
    ``error``: a backend named explicitly is unavailable: runs that want the sandbox refuse
    (never a silent fallback); "" otherwise.
    """

    backend: Backend
    reason: str
    unavailable: str = ""
    error: str = ""


def choose_backend(requested: str, get: Callable[[str], Backend]) -> Choice:
    """Resolve ``requested`` (a backend name or ``AUTO``) with ``get(name)`` giving instances.

    ``auto`` takes the first confining backend of ``REGISTRY`` whose ``availability()`` is ok (each
    backend's own probe decides what it needs) and that enforces the options in full
    (``falls_short()`` is ""); when every one that works falls short, the first that works, with
    what it lacks in the reason; when none works, ``none``, where every command asks. A name
    given explicitly is used as it is; when it is unavailable, the choice carries an ``error``.
    """
    if requested != AUTO:
        backend = get(requested)
        if not backend.isolates:
            return Choice(backend, f'sandbox.backend = "{requested}"')
        avail = backend.availability()
        if avail.ok:
            return Choice(backend, f'sandbox.backend = "{requested}" ({avail.version})')
        why = f"{requested} unavailable: {avail.reason}"
        advice = f" ({avail.advice})" if avail.advice else ""
        error = (
            f'sandbox.backend = "{requested}" is unavailable: {avail.reason}{advice}; set '
            'sandbox.backend = "auto" to use what works here, or run the command without the '
            "sandbox (skip_sandbox, :RunBash!), which asks"
        )
        return Choice(get("none"), why, unavailable=why, error=error)
    passed: list[str] = []  # why each backend before the chosen one was not taken
    fallback: Choice | None = None  # the first that works but falls short
    for name in CONFINING_BACKENDS:
        backend = get(name)
        avail = backend.availability()
        if not avail.ok:
            passed.append(f"{name} unavailable: {avail.reason}")
            continue
        short = backend.falls_short()
        if not short:
            after = f"; {'; '.join(passed)}" if passed else ""
            return Choice(backend, f"auto: {name} works here ({avail.version}){after}")
        passed.append(f"{name} not taken: {short}")
        if fallback is None:
            fallback = Choice(backend, f"auto: {name} works here ({avail.version}) but {short}")
    if fallback is not None:
        others = [p for p in passed if not p.startswith(f"{fallback.backend.name} ")]
        after = f"; {'; '.join(others)}" if others else ""
        return Choice(fallback.backend, fallback.reason + after)
    why = "no sandbox works here (" + "; ".join(passed) + ")"
    return Choice(get("none"), f"auto: {why}", unavailable=why)


def backend_class(name: str) -> type[Backend]:
    """Return the backend class registered as ``name``."""
    try:
        target = BACKENDS[name].target
    except KeyError:
        raise SpawnError(
            f"unknown sandbox backend {name!r} (choose one of {', '.join(BACKENDS)})"
        ) from None
    module, _, cls = target.partition(":")  # ImportError propagates to get_backend
    found: type[Backend] = getattr(importlib.import_module(module), cls)
    return found


class BrokenBackend:
    """Stands in for a backend whose module failed to load: unavailable, with the reason.
    ``broken_backend`` makes one carrying the failed backend's name."""

    name: ClassVar[str] = ""
    isolates: ClassVar[bool] = True
    prepares: ClassVar[bool] = False
    error: ClassVar[BaseException | None] = None

    def __init__(self, config: Config) -> None:
        self.config = config

    def availability(self) -> Availability:
        return Availability(
            False, f"the {self.name} backend failed to load: {self.error}", "run `make deps`"
        )

    def validate(self) -> list[str]:
        return []

    def warnings(self) -> list[str]:
        return []

    def falls_short(self) -> str:
        return ""

    def spawn(self, spec: RunSpec) -> Launched:
        raise SpawnError(self.availability().reason)

    def prepare(self, spec: RunSpec) -> Spare:
        raise SpawnError(self.availability().reason)

    def spare_key(self, spare: Spare, spec: RunSpec, keep: bool = False) -> object:
        return None

    def adopt(self, spare: Spare) -> Launched:
        raise SpawnError(self.availability().reason)

    def ready_ahead(self) -> None:
        pass


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
        return broken_backend(name, err)(config)
    return cls(config)


def broken_backend(name: str, error: BaseException) -> type[Backend]:
    """A ``BrokenBackend`` class named ``name`` that reports ``error``."""
    attrs = {"name": name, "error": error}
    return type(f"Broken_{name}", (BrokenBackend,), attrs)
