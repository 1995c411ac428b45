"""The sandlock backend's own options: a sandlock profile (TOML, read by the SDK's own loader) and
the ``extra_args`` of the sandlock CLI that earlier configurations carry, mapped onto SDK fields;
and the SDK's fields for one run (``sdk_fields``): the policy with those options narrowed to what
run_bash allows."""

from __future__ import annotations

import os
from typing import Any

from run_bash.config import SandlockConfig, parse_size
from run_bash.paths import expand
from run_bash.sandbox import loopback
from run_bash.sandbox.base import RunSpec
from run_bash.sandbox.namespaces import TEMP_DIRS
from run_bash.sandbox.policy import Policy, point_temp

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


# -- the SDK's fields for one run ------------------------------------------------------------------

# TCP to loopback. 127.0.0.1 is also listed alone: with a policy_fn, sandlock 0.9.0 lets a
# loopback connect through only to addresses named one by one (the CIDR entry is ignored).
LOOPBACK = ("tcp://127.0.0.1:*", "tcp://127.0.0.0/8:*", "tcp://[::1]:*")


def sdk_fields(
    policy: Policy,
    spec: RunSpec,
    *,
    mount_ns: bool,
    shared_netns: bool,
    profile: dict[str, Any],
    extra_args: list[str],
) -> tuple[dict[str, Any], list[str], list[str]]:
    """``Sandbox`` keyword arguments for one run of ``policy`` (with the profile's fields and the
    mapped ``extra_args`` narrowed to what run_bash allows), the notes on what was dropped, and
    every denied path (the policy's and the profile's). ``mount_ns``: the run has its own mount
    namespace (private temp dirs, read-only mounts); ``shared_netns``: it is in its project's
    network namespace."""
    notes: list[str] = []
    private = os.path.realpath(spec.tmpdir)
    readable = list(policy.readable)
    writable = list(policy.writable)
    denied = list(policy.denied)
    net_allow = list(policy.network_allow)
    extra: dict[str, Any] = {}
    limits: dict[str, Any] = {
        "max_processes": policy.limits.max_processes,
        "max_memory": policy.limits.max_memory,
    }

    merged: dict[str, Any] = dict(profile)
    if extra_args:
        mapped, _ = map_extra_args(extra_args)
        for k, v in mapped.items():
            if k in ("max_memory", "max_processes"):
                merged[k] = v[-1]
            else:
                merged[k] = list(merged.get(k, [])) + v

    def grant(paths: Any) -> list[str]:
        out = []
        for p in paths or []:
            e = expand(str(p), base=spec.cwd)
            if e is not None:
                out.append(e)
        return out

    readable += [p for p in grant(merged.pop("fs_readable", [])) if os.path.exists(p)]
    for p in grant(merged.pop("fs_writable", [])):
        if p == "/" or (p in TEMP_DIRS and not mount_ns):
            notes.append(
                f"profile: writable {p} dropped (shared temp dirs hold other programs' "
                "sockets; each run has a private TMPDIR)"
            )
            continue
        if p in TEMP_DIRS:
            notes.append(f"profile: writable {p} is the run's private temp dir")
            continue
        if os.path.exists(p):
            writable.append(p)
    denied += grant(merged.pop("fs_denied", []))
    net_allow += [str(x) for x in merged.pop("net_allow", [])]
    for k in ("max_memory", "max_processes"):
        if k in merged:
            v = merged.pop(k)
            if k == "max_processes":
                limits[k] = min(int(v), limits[k])
            else:
                size = parse_size(str(v)) if not isinstance(v, int) else v
                if size:
                    limits[k] = min(size, limits[k])
    for k in ("clean_env", "env", "cwd", "workdir", "fs_mount", "fs_mount_ro", "chroot"):
        if merged.pop(k, None) is not None:
            notes.append(f"profile field {k} ignored: run_bash sets it")
    for k in ("uid", "gid", "name", "image", "on_exit", "on_error", "fs_storage"):
        merged.pop(k, None)
    extra.update(merged)  # net_deny, http_*, extra_deny_syscalls, max_open_files, ...

    every_denied = list(dict.fromkeys(denied))
    if mount_ns:
        # Existing denied and read-only paths are mounts in the run's namespace
        # (``request``); a non-empty deny list would make sandlock 0.9.0 open every file on
        # the command's behalf, which breaks opening a symlink itself (O_PATH|O_NOFOLLOW:
        # tar restoring a symlink's mode). What is left for it: Neovim's directories under
        # a writable grant that do not exist yet (nothing may be created in them).
        denied = [p for p in policy.read_only if not os.path.lexists(p)]
    else:
        # Read-only carve-outs (Neovim's directories under a writable grant) are denied:
        # Landlock cannot make a subtree of a writable grant read-only, and sandlock's deny
        # check can.
        denied += list(policy.read_only)
        # Nor the sealed parts of the host-read set (PATH units, hooks holders): denied, as
        # no mount can make them read-only here.
        denied += list(policy.sealed)

    if mount_ns:
        # The temp dirs are the private dir's binds; its own path may be hidden under them.
        temp = [t for t in TEMP_DIRS if os.path.isdir(t) and not os.path.islink(t)]
        tmpdir = "/tmp"
    else:
        temp, tmpdir = [private], private
    kwargs: dict[str, Any] = {
        "fs_readable": list(dict.fromkeys(readable)),
        "fs_writable": list(dict.fromkeys([*writable, *temp])),
        "fs_denied": list(dict.fromkeys(denied)),
        "clean_env": True,
        "env": point_temp(dict(spec.env), tmpdir),
        "cwd": spec.cwd,
        "max_processes": int(limits["max_processes"]),
        "max_memory": int(limits["max_memory"]),
        "net_allow": list(dict.fromkeys(net_allow + list(LOOPBACK))),
        "net_allow_bind": ["*"],
        "name": f"run_bash-{spec.session_id}"[:64],
    }
    if not shared_netns:
        kwargs["net_deny_bind"] = loopback.denied_binds()
    kwargs.update(extra)
    return kwargs, notes, every_denied


def utf8_script(cmd: str) -> str:
    """``cmd`` as a bash script that is valid UTF-8 and runs the same bytes.

    sandlock passes argv through UTF-8 strings: a command holding invalid UTF-8 (from Lua, as
    surrogate escapes) would not run at all. Such a command becomes ``eval $'…'``, every byte that
    is not plain printable ASCII written as ``\\xHH``, so bash gets exactly the original bytes, as
    under the other backends.
    """
    try:
        cmd.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return cmd
    out = []
    for byte in os.fsencode(cmd):
        char = chr(byte)
        if 0x20 <= byte < 0x7F and char not in "'\\":
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "eval $'" + "".join(out) + "'"
