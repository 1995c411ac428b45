"""The one exception hierarchy of run_bash. Messages carry no ``run_bash:`` prefix; the boundary adds it."""

from __future__ import annotations


class RunBashError(Exception):
    """Base of every error the user or the agent should see as a plain message."""


class ConfigError(RunBashError):
    """Invalid configuration: one message listing every problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid config: " + "; ".join(self.problems))


class UsageError(RunBashError):
    """A bad argument to a command, a tool call or an RPC method."""


class SpawnError(RunBashError):
    """A command could not be started (the sandbox could not be built, bash is missing, ...)."""


class SessionError(RunBashError):
    """An unknown session id or an operation a session's state does not allow."""
