"""The keeper: the process that outlives everything run_bash starts and cleans up after it.

Used by the Neovim host (``rplugin/python3/run_bash_host/start.py``) and by ``python -m run_bash
sandbox``, so both give the same lifetime guarantees:

* ``fork_kept(work)`` forks. The child (the *worker*: the host, or the command line's run) gets a
  parent-death signal (SIGTERM) and becomes a child subreaper, so orphans of commands stay findable
  while it runs and it can sweep them however it ends. This process becomes the *keeper*: also a
  subreaper, it only waits. When the worker exits — normally, by a crash or by SIGKILL — whatever
  it left behind has been reparented to the keeper, which kills it all, removes the state
  directories and returns the worker's status. SIGTERM and SIGHUP to the keeper are forwarded to
  the worker; SIGINT is left to the worker (a terminal sends it to both).
* When the keeper itself is killed (SIGKILL of the process the user started), the worker gets
  SIGTERM from the kernel and stops its command and everything below it.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import time
from collections.abc import Callable, Sequence

from run_bash.sandbox import proc

# How long a worker has to start before the keeper does its own deferred work (``keep``'s
# ``later``): on two cores the host's start shares them with the sandbox launcher and Neovim.
LATER_S = 2.0


def keep(
    worker_pid: int,
    dirs: Sequence[str] = (),
    on_end: Callable[[], None] | None = None,
    later: Callable[[], None] | None = None,
) -> int:
    """Wait for the worker; then kill whatever it left behind, call ``on_end`` (before ``dirs``
    go: e.g. the audit lines of runs that ended with a crashed host), remove ``dirs`` and return
    its exit status (128+N when it was killed by signal N). ``later`` is called once the worker
    has run for ``LATER_S``, or when it ends before that (work that is not urgent, kept off the
    worker's start)."""

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(worker_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGHUP, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if later is not None:
        _wait_for(worker_pid, LATER_S)
        later()
    status = 0
    while True:
        try:
            pid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == worker_pid:
            status = os.waitstatus_to_exitcode(st)
            break
    proc.sweep_all_descendants(grace_s=0.5)
    if on_end is not None:
        on_end()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    # Reap what the sweep killed so nothing lingers as a zombie of ours.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.01)
    return status if status >= 0 else 128 - status


def _wait_for(pid: int, timeout_s: float) -> None:
    """Return when process ``pid`` ends or after ``timeout_s``, whichever is first (it is not
    reaped: ``keep``'s loop does that)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return  # gone already (or no pidfds here): at once
    try:
        select.select([fd], [], [], timeout_s)  # signals: handled, and the wait goes on
    except OSError:
        pass
    finally:
        os.close(fd)


def become_worker(keeper_pid: int) -> bool:
    """In the forked worker: die with the keeper (SIGTERM) and adopt orphans. False when the keeper
    is already gone (the worker should stop at once)."""
    proc.set_parent_death_signal(signal.SIGTERM)
    proc.set_child_subreaper()
    return os.getppid() == keeper_pid


def fork_kept(work: Callable[[], int], dirs: Sequence[str] = ()) -> int:
    """Run ``work()`` in a worker under a keeper (see the module docstring); return its status.
    ``work`` runs in the child, which exits with its result and never returns here."""
    proc.set_child_subreaper()
    keeper_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 125
        try:
            if become_worker(keeper_pid):
                code = work()
        except BaseException:
            import traceback

            traceback.print_exc(limit=5)
        finally:
            os._exit(code)
    return keep(pid, dirs)
