"""Capabilities: drop every one of them before a sandbox is started.

sandlock runs drop them in the namespace launcher's run process (``launcher.py``), after the
mounts are built and before sandlock forks the command: bounding, inheritable, ambient, permitted and
effective sets all end empty, so neither bash nor a setuid program it runs gets any (no device nodes,
no mounts, no reading of files root could otherwise bypass permissions on). bubblewrap drops them
itself (``--cap-drop ALL``).
"""

from __future__ import annotations

import ctypes
import os

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
