"""Start many run_bash hosts and report each one's first bubblewrap run and what outlived them.

``python hosts_driver.py N CONCURRENCY`` (run by ``test_netns_holder.py``): the driver is a child
subreaper; each host is a forked child that builds its own ``SessionManager`` (so its own network
namespace holder, as a new Neovim's host would), runs ``echo`` under bubblewrap, reports the result
and exits, every tenth one by SIGKILL of itself right after its result. Then every process still
below the driver is something a host left behind. Prints one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time

from run_bash.config import parse_config
from run_bash.sandbox import proc
from run_bash.sessions import SessionManager

# The shared namespace's loopback is up: a connection to a port nothing listens on is refused
# ("Network is unreachable" when lo is down).
# How long what a host left behind may take to die before it counts as having outlived it.
DYING_S = 2.0
FIRST_RUN = (
    "(exec 3<>/dev/tcp/127.0.0.1/9) 2>&1 | grep -q 'Connection refused' && echo first-run-ok"
)


def live_below() -> list[int]:
    """The driver's descendants that are not zombies."""
    return [p for p in proc.descendants(os.getpid()) if not proc.is_zombie(p)]


def host(index: int, out_fd: int, root: str) -> None:
    async def first_run() -> dict[str, object]:
        loop = asyncio.get_running_loop()
        project = os.path.join(root, "proj")
        state = tempfile.mkdtemp(prefix="state-", dir=root)
        mgr = SessionManager(
            parse_config({"sandbox": {"backend": "bubblewrap"}}), loop=loop, state_dir=state
        )
        try:
            s = mgr.start(FIRST_RUN, cwd=project)
            r = await asyncio.wait_for(mgr.wait_result(s.id), 60)
            report = {"i": index, "output": r.output, "exit": r.exit_code, "notices": r.notices}
            os.write(out_fd, (json.dumps(report) + "\n").encode())
            if index % 10 == 9:
                os.kill(os.getpid(), signal.SIGKILL)  # a host that dies without cleaning up
            return report
        finally:
            await mgr.shutdown()

    asyncio.run(first_run())


def main() -> None:
    n, concurrency = int(sys.argv[1]), int(sys.argv[2])
    proc.set_child_subreaper()
    # Everything the hosts write (their state dirs, the project) is under one dir, removed at the
    # end.
    root = tempfile.mkdtemp(prefix="hosts-driver-")
    os.mkdir(os.path.join(root, "proj"))
    r, w = os.pipe()
    running: set[int] = set()
    started = time.monotonic()
    for i in range(n):
        while len(running) >= concurrency:
            pid, _ = os.wait()
            running.discard(pid)
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                host(i, w, root)
            finally:
                os._exit(0)
        running.add(pid)
    os.close(w)
    while running:
        pid, _ = os.wait()
        running.discard(pid)
    with os.fdopen(r) as f:
        reports = [json.loads(line) for line in f if line.strip()]
    # Whatever is still below the driver outlived its host (orphans are reparented here). What
    # the kernel is still killing (a holder's PR_SET_PDEATHSIG) gets until DYING_S to be gone.
    deadline = time.monotonic() + DYING_S
    while live_below() and time.monotonic() < deadline:
        time.sleep(0.01)
    left = []
    for pid in live_below():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        left.append({"pid": pid, "cmd": cmd, "tag": proc.session_tag(pid)})
    for item in left:
        try:
            os.kill(item["pid"], signal.SIGKILL)
        except OSError:
            pass
    proc.sweep_all_descendants(grace_s=0.2)
    shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"reports": reports, "left": left, "seconds": time.monotonic() - started}))


if __name__ == "__main__":
    main()
