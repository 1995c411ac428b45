"""The run_bash host's start, which ``boot.py`` calls (``python boot.py`` from
``jobstart(..., {rpc = true})``).

Two processes come out of it:

* the **keeper** (the job Neovim started; ``run_bash.keeper``): a child subreaper that does nothing
  but wait. When the host exits — normally, by a crash, or by SIGKILL — every process the host left
  behind has been reparented to the keeper, which kills them all, removes the output and temp
  directories and exits. SIGTERM (``jobstop``) is forwarded to the host.
* the **host**: the msgpack-RPC end of the job channel (stdin/stdout; ``channel.py``). It is a
  subreaper too, so orphans of commands stay findable while it runs, and it sweeps its descendants on the way out
  (channel closed, VimLeavePre, SIGTERM, or Neovim's death).

The RPC channel is moved off fds 0 and 1 (they become /dev/null and stderr) so that nothing a command
inherits by accident can write into it.
"""

from __future__ import annotations

import gc
import os
import signal
import sys


class _Missing:
    """While the block runs, the modules named (those not imported yet) read as missing to an
    import; anything that imports them later gets them as usual. For modules a standard module
    loads when it can and the host never uses."""

    def __init__(self, *names: str) -> None:
        self.names = [name for name in names if name not in sys.modules]

    def __enter__(self) -> None:
        for name in self.names:
            sys.modules[name] = None  # type: ignore[assignment]

    def __exit__(self, *_exc: object) -> None:
        for name in self.names:
            del sys.modules[name]


# shutil imports bz2 and lzma for archive formats the host never makes (1 ms of its start).
with _Missing("bz2", "lzma"):
    import shutil

from run_bash import startup  # noqa: E402
from run_bash.sandbox import proc  # noqa: E402

startup.mark("interpreter")
# Until the keeper and the sandbox launcher are forked (``main``, ``host``), the host imports
# only what forking them needs: every page it holds when it forks is shared with the child, and
# copied at the host's next write to it (reference counts: most of them), a fault each.


def _setup_logging() -> None:
    import logging

    path = os.environ.get("RUN_BASH_LOG")
    level = os.environ.get("RUN_BASH_LOG_LEVEL", "INFO").upper()
    logger = logging.getLogger("run_bash")
    logger.setLevel(getattr(logging, level, logging.INFO))
    if path:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            handler: logging.Handler = logging.FileHandler(path)
        except OSError:
            handler = logging.StreamHandler(sys.stderr)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    # The loop's own reports (a task's exception nobody retrieved, a callback that raised) go to
    # the same log.
    loop_logger = logging.getLogger("asyncio")
    loop_logger.setLevel(logging.WARNING)
    loop_logger.addHandler(handler)
    loop_logger.propagate = False


def close_runs(state_dir: str) -> None:
    """Write the audit lines of runs that ended with the host (``journal.reconcile``)."""
    try:
        from run_bash.journal import reconcile

        reconcile(state_dir)
    except Exception as err:
        sys.stderr.write(f"run_bash: could not complete the audit log: {err}\n")


def remove_cgroups() -> None:
    """Remove the runs' cgroups this process made (``sandbox/cgroups.py``); those of a host that
    died are removed by the next one."""
    try:
        from run_bash.sandbox.cgroups import CGROUPS

        CGROUPS.close()
    except Exception as err:
        sys.stderr.write(f"run_bash: could not remove the runs' cgroups: {err}\n")


def keeper(host_pid: int, dirs: list[str]) -> None:
    """Wait for the host; then kill whatever it left behind and exit with its status. A host that
    crashed or was killed leaves open runs: they get their audit lines first. The runs of hosts
    that died with their keeper are closed once this host has started (``keep``'s ``later``)."""
    from run_bash.keeper import keep

    os._exit(keep(host_pid, dirs, on_end=lambda: close_runs(dirs[0]), later=reconcile_dead_hosts))


def host(dirs: list[str]) -> None:
    """Serve the RPC channel on the host's loop; clean up however it ends."""
    rpc_in = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.close(devnull)
    from run_bash.backends import named_at_start

    named = named_at_start(os.environ)
    # The sandbox launcher first (before this process imports more, and while it has one
    # thread), unless the options name no sandbox: then there would be nothing to launch.
    forked = start_launcher(sandlock=named != "bubblewrap") if named != "none" else None
    from run_bash import codecache

    codecache.install()  # before the first dataclass: their methods' code is kept between starts
    _setup_logging()
    import logging

    log = logging.getLogger("run_bash")
    if forked is not None:
        log.info("sandbox launcher: started with the host")
        log.info("sandbox launcher: fork server %d started (forked)", forked)
    elif named == "none":
        log.info("sandbox launcher: not started with the host")

    def on_term(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if named != "none":
        # While the host has one thread its descriptor table grows at once (prepared sandboxes
        # keep theirs high: spare.py). After the fork server's fork: its children copy its table.
        from run_bash.sandbox.spare import grow_fd_table

        grow_fd_table()
    startup.mark("fork")
    try:
        # asyncio imports ssl when it can (9 ms here); the host never speaks TLS.
        with _Missing("ssl"):
            import asyncio

            from run_bash_host import RunBashHost
            from run_bash_host.channel import Channel
    except Exception as err:
        sys.stderr.write(
            f"run_bash: Python {sys.version.split()[0]} ({sys.executable}) cannot load the host: "
            f"{err}. Run `make deps` in the plugin directory.\n"
        )
        os._exit(3)  # the keeper cleans up
    startup.mark("rpc")
    code = 0
    try:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        # The channel's write end moves off fd 1 (which becomes stderr), so that nothing a
        # command inherits by accident can write into it.
        rpc_out = os.dup(1)
        os.dup2(2, 1)
        channel = Channel(loop, rpc_in, rpc_out)
        channel.start(*RunBashHost(loop, channel.notify).handlers())
        # Until the channel closes: Neovim exited or stopped the job.
        loop.run_until_complete(channel.closed)
    except KeyboardInterrupt:
        pass
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else 1
    except Exception:
        import traceback

        traceback.print_exc(limit=5, file=sys.stderr)
        code = 1
    finally:
        proc.sweep_all_descendants(grace_s=0.3)
        close_runs(dirs[0])
        remove_cgroups()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    os._exit(code)


def start_launcher(sandlock: bool = True) -> int | None:
    """Fork the sandbox launcher's fork server now, without waiting for it
    (``serverfork.begin_early``): it imports what it serves with, and loads sandlock
    (``sandlock``: unless the options named bubblewrap), on the other core while this process
    imports asyncio and the host; the backend check before ``ready`` finds it up
    (``Launcher.ensure``). Its pid; None when it was not forked. Best effort: a failure is met
    again, and reported, where the launcher is needed."""
    try:
        from run_bash.sandbox import serverfork

        return serverfork.begin_early(sandlock)
    except Exception:
        return None


def reconcile_dead_hosts() -> None:
    """Hosts that died with their keeper left their state dirs: close their runs in the audit
    log (the keeper does it once the host has started)."""
    try:
        from run_bash.journal import reconcile_stale
        from run_bash.statedir import state_root

        reconcile_stale(state_root())
    except Exception as err:
        sys.stderr.write(f"run_bash: could not complete the audit log: {err}\n")


def main() -> None:
    proc.set_child_subreaper()
    from run_bash.statedir import make_state_dir, make_temp_root

    # Output files and run temp dirs (statedir.py); both go when the host ends, however it ends.
    dirs = [make_state_dir(), make_temp_root()]
    os.environ["RUN_BASH_STATE_DIR"], os.environ["RUN_BASH_TEMP_DIR"] = dirs
    keeper_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        from run_bash.keeper import become_worker

        # The keeper dying (e.g. SIGKILL) must not leave an orphaned host behind.
        if not become_worker(keeper_pid):
            os._exit(1)
        host(dirs)
    else:
        # (Collection was off for the start: see ``boot.py``.) What the start loaded is frozen
        # first: the keeper's first collection would otherwise walk every object of the start,
        # and write to (so copy) every page of the heap it shares with the host, on a CPU the
        # host's start needs.
        gc.freeze()
        gc.enable()
        # The keeper keeps no end of the RPC channel: only the host talks to Neovim.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)
        keeper(pid, dirs)
