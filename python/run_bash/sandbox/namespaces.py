"""The run's namespaces and mounts, built inside a spare child of the sandbox launcher's fork
server (``launcher.py``) before sandlock's supervisor starts: a mount namespace (inside a user
namespace of the user's own ids when unprivileged), the project's loopback-only network namespace
joined or made (``netholder.py``), the run's temp space bound on the temp dirs, the protected
paths bound read-only, denied paths covered, and every capability dropped. Single-threaded callers
only (``unshare(CLONE_NEWUSER)`` needs one).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from collections.abc import Sequence
from typing import Any

TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs f_flag bit -> mount flag: flags a user namespace may not clear on a remount.
_LOCKED_FLAGS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}
CAP_SYS_ADMIN = 21

libc = ctypes.CDLL(None, use_errno=True)


def check_rc(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, dst: str, flags: int, fstype: str = "", data: str = "") -> None:
    check_rc(
        libc.mount(
            os.fsencode(src) if src else None,
            os.fsencode(dst),
            fstype.encode() or None,
            ctypes.c_ulong(flags),
            data.encode() or None,
        ),
        f"mount {src or fstype} {dst}",
    )


def _locked_flags(path: str) -> int:
    """Flags of the mount holding ``path`` that a remount must keep (a user namespace may not clear
    them)."""
    f = os.statvfs(path).f_flag
    return sum(ms for st, ms in _LOCKED_FLAGS.items() if f & st)


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _cap_bits(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1], 16)
    return 0


def _holds_capabilities() -> bool:
    return any(_cap_bits(f) for f in ("CapPrm:", "CapEff:", "CapInh:", "CapAmb:"))


def _privileged() -> bool:
    return bool(_cap_bits("CapEff:") & (1 << CAP_SYS_ADMIN))


def join_netns(netns: Sequence[int]) -> None:
    """Join a project's network namespace ``(user ns fd, net ns fd)``. Its owner is a user
    namespace of this user: without privileges, joining that first gives the capabilities
    needed to join the network namespace."""
    if not _privileged():
        check_rc(libc.setns(netns[0], CLONE_NEWUSER), "setns(user namespace)")
    check_rc(libc.setns(netns[1], CLONE_NEWNET), "setns(network namespace)")


SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP = 0x1


def make_netns() -> list[int]:
    """Unshare a network namespace whose only interface is ``lo``, up, inside a user namespace
    of its own that maps the caller's ids to themselves (a privileged caller where user
    namespaces are forbidden: in the current one, whose descriptor fills the user slot;
    privileged joiners skip it); return descriptors of the two namespaces (user, network). They
    live while someone holds a descriptor or a process in them. In a child of the fork server,
    which exits right after (single-threaded, as ``unshare(CLONE_NEWUSER)`` needs)."""
    import fcntl
    import struct

    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        # Inside the new namespace nobody holds CAP_SETGID in the parent one, root included.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    else:
        err = ctypes.get_errno()
        if not _privileged() or libc.unshare(CLONE_NEWNET) != 0:
            raise OSError(
                err, f"user namespaces are not available to this user ({os.strerror(err)})"
            )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    return [
        os.open("/proc/self/ns/user", os.O_RDONLY | os.O_CLOEXEC),
        os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC),
    ]


def enter_namespaces(req: dict[str, Any], netns: Sequence[int]) -> int:
    """Unshare the run's mount namespace (and join the project's network namespace when ``netns``
    is ``(user ns fd, net ns fd)``), build its mounts and drop every capability. Returns a
    descriptor of the run's temp space (``build_mounts``)."""
    uid, gid = os.getuid(), os.getgid()
    privileged = _privileged()
    if privileged:
        check_rc(libc.unshare(CLONE_NEWNS), "unshare(mount namespace)")
        if netns:
            join_netns(netns)
    else:
        if netns:
            join_netns(netns)
        # A user namespace of our own maps the user's ids back to themselves (the joined one
        # maps them to 0, which would make tools inside act as root).
        outer_uid, outer_gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            err = ctypes.get_errno()
            where = (
                " inside run_bash's network namespace (it has no mapping for you)" if netns else ""
            )
            raise OSError(
                err,
                f"user namespaces are not available to this user{where} ({os.strerror(err)})",
            )
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {outer_uid} 1")
        _write("/proc/self/gid_map", f"{gid} {outer_gid} 1")
    _mount(None, "/", MS_REC | MS_PRIVATE)
    temp = build_mounts(req)
    if _holds_capabilities():
        from run_bash.sandbox.capabilities import drop_thread_capabilities

        drop_thread_capabilities()
    return temp


def build_mounts(req: dict[str, Any]) -> int:
    """The run's temp space (``tmp_data``: a size-limited tmpfs mounted on the private temp dir,
    ``tempfs.py``) bound on the three temp dirs, the granted paths under them (``reexpose``:
    ``("rw", path)`` or ``("ro", path)``), the binds (``binds``: ``("self", path)`` bound onto
    itself, ``("ro", path)`` read-only) and denied paths covered (``hide``). Returns an
    ``O_PATH`` descriptor of the temp space (its usage is measured when the run ends)."""
    if req.get("tmp_data"):
        _mount("run_bash-tmp", req["tmp"], MS_NOSUID | MS_NODEV, "tmpfs", req["tmp_data"])
    # Held open: once the first temp dir is covered, paths under it no longer resolve.
    private = os.open(req["tmp"], os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    kept: list[tuple[str, str, int]] = []
    for kind, path in req.get("reexpose", ()):
        with contextlib.suppress(FileNotFoundError):
            kept.append((kind, path, os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)))
    for t in TEMP_DIRS:
        if os.path.isdir(t) and not os.path.islink(t):
            _mount(f"/proc/self/fd/{private}", t, MS_BIND)
    for kind, path, fd in kept:
        src = f"/proc/self/fd/{fd}"
        if os.path.isdir(src):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        if kind == "ro":
            # Landlock's write grant of /tmp covers what is mounted below it: only the mount
            # flag keeps a read-only grant read-only here (not recursive: a mount below it
            # would stay writable, so none is brought along).
            _mount(src, path, MS_BIND)
            _mount(None, path, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(path))
        else:
            _mount(src, path, MS_BIND | MS_REC)
        os.close(fd)
    # In the given order: a path inside a ``.git`` directory lands on that directory's own mount.
    for kind, p in req.get("binds", ()):
        _mount(p, p, MS_BIND)
        if kind == "ro":
            _mount(None, p, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(p))
    # Denied paths inside granted trees: an empty read-only tmpfs over a directory, /dev/null
    # over anything else (every route to the path, /proc/self/root included, meets the mount).
    for p in req.get("hide", ()):
        if not os.path.lexists(p):
            continue  # nothing to hide (it lies under the private /tmp, or it is gone)
        if os.path.isdir(p):
            flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
            _mount("tmpfs", p, flags, "tmpfs", "mode=000,size=4k")
        else:
            _mount("/dev/null", p, MS_BIND)
            _mount(None, p, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(p))
    return private
