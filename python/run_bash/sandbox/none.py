"""The "none" backend: plain bash in its own session, no confinement. Every command needs approval."""

from __future__ import annotations

import subprocess
from typing import ClassVar

from run_bash.config import Config
from run_bash.errors import SpawnError
from run_bash.sandbox.base import Availability, PopenLaunched, RunSpec
from run_bash.sandbox.proc import bash_path
from run_bash.sandbox.spare import Spare


class NoSandbox:
    """No confinement: the command sees the filesystem and network as the user does."""

    name: ClassVar[str] = "none"
    isolates: ClassVar[bool] = False
    prepares: ClassVar[bool] = False

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()

    def availability(self) -> Availability:
        bash = bash_path()
        if bash is None:
            return Availability(False, "bash not found on PATH", "install bash")
        return Availability(True, version=bash)

    def validate(self) -> list[str]:
        return []

    def warnings(self) -> list[str]:
        return []

    def falls_short(self) -> str:
        return ""

    def spawn(self, spec: RunSpec) -> PopenLaunched:
        bash = bash_path() or "bash"
        proc = subprocess.Popen(
            [bash, "-c", spec.cmd],
            cwd=spec.cwd,
            env=dict(spec.env),
            stdin=subprocess.DEVNULL,
            stdout=spec.stdout_fd,
            stderr=spec.stdout_fd if spec.stderr_fd is None else spec.stderr_fd,
            close_fds=True,
            start_new_session=True,
            restore_signals=True,
        )
        return PopenLaunched(proc)

    def prepare(self, spec: RunSpec) -> Spare:
        raise SpawnError("nothing to prepare without a sandbox")

    def spare_key(self, spare: Spare, spec: RunSpec, keep: bool = False) -> object:
        return None

    def adopt(self, spare: Spare) -> PopenLaunched:
        raise SpawnError("nothing to prepare without a sandbox")

    def ready_ahead(self) -> None:
        pass  # runs share the host's network
