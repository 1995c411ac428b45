"""A run's temp space: one size-limited tmpfs, seen inside as ``/tmp``, ``/var/tmp`` and ``/dev/shm``.

The kernel enforces the cap: once the filesystem holds its size, a write fails with ``ENOSPC``
("No space left on device"), however fast the writer and whether or not the file is still linked
(an unlinked file that is open keeps its blocks until it is closed). The three directories are one
filesystem, so the cap is for all three together. Both confining backends mount it in the run's
own mount namespace over the run's private temp dir (``sessions/tempspace.py``), then bind that on
the three directories; the host never sees it, and it goes away with the run's last process.

A tmpfs lives in memory (and swap): the cap is ``sandbox.limits.max_temp_size``, but never more
than half the memory available when the run starts (``MemAvailable`` + ``SwapFree``, rounded down
to a sixteenth: ``memory_share``), so one run cannot fill the machine's memory with files. Where
the run has a memory cgroup (``cgroups.py``), its temp files count against ``max_memory`` too. The number of files is capped
as well (one per ``BYTES_PER_INODE`` of the size): a tmpfs inode costs kernel memory that the size
does not count.
"""

from __future__ import annotations

import os

PAGE = 4096
MIN_SIZE = 1024 * 1024
BYTES_PER_INODE = 4096
MIN_INODES = 1024
# A temp space with less than this free when the run ends was full (writes failed).
FULL_MARGIN = 64 * 1024
# The mount is private to the run: nothing set-uid or a device node in it does anything.
MOUNT_OPTIONS = "nosuid,nodev"


def available_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """``MemAvailable`` + ``SwapFree`` in bytes; None when /proc/meminfo cannot tell. Read whole
    and searched (every sandbox asks, on a command's path too)."""
    try:
        with open(meminfo, "rb") as f:
            data = b"\n" + f.read()
    except OSError:
        return None
    available = _meminfo_kib(data, b"MemAvailable")
    if available is None:
        return None
    return (available + (_meminfo_kib(data, b"SwapFree") or 0)) * 1024


def _meminfo_kib(data: bytes, key: bytes) -> int | None:
    """The value of ``key`` in ``data`` (/proc/meminfo after a newline), in KiB."""
    at = data.find(b"\n" + key + b":")
    if at < 0:
        return None
    end = data.find(b"\n", at + 1)
    words = data[at + len(key) + 2 : end if end >= 0 else len(data)].split()
    return int(words[0]) if words and words[0].isdigit() else None


def memory_share(available: int) -> int:
    """Half of ``available``, rounded down to its top four bits (within a sixteenth below it):
    memory moves by a few pages all the time, and a size that moved with it would make every
    prepared sandbox (built with the size of a moment before) differ from the one a run gets."""
    half = available // 2
    step = 1 << max(20, half.bit_length() - 4)
    return half // step * step


def temp_size(limit: int, available: int | None = None) -> int:
    """The size of a run's temp space: ``limit`` (``max_temp_size``), at most half the memory
    available now (``memory_share``), rounded up to whole pages and at least ``MIN_SIZE``."""
    if available is None:
        available = available_memory()
    size = limit if available is None else min(limit, memory_share(available))
    size = max(MIN_SIZE, size)
    return (size + PAGE - 1) // PAGE * PAGE


def tmpfs_data(size: int) -> str:
    """The tmpfs mount data for a temp space of ``size`` bytes (owner-only root, capped files)."""
    inodes = max(MIN_INODES, size // BYTES_PER_INODE)
    return f"size={size},nr_inodes={inodes},mode=0700"


def full_notice(size: int) -> str:
    """What a run's result says when its temp space was full at its end."""
    from run_bash.statedir import human_size

    return (
        f"the run's temp space (/tmp, /var/tmp and /dev/shm together: {human_size(size)}, "
        "sandbox.limits.max_temp_size, held in memory) was full when the command ended: writes "
        'past it failed with "No space left on device"'
    )


def is_full(fd: int) -> bool:
    """Whether the temp space behind ``fd`` is (nearly) full: less than ``FULL_MARGIN`` free."""
    try:
        st = os.fstatvfs(fd)
    except OSError:
        return False
    return st.f_blocks > 0 and st.f_bavail * st.f_frsize < FULL_MARGIN
