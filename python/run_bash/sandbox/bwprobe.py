"""Where bubblewrap and its helpers are, and the probe of what they can do here.

The probe runs real sandboxes: ``bwrap --version``, a bwrap sandbox running ``true`` (can this
user create namespaces here?) and the run's own pid namespace around one (``RUN_INIT``: is there a
per-run process cap?). ``auto`` asks bubblewrap first, on the host's way to ``ready``: run one
after another the three took 18-21 ms here, so they are started together (``Probe``), about 8 ms
sooner done, and before the pause list's checker loads (``start``, from ``Service.preload``), so
that they run while it does: about 10 ms off ``ready``. (Started as the host boots instead, they
competed with its imports and the launcher's for the two cores, and ``ready`` came no sooner.)
The answer is kept per host for the same programs (``result``): every ``setup()`` makes new
backend objects. One that found bwrap working is also kept for later hosts (``probekept``): a
host that finds the same programs and system state takes it and runs no probe, about 20 ms off
a cold start's first result here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache, lru_cache
from typing import Any

from run_bash.sandbox import probekept, seccomp, tempfs
from run_bash.sandbox.base import Availability
from run_bash.sandbox.proc import bash_path
from run_bash.sandbox.tempfs import MIN_SIZE, tmpfs_data

# The one place that finds bwrap. ``RUN_BASH_BWRAP`` names the binary to use instead of the one on
# PATH; set to an empty string it hides bubblewrap from run_bash altogether (the test suite runs
# once that way, as on a machine without it).
BWRAP_ENV = "RUN_BASH_BWRAP"
PROBE_TIMEOUT_S = 10.0


@lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    """The bwrap binary run_bash uses, or None."""
    chosen = os.environ.get(BWRAP_ENV)
    if chosen is not None:
        return chosen if chosen and os.access(chosen, os.X_OK) else None
    return shutil.which("bwrap") or (
        "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None
    )


@cache
def util_linux(name: str) -> str | None:
    """A util-linux tool (``nsenter``, ``prlimit``, ``unshare``): the system's own first, then
    whatever ``PATH`` has."""
    for p in (f"/usr/bin/{name}", f"/bin/{name}"):
        if os.access(p, os.X_OK):
            return p
    return shutil.which(name)


def nsenter_path() -> str | None:
    return util_linux("nsenter")


def prlimit_path() -> str | None:
    return util_linux("prlimit")


def mount_path() -> str | None:
    return util_linux("mount")


def unshare_path() -> str | None:
    return util_linux("unshare")


# Each run starts in a pid namespace of its own (``unshare --pid --fork``) whose first process
# becomes bwrap. Two things follow. The run ends, for the host, only when its whole namespace is
# gone (the kernel kills every process of a namespace whose pid 1 exits and only then lets pid 1
# be reaped), so nothing of the run can be mistaken for a leftover. And the namespace has its own
# ``pid_max`` (Linux >= 6.14): the run's processes (threads count) are capped per run, for root
# too, where RLIMIT_NPROC never applies. ``ns_last_pid`` is set to RESERVED_PIDS first: the kernel
# hands out pids below that only once, so every pid the run gets comes from RESERVED_PIDS..pid_max
# and the cap is exact (pid_max = RESERVED_PIDS + max_processes + 1 for bwrap's own init).
RESERVED_PIDS = 300
PID_MAX_LIMIT = 4194304
PID_CAP_KERNEL = (6, 14)
# The run's first process (pid 1 of its namespace; before bwrap when there is none), then bwrap:
# ``sh -c RUN_INIT run_bash-init PID_MAX LAST_PID TMPFS_DATA DIR MOUNT CGROUP_PROCS… -- bwrap …``.
# It moves itself into the run's cgroups (``cgroups.py``: everything the run starts is inside),
# mounts the run's temp space on its private dir (``tempfs.py``; in the run's own mount namespace,
# unseen by the host), caps the namespace's pids, and becomes bwrap. "-" skips a step.
RUN_INIT = (
    'cap=$1 last=$2 data=$3 dir=$4 mnt=$5; shift 5; while [ "$1" != -- ]; do echo 0 > "$1" || '
    '{ echo "run_bash: cannot join the cgroup of this run" >&2; exit 125; }; shift; done; shift; '
    'if [ "$data" != - ]; then "$mnt" -t tmpfs -o "nosuid,nodev,$data" run_bash-tmp "$dir" || '
    '{ echo "run_bash: cannot mount the temp space of this run" >&2; exit 125; }; fi; '
    'if [ "$cap" != - ]; then echo "$cap" > /proc/sys/kernel/pid_max && '
    'echo "$last" > /proc/sys/kernel/ns_last_pid || '
    '{ echo "run_bash: cannot cap the processes of this run" >&2; exit 125; }; fi; exec "$@"'
)


def kernel_has_pid_cap(release: str | None = None) -> bool:
    """Whether ``pid_max`` is per pid namespace here (Linux >= 6.14). Before that, writing it
    from a new namespace as root would change the whole machine's value: never attempted."""
    text = release if release is not None else os.uname().release
    parts = text.split(".")
    try:
        version = (int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0))
    except (IndexError, ValueError):
        return False
    return version >= PID_CAP_KERNEL


def pid_max_for(max_processes: int) -> int:
    """The run namespace's ``pid_max`` that lets its command have ``max_processes`` processes."""
    return min(PID_MAX_LIMIT, RESERVED_PIDS + max_processes + 1)


# -- the probe ---------------------------------------------------------------------------------------

# What the probe found (``result``): whether bwrap works here (why not, what to do, its
# version), the pid mode runs use ("capped", "plain" or ""), and why runs are not capped per run
# when they are not.
Found = tuple[Availability, str, str]
Key = tuple[str | None, str | None, str | None]
# What the probe found, by (bwrap, bash, unshare) path: every ``setup()`` makes new backend
# objects, and the probe is made once per host for the same programs.
FOUND: dict[Key, Found] = {}


def key() -> Key:
    return (bwrap_path(), bash_path(), unshare_path())


def _start(
    argv: list[str], env: dict[str, str] | None = None, fd: int = -1
) -> subprocess.Popen[str] | str:
    """A probe command started (stdout and stderr captured; ``fd`` passed on when >= 0), or why
    it could not start."""
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            close_fds=True,
            pass_fds=(fd,) if fd >= 0 else (),
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)


def _finish(proc: subprocess.Popen[str] | str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a probe command; 127 with the reason when it did not
    start or did not end in time (it is killed then)."""
    if isinstance(proc, str):
        return 127, "", proc
    try:
        out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return 127, "", f"no answer in {PROBE_TIMEOUT_S:.0f} s"
    return proc.returncode, out or "", err or ""


def _last_line(err: str, code: int) -> str:
    lines = err.strip().splitlines()
    return lines[-1] if lines else f"exit {code}"


class Probe:
    """The probe's commands, started together; ``result`` waits for them (once)."""

    def __init__(self, bwrap: str) -> None:
        self.version = _start([bwrap, "--version"])
        self.sandbox = [
            bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        # The runs' seccomp filter too (``seccomp.py``): a bwrap that cannot install it is not
        # used (bubblewrap 0.5 or newer can).
        try:
            flt = seccomp.program_fd()
        except OSError as e:  # runs could not have it either
            self.basic: subprocess.Popen[str] | str = f"cannot make the seccomp filter: {e}"
        else:
            seccomp_args = ["--add-seccomp-fd", str(flt)] if flt >= 0 else []
            try:
                self.basic = _start([*self.sandbox, *seccomp_args, "true"], fd=flt)
            finally:
                if flt >= 0:
                    os.close(flt)
        self.dir = ""
        self.tries: list[tuple[str, list[str]]] = []
        self.why = "" if kernel_has_pid_cap() else "Linux < 6.14 has no per-namespace pid_max"
        self.note = ""  # set when the pid namespace cannot be tried at all
        self.first: subprocess.Popen[str] | str | None = None
        self._pid_tries()

    def _pid_tries(self) -> None:
        """Start the first way of running in a pid namespace of its own (the others wait)."""
        unshare = unshare_path()
        if unshare is None:
            self.note = "unshare not found (util-linux): no per-run process cap"
            return
        mount = mount_path()
        if mount is None:
            self.note = "mount not found (util-linux): no pid namespace or temp space per run"
            return
        base = [unshare]
        ids: list[str] = []
        if os.getuid() != 0:
            base += ["--user", "--map-root-user"]
            ids = ["--uid", str(os.getuid()), "--gid", str(os.getgid())]
        base += ["--pid", "--fork", "--kill-child", "--mount-proc", "--"]
        self.dir = tempfile.mkdtemp(prefix="run_bash-probe-")
        data = tmpfs_data(MIN_SIZE)
        sandbox = [*self.sandbox[:1], *ids, *self.sandbox[1:], "true"]
        if kernel_has_pid_cap():
            cap = [str(pid_max_for(16)), str(RESERVED_PIDS)]
            init = ["/bin/sh", "-c", RUN_INIT, "run_bash-init", *cap, data, self.dir, mount, "--"]
            self.tries.append(("capped", [*base, *init, *sandbox]))
        init = ["/bin/sh", "-c", RUN_INIT, "run_bash-init", "-", "-", data, self.dir, mount, "--"]
        self.tries.append(("plain", [*base, *init, *sandbox]))
        self.first = _start(self.tries[0][1], env={"PATH": "/usr/bin:/bin"})

    def _pid_mode(self) -> tuple[str, str]:
        """The pid mode runs use and, when it is not "capped", why."""
        if self.note:
            return "", self.note
        why = self.why
        for i, (mode, argv) in enumerate(self.tries):
            proc = self.first if i == 0 else _start(argv, env={"PATH": "/usr/bin:/bin"})
            assert proc is not None
            code, _out, err = _finish(proc)
            if code == 0:
                return mode, "" if mode == "capped" else f"no per-run process cap ({why})"
            why = _last_line(err, code)
        return "", f"no pid namespace or temp space of its own per run ({why})"

    def result(self) -> Found:
        try:
            _c, version, _e = _finish(self.version)
            version = version.strip()
            code, _out, err = _finish(self.basic)
            if code != 0:
                if self.first is not None:
                    _finish(self.first)
                why = _last_line(err, code)
                if isinstance(self.basic, str):
                    failed = Availability(
                        False, f"bwrap failed to run: {why}", "check the bwrap install", version
                    )
                    return failed, "", ""
                cannot = Availability(
                    False,
                    f"bwrap cannot create namespaces: {why}",
                    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
                    "on Ubuntu an AppArmor profile for bwrap) or use the sandlock backend",
                    version,
                )
                return cannot, "", ""
            mode, note = self._pid_mode()
            return Availability(True, version=version), mode, note
        finally:
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)


# Probes started ahead (``start``), by the programs they probe, until ``result`` takes them.
STARTED: dict[Key, Probe] = {}


def _state(k: Key) -> list[Any] | None:
    """What the probe's answer for ``k`` depends on now (``probekept.state``)."""
    code = [os.path.abspath(m.__file__ or "") for m in (sys.modules[__name__], seccomp, tempfs)]
    return probekept.state([*k, mount_path(), "/bin/sh"], code)


# The state each probe's answer depends on, read before the probe ran (``_known``), until the
# answer is kept for it (``result``).
READ: dict[Key, list[Any] | None] = {}


def _known(k: Key) -> Found | None:
    """The answer for ``k`` found by this host, or kept from an earlier one for exactly the
    state found now (``probekept``: a working bwrap only). The state read first is what a
    probe's answer is kept for."""
    found = FOUND.get(k)
    if found is None and k[0] is not None and k[1] is not None:
        if k not in READ:
            READ[k] = _state(k)
        kept = probekept.load(os.environ.get(probekept.FILE_ENV), READ[k])
        try:
            if kept is not None and kept["mode"] in ("capped", "plain", ""):
                version, mode, note = str(kept["version"]), kept["mode"], str(kept["note"])
                found = FOUND[k] = Availability(True, version=version), mode, note
                READ.pop(k, None)
        except (KeyError, TypeError):
            pass
    return found


def start() -> None:
    """Start the probe of the programs found now without waiting for it: its sandboxes run
    while the host loads what runs need, and ``result`` then finds them done. An answer kept
    for the state found now (``_known``) starts none."""
    k = key()
    bwrap, bash, _unshare = k
    if bwrap is not None and bash is not None and k not in STARTED and _known(k) is None:
        STARTED[k] = Probe(bwrap)


def result() -> Found:
    """What the probe found for the programs found now (probed on the first call, or by the
    probe ``start`` began for them, or kept from an earlier host for the same state). A probe's
    answer is kept for later hosts when bwrap works, and what was kept goes when it does not."""
    k = key()
    found = _known(k)
    if found is not None:
        return found
    bwrap, bash, _unshare = k
    if bwrap is None:
        why = "install bubblewrap (apt/dnf/pacman install bubblewrap)"
        found = Availability(False, "bwrap not found", why), "", ""
    elif bash is None:
        found = Availability(False, "bash not found", "install bash"), "", ""
    else:
        found = (STARTED.pop(k, None) or Probe(bwrap)).result()
        path, read = os.environ.get(probekept.FILE_ENV), READ.pop(k, None)
        if found[0].ok:
            answer = {"version": found[0].version, "mode": found[1], "note": found[2]}
            probekept.save(path, read, answer)
        else:
            probekept.forget(path)
    FOUND[k] = found
    return found
