"""A probe's answer kept between hosts, for as long as what it depends on stays the same.

bubblewrap's probe (``bwprobe.py``) runs three sandboxes; at a cold start they competed with the
host's own start for the two CPUs here and made the first command's result about 20 ms later. A
host that finds the programs and the system exactly as the last probe found them takes that
probe's answer instead (``load``), and probes again when anything differs.

What the answer depends on (``state``), all read, never guessed from names:

* each program the probe runs (bwrap, bash, unshare, mount, ``/bin/sh``): its path and the
  identity of the file it leads to (device, inode, mode, owner, size, modification and change
  times): a new install, an upgrade, a ``chmod`` or a different file under the same name differ;
* the kernel (``uname``) and the boot (``/proc/sys/kernel/random/boot_id``);
* the limits and switches of namespaces (``/proc/sys/user/*``, and
  ``kernel.unprivileged_userns_clone`` and AppArmor's ``restrict_unprivileged_*`` where they
  exist), AppArmor's policy revision where it can be read;
* this process's own place: user and groups, its namespaces, its ``no_new_privs``, seccomp
  and capability sets, and its security label;
* the probe's own code (``bwprobe.py``, ``seccomp.py``, ``tempfs.py``): a new version of
  run_bash probes again.

Only an answer that found bwrap working is kept (one that did not is probed for again, and
removes what was kept): an answer that went stale while nothing above changed can only make runs
fail with bwrap's own error, never run one without its sandbox. The file is the user's own (Lua
names it in Neovim's state directory, ``RUN_BASH_PROBE_FILE``); one that is not the user's, is
writable by others or does not parse is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from typing import Any

from run_bash.statedir import read_own, write_own

FILE_ENV = "RUN_BASH_PROBE_FILE"
FORMAT = 1
MAX_BYTES = 64 * 1024
SWITCHES = (
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_unconfined",
    "/sys/kernel/security/apparmor/revision",
    "/proc/self/attr/current",
)
NAMESPACES = ("user", "pid", "mnt", "net", "cgroup", "ipc", "uts")
STATUS_FIELDS = (
    b"NoNewPrivs",
    b"Seccomp",
    b"Seccomp_filters",
    b"CapInh",
    b"CapPrm",
    b"CapEff",
    b"CapBnd",
    b"CapAmb",
)


def _identity(path: str | None) -> list[Any] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return [path, None]
    return [
        path,
        st.st_dev,
        st.st_ino,
        st.st_mode,
        st.st_uid,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    ]


def _read(path: str) -> str | None:
    """A small file's text; None when it does not exist or cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace")
    except OSError:
        return None


def state(programs: Iterable[str | None], code: Iterable[str]) -> list[Any] | None:
    """What a probe of ``programs`` by ``code`` (its source files) depends on now, as plain data
    (see the module docstring); None when part of what must be read cannot be."""
    try:
        boot = _read("/proc/sys/kernel/random/boot_id")
        user_dir = "/proc/sys/user"
        limits = [[n, _read(os.path.join(user_dir, n))] for n in sorted(os.listdir(user_dir))]
        spaces = [[n, os.stat(f"/proc/self/ns/{n}").st_ino] for n in NAMESPACES]
        with open("/proc/self/status", "rb") as f:
            status = [
                line.decode("ascii", "replace").strip()
                for line in f
                if line.split(b":", 1)[0] in STATUS_FIELDS
            ]
    except OSError:
        return None
    if boot is None:
        return None
    return [
        FORMAT,
        [_identity(p) for p in programs],
        list(os.uname()),
        boot.strip(),
        limits,
        [[p, _read(p)] for p in SWITCHES],
        [os.getuid(), os.getgid(), sorted(os.getgroups())],
        spaces,
        status,
        [_identity(p) for p in code],
    ]


def load(path: str | None, now: list[Any] | None) -> dict[str, Any] | None:
    """The answer kept in ``path`` for exactly the state ``now``, else None."""
    if not path or now is None:
        return None
    data = read_own(path, MAX_BYTES)
    try:
        kept = json.loads(data) if data is not None else None
    except ValueError:
        return None
    if not isinstance(kept, dict) or kept.get("state") != now:
        return None
    answer = kept.get("answer")
    return answer if isinstance(answer, dict) else None


def save(path: str | None, now: list[Any] | None, answer: dict[str, Any]) -> None:
    """Keep ``answer`` for the state ``now`` in ``path`` (best effort: a file that cannot be
    written only means the next host probes)."""
    if not path or now is None:
        return
    with contextlib.suppress(OSError):
        write_own(path, json.dumps({"state": now, "answer": answer}).encode())


def forget(path: str | None) -> None:
    """Remove what was kept (a probe found otherwise)."""
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)
