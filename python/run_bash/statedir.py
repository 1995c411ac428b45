"""Where a host keeps its files: the output directory and the run temp directories.

Two directories per host, both mode 0700 and removed when the host ends (the keeper removes them
after a crash too):

* the **output directory** (``make_state_dir``): one file per session, under ``$XDG_RUNTIME_DIR``
  (private to the user, cleared at logout) or else the temp dir. Its total size is capped
  (``output.dir_cap``, never more than a quarter of its filesystem), so output cannot fill the
  small RAM filesystem ``$XDG_RUNTIME_DIR`` usually is.
* the **temp root** (``make_temp_root``): one private temp dir per run (its ``TMPDIR``), on a
  disk-backed filesystem (``/var/tmp``, else ``$XDG_CACHE_HOME/run_bash``), never on a RAM
  filesystem such as ``$XDG_RUNTIME_DIR``. Inside a sandbox each is only a mount point: the run's
  temp space is a size-limited tmpfs mounted on it in the run's own mount namespace
  (``sandbox/tempfs.py``), so nothing a sandboxed run writes to ``/tmp`` lands on this disk.

Neither directory is inside any sandbox grant (``/var/tmp``, ``$XDG_RUNTIME_DIR`` and the temp dir
are never granted by default); a run is given its own temp dir and nothing else of them.

``write_atomic`` writes the host's lasting files whole (the undo store's, the answers kept for the
next host); ``read_own`` and ``write_own`` read and write those answers, which only a file of the
user's own, that nobody else may write, is trusted for.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping

# Filesystems kept in memory: temp dirs never go there.
RAM_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
TEMP_ROOT_PREFIX = "run_bash-"
# A temp root left by a host that died with its keeper is removed by the next host after this long.
STALE_AFTER_S = 60.0


def state_root(base: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Where hosts make their output directories: ``$XDG_RUNTIME_DIR``, else the temp dir."""
    env = os.environ if environ is None else environ
    root = base or env.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    if not os.path.isdir(root) or not os.access(root, os.W_OK):
        root = tempfile.gettempdir()
    return root


def make_state_dir(base: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Create the 0700 output directory of this host (``run_bash-<pid>-…`` under ``state_root``:
    ``journal.reconcile_stale`` finds the ones whose process is gone)."""
    root = state_root(base, environ)
    path = tempfile.mkdtemp(prefix=f"run_bash-{os.getpid()}-", dir=root)
    os.chmod(path, 0o700)
    return path


def fs_type(path: str) -> str:
    """The filesystem type of the mount holding ``path`` ("" when unknown)."""
    real = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, right.split()[0]
    return kind


def temp_root_candidates(environ: Mapping[str, str] | None = None) -> list[str]:
    """Disk-backed places for run temp dirs, best first."""
    env = os.environ if environ is None else environ
    home = env.get("HOME") or os.path.expanduser("~")
    cache = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return ["/var/tmp", os.path.join(cache, "run_bash"), tempfile.gettempdir()]


def make_temp_root(environ: Mapping[str, str] | None = None) -> str:
    """Create this host's 0700 temp root on the first disk-backed candidate that works, after
    removing temp roots that hosts which died without their keeper left there."""
    candidates = temp_root_candidates(environ)
    for i, parent in enumerate(candidates):
        last = i == len(candidates) - 1
        if not last and fs_type(parent) in RAM_FILESYSTEMS:
            continue
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            sweep_stale(parent)
            path = tempfile.mkdtemp(prefix=f"{TEMP_ROOT_PREFIX}{os.getpid()}-", dir=parent)
        except OSError:
            if last:
                raise
            continue
        os.chmod(path, 0o700)
        return path
    raise OSError("no place for run temp dirs")  # pragma: no cover - the last candidate raises


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(parent: str) -> int:
    """Remove this user's temp roots in ``parent`` whose host is gone; return how many."""
    removed = 0
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return 0
    now = time.time()
    for entry in entries:
        name = entry.name
        if not name.startswith(TEMP_ROOT_PREFIX):
            continue
        pid_text = name[len(TEMP_ROOT_PREFIX) :].split("-", 1)[0]
        try:
            st = entry.stat(follow_symlinks=False)
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if not entry.is_dir(follow_symlinks=False) or st.st_uid != os.getuid():
            continue
        if now - st.st_mtime < STALE_AFTER_S or _pid_alive(pid):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += 1
    return removed


def fs_size(path: str) -> int:
    """Total size of the filesystem holding ``path`` (0 when unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_blocks * st.f_frsize


def human_size(n: int) -> str:
    """``n`` bytes as "512 KiB", "3.5 MiB", "4 GiB"."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            text = f"{value:.1f}".removesuffix(".0") if unit != "B" else str(int(value))
            return f"{text} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def write_atomic(path: str, data: bytes, tmp_dir: str | None = None) -> None:
    """Write ``data`` to ``path`` whole: a new file (mode 0600) made in ``tmp_dir`` (else
    ``path``'s directory, on the same filesystem) and renamed onto it. Raises OSError."""
    tmp = os.path.join(tmp_dir or os.path.dirname(path), "tmp-" + os.urandom(8).hex())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_own(path: str, limit: int) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of this user's that nobody else may write,
    of at most ``limit`` bytes (a symlink is not followed); else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022 or not stat.S_ISREG(st.st_mode):
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def write_own(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole (a new file, mode 0600, renamed onto it; its directory is
    made 0700 when missing). Raises OSError."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    write_atomic(path, data)
