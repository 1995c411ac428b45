"""Configuration: defaults in one place, validation by dotted key, migration of the original's form.

Pure: no pynvim, no I/O. The Lua shim evaluates Lua-function options before sending the table here,
so everything this module sees is plain data.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from run_bash.errors import ConfigError

MIB = 1024 * 1024

# Every option, with its default. Each key has a `*run_bash-config-<dotted.key>*` tag in the help.
DEFAULTS: dict[str, Any] = {
    "sandbox": {
        # Backend that confines commands: "sandlock", "bubblewrap" or "none" (false means "none").
        "backend": "sandlock",
        "rules": {
            # Paths readable inside the sandbox; nil = built-in defaults, a list replaces them.
            "fs_readable": None,
            # Paths writable inside the sandbox; nil = built-in defaults (project + named caches).
            "fs_writable": None,
            # Paths neither readable nor writable; nil = built-in defaults (secrets, keyrings).
            "fs_denied": None,
        },
        "backends": {
            "sandlock": {
                # A sandlock profile TOML merged with the rules (the original plugin's format).
                "profile": None,
                # Arguments for the sandlock CLI, which run_bash does not run: accepted with a warning.
                "extra_args": None,
                # Run even when the kernel's Landlock ABI is older than 6 (weaker confinement).
                "allow_degraded": False,
            },
            "bubblewrap": {
                # Extra bwrap arguments inserted before `--` (expert use).
                "extra_args": [],
            },
        },
        "network": {
            # Outside endpoints commands may reach, as "host:port" (sandlock enforces per TCP port).
            "allow": [],
            # Loopback ports of other local services commands may reach (run_bash's own are allowed).
            "allow_local_ports": [],
        },
        "env": {
            # Extra environment variable names passed through (secret-looking names are still dropped).
            "pass": [],
            # Variables set for every command.
            "set": {},
        },
        "limits": {
            # Most processes one sandbox may hold at once.
            "max_processes": 512,
            # Memory limit per sandbox, e.g. "2G" (sandlock only).
            "max_memory": "4G",
            # Largest file a command may write, e.g. "1G".
            "max_file_size": "2G",
        },
    },
    # Pause-list rules: command name -> true | false | { subcommands=…, flags=…, args=… }.
    "pauselist": {},
    # Seconds a foreground command may run when the caller does not say (max 3600).
    "default_timeout": 300,
    "output": {
        # Characters of output shown to an agent (head + longer tail; the full output stays on disk).
        "max_chars": 30000,
        # Bytes kept in a session's output file; later output is dropped with a marker.
        "file_cap": 64 * MIB,
        # Longest single line shown; longer lines are cut in the middle.
        "max_line_chars": 2000,
        # Milliseconds between live-output updates sent to Neovim buffers.
        "live_interval_ms": 100,
    },
    "sessions": {
        # Most background sessions alive at once.
        "max_background": 16,
    },
    "audit": {
        # Write one JSON line per decision and per run.
        "enabled": True,
        # Rotate the audit log when it grows past this many bytes.
        "max_bytes": 5 * MIB,
    },
}

MAX_TIMEOUT_S = 3600
MAX_BG_AFTER_S = 60
BACKEND_NAMES = ("sandlock", "bubblewrap", "none")


def _type_name(value: object) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _pos_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _size(value: object) -> bool:
    return _pos_int(value) or (isinstance(value, str) and parse_size(value) is not None)


Check = tuple[Callable[[object], bool], str]

CHECKS: dict[str, Check] = {
    "sandbox.backend": (
        lambda v: v in BACKEND_NAMES or v is False,
        '"sandlock", "bubblewrap" or "none"',
    ),
    "sandbox.rules.fs_readable": (lambda v: v is None or _is_str_list(v), "list of strings"),
    "sandbox.rules.fs_writable": (lambda v: v is None or _is_str_list(v), "list of strings"),
    "sandbox.rules.fs_denied": (lambda v: v is None or _is_str_list(v), "list of strings"),
    "sandbox.backends.sandlock.profile": (lambda v: v is None or isinstance(v, str), "string"),
    "sandbox.backends.sandlock.extra_args": (
        lambda v: v is None or _is_str_list(v),
        "list of strings",
    ),
    "sandbox.backends.sandlock.allow_degraded": (lambda v: isinstance(v, bool), "boolean"),
    "sandbox.backends.bubblewrap.extra_args": (_is_str_list, "list of strings"),
    "sandbox.network.allow": (_is_str_list, 'list of "host:port" strings'),
    "sandbox.network.allow_local_ports": (
        lambda v: isinstance(v, list) and all(_pos_int(p) and p < 65536 for p in v),
        "list of port numbers",
    ),
    "sandbox.env.pass": (_is_str_list, "list of strings"),
    "sandbox.env.set": (
        lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        "table of strings",
    ),
    "sandbox.limits.max_processes": (_pos_int, "positive integer"),
    "sandbox.limits.max_memory": (_size, 'size such as "4G"'),
    "sandbox.limits.max_file_size": (_size, 'size such as "2G"'),
    "pauselist": (lambda v: isinstance(v, dict), "table"),
    "default_timeout": (
        lambda v: _pos_int(v) and int(v) <= MAX_TIMEOUT_S,  # type: ignore[call-overload]
        f"integer 1..{MAX_TIMEOUT_S}",
    ),
    "output.max_chars": (lambda v: _pos_int(v) and v >= 1000, "integer >= 1000"),  # type: ignore[operator]
    "output.file_cap": (lambda v: _pos_int(v) and v >= 4096, "integer >= 4096"),  # type: ignore[operator]
    "output.max_line_chars": (lambda v: _pos_int(v) and v >= 80, "integer >= 80"),  # type: ignore[operator]
    "output.live_interval_ms": (lambda v: _pos_int(v), "positive integer"),
    "sessions.max_background": (_pos_int, "positive integer"),
    "audit.enabled": (lambda v: isinstance(v, bool), "boolean"),
    "audit.max_bytes": (lambda v: _pos_int(v) and v >= 4096, "integer >= 4096"),  # type: ignore[operator]
}

# Tables whose keys are the user's, not ours (validated by their own module).
FREE_TABLES = {"pauselist", "sandbox.env.set"}


def parse_size(text: str) -> int | None:
    """Parse "512M", "4G", "1024" into bytes; None when it is not a size."""
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
    if value <= 0:
        return None
    return int(value * mult)


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
            sl = backends.setdefault("sandlock", {}) if isinstance(backends, dict) else None
            if isinstance(sl, dict):
                for k, v in legacy.items():
                    sl.setdefault(k, v)
                    notices.append(f"`sandbox.{k}` is now `sandbox.backends.sandlock.{k}`")
    return out, notices


def _merge(
    defaults: dict[str, Any], user: Mapping[str, Any], prefix: str, problems: list[str]
) -> dict:
    merged = copy.deepcopy(defaults)
    for key, value in user.items():
        dotted = f"{prefix}{key}"
        if key not in defaults:
            problems.append(f"unknown option `{dotted}`")
            continue
        default = defaults[key]
        if isinstance(default, dict) and dotted not in FREE_TABLES:
            if not isinstance(value, dict):
                problems.append(f"`{dotted}` should be table, not {_type_name(value)}")
                continue
            merged[key] = _merge(default, value, dotted + ".", problems)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _walk(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted not in FREE_TABLES:
            flat.update(_walk(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def parse_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge ``raw`` over the defaults, migrate legacy forms and validate every key.

    Returns the effective config (``config["notices"]`` lists migration notices).
    Raises ConfigError naming every problem at once.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError([f"options should be table, not {_type_name(raw)}"])
    migrated, notices = migrate(raw)
    problems: list[str] = []
    merged = _merge(DEFAULTS, migrated, "", problems)
    for dotted, value in _walk(merged).items():
        check = CHECKS.get(dotted)
        if check is None:
            continue
        ok, expected = check
        if not ok(value):
            problems.append(f"`{dotted}` should be {expected}, not {_describe(value)}")
    if not problems:
        from run_bash.checker.rules import validate_rules
        from run_bash.sandbox.policy import validate_network_allow

        problems.extend(validate_network_allow(merged["sandbox"]["network"]["allow"]))
        problems.extend(validate_rules(merged["pauselist"]))
    if problems:
        raise ConfigError(problems)
    if merged["sandbox"]["backend"] is False:
        merged["sandbox"]["backend"] = "none"
    merged["notices"] = notices
    return merged


def _describe(value: object) -> str:
    kind = _type_name(value)
    if isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) < 40):
        return f"{kind} {value!r}"
    return kind
