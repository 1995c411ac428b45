"""Capabilities: drop every one of them for the sandboxes a privileged host starts.

When the host holds capabilities (running as root), every sandbox is forked from one long-lived
spawner thread that dropped all of its own capabilities (bounding, inheritable, ambient, permitted,
effective: capabilities are per thread on Linux) when it started. The child inherits that empty set,
and exec as uid 0 gains nothing from an empty bounding set, so neither bash nor a setuid program it
runs gets any (no device nodes, no mounts, no reading of files root could otherwise bypass
permissions on). The thread lives as long as the host because a child forked with a parent-death
signal gets it when the *thread* that forked it exits. Without capabilities there is nothing to drop
and the caller forks on its own thread.
"""

from __future__ import annotations

import ctypes
import os
import threading
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def host_has_capabilities() -> bool:
    """True when this process holds any capability (typically: running as root)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                caps = line.startswith(("CapEff:", "CapPrm:", "CapAmb:", "CapInh:"))
                if caps and int(line.split()[1], 16):
                    return True
    except OSError:
        return os.geteuid() == 0
    return False


PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
_CAP_FIELDS = ("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:")


def drop_thread_capabilities() -> None:
    """Drop every capability of the calling thread, irreversibly; raise OSError if any remains."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)  # pid 0: this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    if libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
    with open("/proc/thread-self/status") as f:
        left = [ln.split()[0] for ln in f if ln.startswith(_CAP_FIELDS) and int(ln.split()[1], 16)]
    if left:
        raise OSError(f"capabilities left after dropping them: {', '.join(left)}")


class CaplessSpawner:
    """A thread without capabilities that runs spawn functions for the rest of the host's life."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: list[tuple[Any, dict[str, Any], threading.Event]] = []
        self._wake = threading.Condition(self._lock)
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="run_bash-spawner", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        try:
            drop_thread_capabilities()
        except BaseException as e:
            self._error = e
        self._ready.set()
        while True:
            with self._wake:
                while not self._jobs:
                    self._wake.wait()
                fn, box, done = self._jobs.pop(0)
            try:
                if self._error is not None:
                    raise self._error
                box["value"] = fn()
            except BaseException as e:
                box["error"] = e
            done.set()

    @property
    def error(self) -> BaseException | None:
        """Why the thread could not drop its capabilities (then nothing is spawned)."""
        return self._error

    def call(self, fn: Any) -> Any:
        """Run ``fn`` on the spawner thread and return its result (or raise its exception)."""
        box: dict[str, Any] = {}
        done = threading.Event()
        with self._wake:
            self._jobs.append((fn, box, done))
            self._wake.notify()
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]


@lru_cache(maxsize=1)
def capless_spawner() -> CaplessSpawner:
    """The host's one spawner thread (created on the first privileged spawn)."""
    return CaplessSpawner()
