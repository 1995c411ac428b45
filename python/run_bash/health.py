"""The health report, computed in Python and rendered by ``lua/run_bash/health.lua``.

Uses the same availability checks as the runtime, so health never disagrees with behaviour.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from run_bash.config import Config
from run_bash.sandbox.base import AUTO, BACKENDS

if TYPE_CHECKING:
    from run_bash.sandbox.cgroups import Cgroups
    from run_bash.sessions import SessionManager

Item = dict[str, str]

MODULES = ("msgpack", "bashlex", "psutil", "sandlock")


def _item(level: str, msg: str, advice: str = "") -> Item:
    return {"level": level, "msg": msg, "advice": advice}


def module_versions() -> list[Item]:
    """One item per dependency: its version, or why it does not import."""
    items = []
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except Exception as err:
            items.append(
                _item("error", f"{name} does not import: {err}", "run `make deps` in the plugin")
            )
            continue
        version = getattr(mod, "__version__", "")
        if not version:
            try:
                from importlib.metadata import version as dist_version

                version = dist_version(name)
            except Exception:
                version = "?"
        items.append(_item("ok", f"{name} {version}"))
    return items


def libpython_shared() -> bool:
    """Whether this interpreter runs from a shared libpython (``scripts/pick-python`` asks the
    same of each candidate): its process maps one."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("libpython" in line for line in maps)
    except OSError:
        return False


def report(config: Config, mgr: SessionManager) -> list[Item]:
    """The Python layers of ``:checkhealth run_bash``, in order."""
    items: list[Item] = [_item("start", "Python host")]
    venv = sys.prefix != sys.base_prefix
    items.append(
        _item(
            "ok",
            f"Python {sys.version.split()[0]} ({sys.executable})"
            + (" in the plugin's venv" if venv else ""),
        )
    )
    if libpython_shared():
        items.append(
            _item(
                "info",
                "this Python loads libpython as a shared library, which starts the host about "
                "15 % slower than a statically linked one (a distribution's /usr/bin/python3): "
                "`make clean deps` picks such a one when there is one, or name it with "
                "SYS_PYTHON=",
            )
        )
    items.extend(module_versions())
    items.append(_item("info", f"output files: {mgr.state_dir} (0700)"))
    items.append(
        _item(
            "info",
            f"run temp dirs: {mgr.temp_root} (0700; inside a sandbox each run's /tmp is a "
            "tmpfs of sandbox.limits.max_temp_size)",
        )
    )
    log_path = os.environ.get("RUN_BASH_LOG", "")
    if log_path:
        items.append(_item("info", f"log file: {log_path}"))

    items.append(_item("start", "Sandbox backends"))
    configured = config.sandbox.backend
    chosen = mgr.choice()
    for name in BACKENDS:
        try:
            avail = mgr.backend(name).availability()
        except Exception as err:  # a backend module that fails to import is reported, not raised
            items.append(_item("error", f"{name}: {err}", "run `make deps`"))
            continue
        mark = " (configured)" if name == configured else ""
        if configured == AUTO and name == chosen.backend.name:
            mark = " (chosen by auto)"
        if name == "none":
            items.append(
                _item(
                    "warn" if name == configured else "info",
                    f"none{mark}: no confinement; every command asks for approval",
                )
            )
        elif avail.ok:
            items.append(_item("ok", f"{name}{mark}: available {avail.version}".rstrip()))
        else:
            level = "error" if name == configured else "warn"
            items.append(_item(level, f"{name}{mark}: {avail.reason}", avail.advice))
    backend = chosen.backend
    if chosen.error:
        items.append(
            _item(
                "error",
                "commands that want the sandbox fail: " + chosen.error,
                'fix the backend above, or set sandbox.backend = "auto"',
            )
        )
    elif not backend.isolates and not chosen.unavailable:
        items.append(
            _item("warn", 'commands run WITHOUT a sandbox (sandbox.backend = "none"); each asks')
        )
    elif chosen.unavailable:
        items.append(
            _item(
                "error",
                f"commands run WITHOUT a sandbox ({chosen.reason}); each one asks for approval",
                "make one of the backends above work (see its advice)",
            )
        )
    else:
        items.append(_item("ok", f"commands run in the {backend.name} sandbox ({chosen.reason})"))
        # What works differently here (no per-run process cap, no seccomp filter, …).
        items.extend(_item("warn", text) for text in backend.warnings())
    items.append(memory_cap())
    items.extend(relative_path_entries(mgr.environ.get("PATH", "")))
    active, text = mgr.spares.describe(backend)
    items.append(_item("ok" if active else "info", f"prepared sandboxes: {text}"))
    for notice in config.notices:
        items.append(_item("warn", f"config: {notice}"))
    return items


def memory_cap(cgroups: Cgroups | None = None) -> Item:
    """Whether ``sandbox.limits.max_memory`` caps a whole run (a memory cgroup per run) or each
    process alone, and why."""
    from run_bash.sandbox.cgroups import CGROUPS

    whole, text = (cgroups or CGROUPS).describe()
    if whole:
        return _item("ok", f"memory cap (sandbox.limits.max_memory) is for the whole run: {text}")
    return _item(
        "warn",
        "memory cap (sandbox.limits.max_memory) is per process under bubblewrap (RLIMIT_DATA: "
        "two processes may each use it) and sandlock's own count of mapped memory: no memory "
        f"cgroup for runs ({text})",
        "run Neovim where it may make cgroups: as root, or below a cgroup v2 directory delegated "
        "to you whose cgroup.subtree_control lists memory (:help run_bash-cgroups)",
    )


def relative_path_entries(path_var: str) -> list[Item]:
    """A warning for each relative ``PATH`` entry other than the current directory: the shell
    resolves it in whatever directory it is in, so run_bash keeps that directory in every
    directory of the project (|run_bash-host-read|): it is read-only wherever it exists, and a run
    that makes one anywhere (``npm install`` in a subdirectory) is stopped."""
    relative = [e for e in dict.fromkeys(path_var.split(os.pathsep)) if e and e != "."]
    relative = [e for e in relative if not os.path.isabs(e)]
    return [
        _item(
            "warn",
            f"PATH has a relative entry {e!r}: your shell runs a program from <any directory>/{e} "
            "when you cd there, so run_bash keeps it read-only in every directory of the project, "
            "and stops a run that makes one",
            "make it absolute (direnv's PATH_add does) or remove it",
        )
        for e in relative
    ]
