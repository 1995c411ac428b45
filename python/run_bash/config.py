"""Configuration: one typed, frozen ``Config`` built from the user's options.

``parse_config(raw)`` migrates the original plugin's legacy shapes, checks every key against the
dataclasses below (each option's default, check and help text live on its field, nowhere else) and
raises one ``ConfigError`` naming every bad dotted key. Everything after that reads attributes
(``config.output.max_chars``), never dict lookups.

An empty Lua table arrives over msgpack as an empty list: ``{}`` is accepted wherever a table is
expected (and an empty map wherever a list is).

Pure: no Neovim, no I/O. The Lua shim evaluates Lua-function options before sending the table here,
so everything this module sees is plain data. Checks that need the system (does the sandlock
profile exist, does bwrap accept the extra arguments) belong to the backends (``validate()``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from run_bash.backends import AUTO, BACKEND_NAMES
from run_bash.errors import ConfigError

MIB = 1024 * 1024
# The largest size an option takes: what the kernel's limits hold (rlimits, cgroups, tmpfs).
MAX_SIZE = 2**63 - 1
MAX_TIMEOUT_S = 3600
MAX_BG_AFTER_S = 60
# `wait`: the longest an agent may wait in one call, and the wait when it does not say.
MAX_WAIT_S = 60
DEFAULT_WAIT_S = 30
# Values `sandbox.backend` accepts (`false` is migrated to "none" first).
BACKEND_CHOICES: tuple[str, ...] = (AUTO, *BACKEND_NAMES)

T = TypeVar("T")


class Invalid(ValueError):
    """Raised by a check: the value does not fit. ``message`` (optional) replaces the whole
    "should be …, not …" sentence after the key."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


Check = Callable[[object], Any]


def option(default: Any, check: Check, expected: str, *, key: str = "") -> Any:
    """A config option: its default, a check that returns the typed value (or raises Invalid), the
    text that completes "should be …", and its key when the key is not a Python name."""
    return field(default=default, metadata={"check": check, "expected": expected, "key": key})


def table(cls: type) -> Any:
    """A nested table of options."""
    return field(default_factory=cls, metadata={"table": cls})


# -- checks ---------------------------------------------------------------------------------------


def type_name(value: object) -> str:
    """The Lua-side name of a value's type, for messages."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, Mapping):
        return "table"
    return type(value).__name__


def as_table(value: object) -> Mapping[str, Any] | None:
    """``value`` as a mapping: an empty Lua table arrives as an empty list."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, (list, tuple)) and not value:
        return {}
    return None


def as_list(value: object) -> list[Any] | None:
    """``value`` as a list: an empty map (``vim.empty_dict()``) counts as an empty list."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Mapping) and not value:
        return []
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise Invalid
    return value


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise Invalid
    return value


def str_list(value: object) -> tuple[str, ...]:
    items = as_list(value)
    if items is None or not all(isinstance(v, str) for v in items):
        raise Invalid
    return tuple(items)


def optional(check: Check) -> Check:
    def run(value: object) -> Any:
        return None if value is None else check(value)

    return run


def int_range(low: int, high: int | None = None) -> Check:
    def run(value: object) -> int:
        n = _int(value)
        if n is None or n < low or (high is not None and n > high):
            raise Invalid
        return n

    return run


def parse_size(text: str) -> int | None:
    """Parse "512M", "4G", "1024" into bytes; None when it is not a size (not a finite number,
    under one byte, or above ``MAX_SIZE``)."""
    text = text.strip().upper().removesuffix("B")
    units = {"K": 1024, "M": MIB, "G": 1024 * MIB, "T": 1024 * 1024 * MIB}
    mult = 1
    if text and text[-1] in units:
        mult = units[text[-1]]
        text = text[:-1]
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or not 1 <= value * mult <= MAX_SIZE:
        return None
    return int(value * mult)


def size(value: object) -> int:
    n = _int(value)
    if n is not None and 0 < n <= MAX_SIZE:
        return n
    parsed = parse_size(value) if isinstance(value, str) else None
    if parsed is None:
        raise Invalid
    return parsed


def size_or_zero(value: object) -> int:
    """A size, or 0 (none at all)."""
    if value == 0 and not isinstance(value, bool):
        return 0
    return size(value)


NOTIFY_AGENT_CHOICES = ("next_turn", "submit")


def notify_mode(value: object) -> str | bool:
    if value is False:
        return False
    if isinstance(value, str) and value in NOTIFY_AGENT_CHOICES:
        return value
    raise Invalid


def backend_name(value: object) -> str:
    if value not in BACKEND_CHOICES:
        raise Invalid
    return str(value)


def ports(value: object) -> tuple[int, ...]:
    items = as_list(value)
    numbers = [_int(p) for p in items or []]
    if items is None or not all(p is not None and 0 < p < 65536 for p in numbers):
        raise Invalid
    return tuple(p for p in numbers if p is not None)


def endpoints(value: object) -> tuple[str, ...]:
    """``host:port`` entries (port 1-65535 or ``*``)."""
    items = str_list(value)
    bad = [e for e in items if not _is_endpoint(e)]
    if bad:
        raise Invalid("; ".join(f'{e!r} is not "host:port" (port 1-65535 or *)' for e in bad))
    return items


def _is_endpoint(entry: str) -> bool:
    host, sep, port = entry.rpartition(":")
    ok_port = port == "*" or (port.isdigit() and 0 < int(port) < 65536)
    return bool(sep and host and ok_port and not re.search(r"\s", entry))


def str_table(value: object) -> dict[str, str]:
    m = as_table(value)
    if m is None or not all(isinstance(k, str) and isinstance(v, str) for k, v in m.items()):
        raise Invalid
    return dict(m)


def pause_rules(value: object) -> dict[str, Any]:
    """The ``pauselist`` table, checked by the pause list's own validator."""
    m = as_table(value)
    if m is None:
        raise Invalid
    from run_bash.checker.rules import validate_rules

    problems = validate_rules(m)
    if problems:
        raise ConfigError(problems)
    return copy.deepcopy(dict(m))


# -- the options ------------------------------------------------------------------------------------
# Every field below is one option (`*run_bash-config-<dotted.key>*` in the help; a test checks).


@dataclass(frozen=True)
class RulesConfig:
    """What runs may read, write or not see (``sandbox.rules``)."""

    # Paths readable inside the sandbox; nil = built-in defaults, a list replaces them.
    fs_readable: tuple[str, ...] | None = option(None, optional(str_list), "list of strings")
    # Paths writable inside the sandbox; nil = built-in defaults (project + named caches).
    fs_writable: tuple[str, ...] | None = option(None, optional(str_list), "list of strings")
    # Paths neither readable nor writable; nil = built-in defaults (secrets, keyrings).
    fs_denied: tuple[str, ...] | None = option(None, optional(str_list), "list of strings")
    # PATH directories (or venvs) inside a writable grant that runs may write anyway; by default
    # they are read-only inside the sandbox, as what a run writes there runs outside it later.
    path_writable: tuple[str, ...] = option((), str_list, "list of strings")


@dataclass(frozen=True)
class SandlockConfig:
    """sandlock's own options (``sandbox.backends.sandlock``)."""

    # A sandlock profile TOML merged with the rules (the original plugin's format).
    profile: str | None = option(None, optional(_string), "string")
    # Arguments for the sandlock CLI, which run_bash does not run: mapped onto options, with a warning.
    extra_args: tuple[str, ...] | None = option(None, optional(str_list), "list of strings")
    # Run even when the kernel's Landlock ABI is older than 6 (weaker confinement).
    allow_degraded: bool = option(False, boolean, "boolean")


@dataclass(frozen=True)
class BubblewrapConfig:
    """bubblewrap's own options (``sandbox.backends.bubblewrap``)."""

    # Extra bwrap arguments inserted before `--` (expert use).
    extra_args: tuple[str, ...] = option((), str_list, "list of strings")


@dataclass(frozen=True)
class BackendsConfig:
    """The options of each confining backend (``sandbox.backends``)."""

    sandlock: SandlockConfig = table(SandlockConfig)
    bubblewrap: BubblewrapConfig = table(BubblewrapConfig)


@dataclass(frozen=True)
class NetworkConfig:
    """What runs may reach over the network (``sandbox.network``)."""

    # Outside endpoints commands may reach, as "host:port" (sandlock enforces per TCP port).
    allow: tuple[str, ...] = option((), endpoints, 'list of "host:port" strings')
    # Loopback ports of other local services commands may reach (run_bash's own are allowed).
    allow_local_ports: tuple[int, ...] = option((), ports, "list of port numbers")
    # Make servers of sessions in their project's network namespace reachable on the host's
    # 127.0.0.1, each on a port the kernel picks (named in the session's notice and list).
    forward_ports: bool = option(True, boolean, "boolean")


@dataclass(frozen=True)
class EnvConfig:
    """The runs' environment (``sandbox.env``)."""

    # Extra environment variable names passed through (secret-looking names are still dropped).
    passthrough: tuple[str, ...] = option((), str_list, "list of strings", key="pass")
    # Variables set for every command.
    set: dict[str, str] = field(
        default_factory=dict,
        metadata={"check": str_table, "expected": "table of strings", "key": "", "free": True},
    )


@dataclass(frozen=True)
class LimitsConfig:
    """One run's limits, enforced by the kernel (``sandbox.limits``)."""

    # Most processes one sandbox may hold at once.
    max_processes: int = option(512, int_range(1), "positive integer")
    # Memory limit per sandbox in bytes, given as e.g. "2G" (the whole run where a memory
    # cgroup is available, see :checkhealth).
    max_memory: int = option(4096 * MIB, size, 'size such as "4G"')
    # Largest file a command may write in bytes, given as e.g. "1G".
    max_file_size: int = option(2048 * MIB, size, 'size such as "2G"')
    # Size of a run's temp space (/tmp, /var/tmp and /dev/shm: one tmpfs, held in memory), e.g.
    # "1G"; never more than half the memory available when the run starts.
    max_temp_size: int = option(1024 * MIB, size, 'size such as "1G"')


@dataclass(frozen=True)
class SandboxConfig:
    """How commands are confined (``sandbox``)."""

    # Backend that confines commands: "auto" (the first that works here), "sandlock",
    # "bubblewrap" or "none" (false means "none").
    backend: str = option(
        AUTO,
        backend_name,
        " or ".join(", ".join(f'"{n}"' for n in BACKEND_CHOICES).rsplit(", ", 1)),
    )
    rules: RulesConfig = table(RulesConfig)
    backends: BackendsConfig = table(BackendsConfig)
    network: NetworkConfig = table(NetworkConfig)
    env: EnvConfig = table(EnvConfig)
    limits: LimitsConfig = table(LimitsConfig)
    # Keep the sandbox of a project's next command ready (one per project, used only when it is
    # exactly the sandbox that command gets): a sandboxed command then starts in a few ms.
    prepare: bool = option(True, boolean, "boolean")


@dataclass(frozen=True)
class OutputConfig:
    """How much of a run's output is kept and shown (``output``)."""

    # Characters of output shown to an agent (head + longer tail; the full output stays on disk).
    max_chars: int = option(30000, int_range(1000), "integer >= 1000")
    # Bytes kept in a session's output file; later output is dropped with a marker.
    file_cap: int = option(64 * MIB, int_range(4096), "integer >= 4096")
    # Longest single line shown; longer lines are cut in the middle.
    max_line_chars: int = option(2000, int_range(80), "integer >= 80")
    # Milliseconds between live-output updates sent to Neovim buffers.
    live_interval_ms: int = option(100, int_range(1), "positive integer")
    # Bytes all output files of one Neovim may hold together (at most a quarter of their disk).
    dir_cap: int = option(256 * MIB, int_range(4096), "integer >= 4096")


@dataclass(frozen=True)
class SessionsConfig:
    """How many sessions are kept (``sessions``)."""

    # Most background sessions alive at once.
    max_background: int = option(16, int_range(1), "positive integer")
    # Finished sessions remembered (summary, agent text, output file); older ones are forgotten.
    keep_finished: int = option(100, int_range(1), "positive integer")


@dataclass(frozen=True)
class BackgroundConfig:
    """How background sessions report back (``background``)."""

    # How the agent hears that a background session it started has ended: "next_turn" (a hidden
    # message sent with the user's next message), "submit" (also starts a turn when the chat is
    # idle) or false (only the visible line in the chat).
    notify_agent: str | bool = option("next_turn", notify_mode, '"next_turn", "submit" or false')


@dataclass(frozen=True)
class AuditConfig:
    """The audit log (``audit``)."""

    # Write one JSON line per decision and per run.
    enabled: bool = option(True, boolean, "boolean")
    # Rotate the audit log when it grows past this many bytes.
    max_bytes: int = option(5 * MIB, int_range(4096), "integer >= 4096")


@dataclass(frozen=True)
class UndoConfig:
    """What undo records, and how much it keeps (``undo``)."""

    # Record what every run changed in its project (its change set) so it can be undone.
    enabled: bool = option(True, boolean, "boolean")
    # Largest file whose content is kept, in bytes or e.g. "10M"; larger ones are listed only.
    max_file_size: int = option(10 * MIB, size, 'size such as "10M"')
    # A project with more files than this is not recorded.
    max_files: int = option(100_000, int_range(1), "positive integer")
    # Runs with changes kept per project; the oldest go first.
    keep: int = option(50, int_range(1), "positive integer")
    # Total size of the store in bytes or e.g. "1G"; over it the oldest change sets go first.
    max_store: int = option(1024 * MIB, size, 'size such as "1G"')
    # Largest ignored file (.gitignore) whose content is kept; larger ones are listed only.
    ignored_file_max: int = option(MIB, size_or_zero, 'size such as "1M", or 0')
    # Ignored content kept per project; an ignored directory that does not fit is listed only.
    ignored_total: int = option(64 * MIB, size_or_zero, 'size such as "64M", or 0')


@dataclass(frozen=True)
class Config:
    """The effective configuration (``parse_config``)."""

    sandbox: SandboxConfig = table(SandboxConfig)
    # Pause-list rules: command name -> true | false | { subcommands=…, flags=…, args=… }.
    pauselist: dict[str, Any] = field(
        default_factory=dict,
        metadata={"check": pause_rules, "expected": "table", "key": "", "free": True},
    )
    # Seconds a foreground command may run when the caller does not say (max 3600).
    default_timeout: int = option(300, int_range(1, MAX_TIMEOUT_S), f"integer 1..{MAX_TIMEOUT_S}")
    output: OutputConfig = table(OutputConfig)
    sessions: SessionsConfig = table(SessionsConfig)
    background: BackgroundConfig = table(BackgroundConfig)
    audit: AuditConfig = table(AuditConfig)
    undo: UndoConfig = table(UndoConfig)
    # Not an option: what the migration of legacy shapes rewrote, for one-time notices.
    notices: tuple[str, ...] = field(default=(), metadata={"internal": True})


def _key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key") or f.name)


def _options(cls: type) -> Iterator[dataclasses.Field[Any]]:
    for f in dataclasses.fields(cls):
        if not f.metadata.get("internal"):
            yield f


def option_keys(cls: type = Config, prefix: str = "") -> Iterator[str]:
    """Every option's dotted key (tables that hold the user's own keys count as one option)."""
    for f in _options(cls):
        sub = f.metadata.get("table")
        if sub is not None:
            yield from option_keys(sub, f"{prefix}{_key(f)}.")
        else:
            yield f"{prefix}{_key(f)}"


# -- parsing ----------------------------------------------------------------------------------------


def migrate(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Rewrite the original plugin's legacy option shapes; return the new table and notices.

    Legacy forms: ``sandbox = { profile = …, extra_args = …, rules = … }`` (sandlock options at the top
    of ``sandbox``), ``sandbox = { enabled = false }`` and ``sandbox.backend = false``.
    """
    out = copy.deepcopy(dict(raw))
    notices: list[str] = []
    sandbox = out.get("sandbox")
    if isinstance(sandbox, dict):
        if sandbox.get("enabled") is False:
            sandbox.pop("enabled")
            sandbox["backend"] = "none"
            notices.append('`sandbox.enabled = false` is now `sandbox.backend = "none"`')
        elif "enabled" in sandbox and sandbox["enabled"] is True:
            sandbox.pop("enabled")
        if sandbox.get("backend") is False:
            sandbox["backend"] = "none"
        legacy = {k: sandbox.pop(k) for k in ("profile", "extra_args") if k in sandbox}
        if legacy:
            backends = sandbox.setdefault("backends", {})
            if isinstance(backends, list) and not backends:
                backends = sandbox["backends"] = {}
            sl = backends.setdefault("sandlock", {}) if isinstance(backends, dict) else None
            if isinstance(sl, list) and not sl:
                sl = backends["sandlock"] = {}
            if isinstance(sl, dict):
                for k, v in legacy.items():
                    sl.setdefault(k, v)
                    notices.append(f"`sandbox.{k}` is now `sandbox.backends.sandlock.{k}`")
    return out, notices


def describe(value: object) -> str:
    """A value for a message: its type, and the value itself when it is short."""
    kind = type_name(value)
    if isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) < 40):
        return f"{kind} {value!r}"
    return kind


def _parse_table(cls: type[T], raw: Mapping[Any, Any], prefix: str, problems: list[str]) -> T:
    fields = {_key(f): f for f in _options(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        f = fields.get(key) if isinstance(key, str) else None
        if f is None:
            problems.append(f"unknown option `{dotted}`")
            continue
        sub = f.metadata.get("table")
        if sub is not None:
            m = as_table(value)
            if m is None:
                problems.append(f"`{dotted}` should be table, not {type_name(value)}")
                continue
            kwargs[f.name] = _parse_table(sub, m, dotted + ".", problems)
            continue
        try:
            kwargs[f.name] = f.metadata["check"](value)
        except Invalid as err:
            if err.message:
                problems.append(f"`{dotted}`: {err.message}")
            else:
                expected = f.metadata["expected"]
                problems.append(f"`{dotted}` should be {expected}, not {describe(value)}")
        except ConfigError as err:  # a table with its own validator (pauselist)
            problems.extend(err.problems)
    return cls(**kwargs)


def parse_config(raw: object) -> Config:
    """Migrate legacy forms in ``raw`` and check every key; return the effective ``Config``.

    Raises ConfigError naming every problem at once.
    """
    table_ = {} if raw is None else as_table(raw)
    if table_ is None:
        raise ConfigError([f"options should be table, not {type_name(raw)}"])
    migrated, notices = migrate(table_)
    problems: list[str] = []
    config = _parse_table(Config, migrated, "", problems)
    if problems:
        raise ConfigError(problems)
    return dataclasses.replace(config, notices=tuple(notices))
