"""Change sets through the host: what recording a run's changes adds to a run, end to end.

A real Neovim and host run commands in a git project of 5,000 and of 50,000 files with
``:RunBash``'s Lua API (request to result, as the agent's tool does), under a confining backend
(sandlock when it works here, else bubblewrap), each series beside the same runs with
``undo.enabled = false``:

* ``true`` back to back, and 1 s apart (a run that changes nothing must not walk the project);
* the first run in the project with undo on (it reads every file);
* ``echo … >> one file`` runs, for the store's growth per run.

The added latency is the median with undo on minus the median with it off. Beside it, the host's
CPU time per run (user + system, its threads included): on a loaded machine the wall time is
mostly waiting for a core, the CPU time is not. ``run()`` returns rows for ``bench/run.py``; run
this file directly to print them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "bench")]

from bench_changes import du, make_project  # noqa: E402
from run import LUA_RUN_WAIT, attach  # noqa: E402

Row = dict[str, Any]
RUNS = 20
APART_S = 1.0


def backend_here() -> str:
    from run_bash.config import parse_config
    from run_bash.sandbox.base import get_backend

    for name in ("sandlock", "bubblewrap"):
        if get_backend(name, parse_config({})).availability().ok:
            return name
    return "none"


def host_cpu_ms(nvim: Any) -> float:
    """CPU time the host process has used so far (ms)."""
    import psutil

    keeper = psutil.Process(nvim.funcs.jobpid(nvim.exec_lua("return require('run_bash')._job()")))
    t = keeper.children()[0].cpu_times()
    return (t.user + t.system) * 1000


def runs(nvim: Any, project: str, cmds: list[str], pause_s: float = 0.0) -> list[float]:
    """Each command in turn; ms from request to result."""
    out = []
    for cmd in cmds:
        if pause_s:
            time.sleep(pause_s)
        spec = {"cmd": cmd, "cwd": project, "approved": True, "unsandboxed_ok": True}
        ms, result = nvim.exec_lua(LUA_RUN_WAIT, spec)
        assert result.get("exit_code") == 0, result
        out.append(ms)
    return out


def setup(nvim: Any, backend: str, enabled: bool) -> None:
    nvim.exec_lua(
        "require('run_bash').setup(...); assert(require('run_bash').request('sessions'))",
        {"sandbox": {"backend": backend}, "undo": {"enabled": enabled}},
    )


def measure(files: int, total_bytes: int, n: int, backend: str) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="run_bash-bench-undo-")
    state = os.path.join(work, "state")
    os.makedirs(state)
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = state
    nvim = None
    trues = ["true"] * n
    edits = [f"echo 'edit {i}' >> pkg1/mod1/file41.py" for i in range(n)]
    try:
        project = os.path.join(work, "project")
        make_project(project, files, total_bytes)
        store = os.path.join(state, "nvim", "run_bash", "undo")  # stdpath("state")/run_bash/undo
        nvim = attach()
        setup(nvim, backend, False)
        runs(nvim, project, ["true"] * 3)  # the backend's first run (its fork server) out of it
        setup(nvim, backend, True)
        c0 = host_cpu_ms(nvim)
        first = runs(nvim, project, ["true"])[0]
        first_cpu = host_cpu_ms(nvim) - c0
        time.sleep(1.0 + files / 20_000)  # the snapshot is written when the project is quiet
        # Undo on and off in alternating blocks, so that the machine's drift (a shared machine's
        # load comes and goes) falls on both sides alike.
        off_back: list[float] = []
        back: list[float] = []
        off_cpu = back_cpu = 0.0
        block = max(2, n // 4)
        for _ in range(4):
            for enabled, out in ((False, off_back), (True, back)):
                setup(nvim, backend, enabled)
                c0 = host_cpu_ms(nvim)
                out += runs(nvim, project, trues[:block])
                spent = host_cpu_ms(nvim) - c0
                if enabled:
                    back_cpu += spent
                else:
                    off_cpu += spent
        off_cpu /= len(off_back)
        back_cpu /= len(back)
        off_apart: list[float] = []
        apart: list[float] = []
        for _ in range(2):
            for enabled, out in ((False, off_apart), (True, apart)):
                setup(nvim, backend, enabled)
                out += runs(nvim, project, trues[:3], APART_S)
        setup(nvim, backend, True)
        time.sleep(1.0 + files / 20_000)
        size0 = du(store)
        edit = runs(nvim, project, edits)
        time.sleep(1.0 + files / 20_000)
        growth = (du(store) - size0) / n
        off_edit: list[float] = []
        edit = []
        for k in range(4):
            for enabled, out in ((False, off_edit), (True, edit)):
                setup(nvim, backend, enabled)
                cmds = [f"echo '{k} {i}' >> pkg1/mod1/file41.py" for i in range(block)]
                out += runs(nvim, project, cmds)
        return {
            "off_back": statistics.median(off_back),
            "off_apart": statistics.median(off_apart),
            "off_cpu": off_cpu,
            "first": first,
            "first_cpu": first_cpu,
            "back": statistics.median(back),
            "back_p90": sorted(back)[int(len(back) * 0.9) - 1],
            "back_cpu": back_cpu,
            "apart": statistics.median(apart),
            "edit": statistics.median(edit),
            "off_edit": statistics.median(off_edit),
            "growth": growth,
            "store0": size0,
        }
    finally:
        if nvim is not None:
            with contextlib.suppress(Exception):
                nvim.command("qa!")
            with contextlib.suppress(Exception):
                nvim.close()
        if old is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = old
        shutil.rmtree(work, ignore_errors=True)


def run() -> list[Row]:
    rows: list[Row] = []
    backend = backend_here()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    for label, files, size, goal in (
        ("5,000 files / 50 MB", 5000, 50_000_000, 10),
        ("50,000 files / 100 MB", 50_000, 100_000_000, 20),
    ):
        m = measure(files, size, RUNS, backend)
        small = files == 5000
        pre = f"host, {backend}, {label}"
        rows += [
            {
                "name": f"{pre}: `true` with undo off",
                "value": m["off_back"],
                "unit": "ms",
                "goal": "",
                "note": f"request to result, median of {RUNS} back to back (in blocks alternating "
                f"with undo on); {APART_S:.0f} s apart {m['off_apart']:.1f} ms; load average {load}",
            },
            {
                "name": f"{pre}: `true` back to back, added",
                "value": m["back"] - m["off_back"],
                "unit": "ms",
                "goal": f"<= {goal} ms",
                "note": f"median {m['back']:.1f} ms (p90 {m['back_p90']:.1f}) vs {m['off_back']:.1f}"
                f" ms off; host CPU per run {m['back_cpu']:.1f} ms vs {m['off_cpu']:.1f} ms off",
            },
            {
                "name": f"{pre}: `true` {APART_S:.0f} s apart, added",
                "value": m["apart"] - m["off_apart"],
                "unit": "ms",
                "goal": "",
                "note": f"median {m['apart']:.1f} ms vs {m['off_apart']:.1f} ms off (the check "
                "and the snapshot's write happen in between)",
            },
            {
                "name": f"{pre}: first run, added",
                "value": m["first"] - m["off_back"],
                "unit": "ms",
                "goal": "< 1000 ms" if small else "",
                "note": f"{m['first']:.0f} ms in all: the first snapshot reads every file; host "
                f"CPU {m['first_cpu']:.0f} ms",
            },
            {
                "name": f"{pre}: 1-file edit, added",
                "value": m["edit"] - m["off_edit"],
                "unit": "ms",
                "goal": "",
                "note": f"median {m['edit']:.1f} ms vs {m['off_edit']:.1f} ms off",
            },
            {
                "name": f"{pre}: store growth per 1-file run",
                "value": m["growth"] / 1024,
                "unit": "KiB",
                "goal": "",
                "note": f"store after the first run {m['store0'] / 1e6:.1f} MB",
            },
        ]
    return rows


if __name__ == "__main__":
    for r in run():
        goal = f"  (goal {r['goal']})" if r.get("goal") else ""
        print(f"{r['name']:<60} {r['value']:>9.2f} {r['unit']}{goal}  — {r['note']}")
