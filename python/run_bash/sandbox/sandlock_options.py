"""The sandlock backend's own options: a sandlock profile (TOML, read by the SDK's own loader) and
the ``extra_args`` of the sandlock CLI that earlier configurations carry, mapped onto SDK fields."""

from __future__ import annotations

import os
from typing import Any

from run_bash.config import SandlockConfig
from run_bash.paths import expand

# -- extra_args of the sandlock CLI ---------------------------------------------------------------

_ARG_MAP = {
    "-w": "fs_writable",
    "--fs-write": "fs_writable",
    "-r": "fs_readable",
    "--fs-read": "fs_readable",
    "--fs-deny": "fs_denied",
    "--net-allow": "net_allow",
    "--max-memory": "max_memory",
    "--max-processes": "max_processes",
}
_ARG_OPTION = {
    "fs_writable": "sandbox.rules.fs_writable",
    "fs_readable": "sandbox.rules.fs_readable",
    "fs_denied": "sandbox.rules.fs_denied",
    "net_allow": "sandbox.network.allow",
    "max_memory": "sandbox.limits.max_memory",
    "max_processes": "sandbox.limits.max_processes",
}


def map_extra_args(args: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Map sandlock CLI arguments onto SDK fields; return (fields, unmapped arguments)."""
    mapped: dict[str, list[str]] = {}
    unmapped: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        key, value = arg, None
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
        if key in _ARG_MAP:
            if value is None:
                if i + 1 >= len(args):
                    unmapped.append(arg)
                    break
                value = args[i + 1]
                i += 1
            mapped.setdefault(_ARG_MAP[key], []).append(value)
        elif arg == "--port-remap":
            pass  # run_bash's own servers are reachable without remapping
        else:
            unmapped.append(arg)
        i += 1
    return mapped, unmapped


class SandlockOptions:
    """``sandbox.backends.sandlock``: its profile (fields cached by path and mtime) and its
    extra_args."""

    def __init__(self, opts: SandlockConfig) -> None:
        self.opts = opts
        self._profile_cache: tuple[str, float, dict[str, Any]] | None = None

    def profile_path(self) -> str | None:
        raw = self.opts.profile
        if not raw:
            return None
        return expand(raw)

    def profile_fields(self) -> dict[str, Any]:
        """The profile's policy as SDK fields (cached by path and mtime); {} without a profile."""
        path = self.profile_path()
        if path is None:
            return {}
        mtime = os.stat(path).st_mtime
        if self._profile_cache and self._profile_cache[:2] == (path, mtime):
            return self._profile_cache[2]
        import dataclasses

        from sandlock import Sandbox
        from sandlock._profile import load_profile_path

        prof = load_profile_path(path)
        default = Sandbox()
        fields = {}
        for f in dataclasses.fields(prof):
            if f.metadata.get("runtime"):
                continue
            value = getattr(prof, f.name)
            if value != getattr(default, f.name):
                fields[f.name] = value
        self._profile_cache = (path, mtime, fields)
        return fields

    def problems(self, loadable: bool) -> list[str]:
        """Problems that would make every run fail: a profile that is missing or, when sandlock
        works here (``loadable``), does not load."""
        problems: list[str] = []
        raw = self.opts.profile
        key = "`sandbox.backends.sandlock.profile`"
        if raw:
            path = self.profile_path()
            if path is None:
                problems.append(f"{key}: cannot expand {raw!r}")
            elif not os.path.isfile(path):
                problems.append(f"{key}: {path} does not exist")
            elif loadable:
                try:
                    self.profile_fields()
                except Exception as e:
                    problems.append(f"{key}: {path}: {e}")
        return problems

    def warnings(self) -> list[str]:
        """One-time warnings about options that work differently here (extra_args)."""
        args = self.opts.extra_args
        if not args:
            return []
        mapped, unmapped = map_extra_args(list(args))
        out = []
        if mapped:
            names = ", ".join(f"{_ARG_OPTION[k]}" for k in mapped)
            out.append(
                "sandbox.backends.sandlock.extra_args: run_bash drives sandlock through its "
                f"Python API, not the CLI; applied as {names} (prefer those options)"
            )
        if unmapped:
            out.append(
                "sandbox.backends.sandlock.extra_args: ignored "
                + " ".join(unmapped)
                + " (no equivalent; use sandbox.backends.sandlock.profile for other settings)"
            )
        return out
