"""Change sets through the host: what recording a run's changes adds to a run, end to end.

A real Neovim and host run ``echo … >> one file`` in a project with ``:RunBash``'s Lua API (request
to result, as the agent's tool does), first with ``undo.enabled = false``, then with it on: the
first run in the project (it reads every file), warm runs with a pause between them (a chat turn:
the store's check of the previous run's end happens meanwhile), and warm runs back to back. The
added latency is the median with undo on minus the median with it off. Beside each, the host's CPU
time per run (user + system, its threads included): on a loaded machine the wall time is mostly
waiting for a core, the CPU time is not. Also the store's growth per run. Backend ``none``: a
sandbox costs the same with and without undo, and adds noise.
``run()`` returns rows for ``bench/run.py``; run this file directly to print them.
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
WARM_RUNS = 30
PAUSE_S = 0.3


def host_cpu_ms(nvim: Any) -> float:
    """CPU time the host process has used so far (ms)."""
    import psutil

    keeper = psutil.Process(nvim.funcs.jobpid(nvim.exec_lua("return require('run_bash')._job()")))
    t = keeper.children()[0].cpu_times()
    return (t.user + t.system) * 1000


def runs(nvim: Any, project: str, n: int, tag: str, pause_s: float = 0.0) -> list[float]:
    """``n`` runs that each append to one file; ms from request to result."""
    out = []
    for i in range(n):
        if pause_s:
            time.sleep(pause_s)
        spec = {
            "cmd": f"echo '{tag} {i}' >> pkg1/mod1/file41.py",
            "cwd": project,
            "unsandboxed_ok": True,
        }
        ms, result = nvim.exec_lua(LUA_RUN_WAIT, spec)
        assert result.get("exit_code") == 0, result
        changes = result.get("changes")
        if tag.startswith("on"):
            assert changes and changes["paths"] == ["M pkg1/mod1/file41.py"], changes
        else:
            assert changes is None, changes
        out.append(ms)
    return out


def setup(nvim: Any, enabled: bool) -> None:
    nvim.exec_lua(
        "require('run_bash').setup(...); assert(require('run_bash').request('sessions'))",
        {"sandbox": {"backend": "none"}, "undo": {"enabled": enabled}},
    )


def measure(files: int, total_bytes: int, n: int, long_pause_s: float = 0.0) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="run_bash-bench-undo-")
    state = os.path.join(work, "state")
    os.makedirs(state)
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = state
    nvim = None
    try:
        project = os.path.join(work, "project")
        make_project(project, files, total_bytes)
        store = os.path.join(state, "nvim", "run_bash", "undo")  # stdpath("state")/run_bash/undo
        nvim = attach()
        setup(nvim, False)
        c0 = host_cpu_ms(nvim)
        off = runs(nvim, project, n, "off")
        off_cpu = (host_cpu_ms(nvim) - c0) / n
        setup(nvim, True)
        c0 = host_cpu_ms(nvim)
        first = runs(nvim, project, 1, "on-first")[0]
        time.sleep(1.0 + files / 10_000)  # the check of the first run's end
        first_cpu = host_cpu_ms(nvim) - c0
        size0 = du(store)
        c0 = host_cpu_ms(nvim)
        paused = runs(nvim, project, n, "on-paused", PAUSE_S)
        time.sleep(1.0 + files / 10_000)  # the check of the last run's end counts too
        paused_cpu = (host_cpu_ms(nvim) - c0) / n
        growth = (du(store) - size0) / n
        back = runs(nvim, project, n, "on-back")
        # Turns far enough apart for the check of each end to be over before the next start.
        slow = runs(nvim, project, max(3, n // 2), "on-slow", long_pause_s) if long_pause_s else []
        setup(nvim, False)
        off2 = runs(nvim, project, n, "off2")
        off_all = off + off2
        return {
            "off": statistics.median(off_all),
            "off_cpu": off_cpu,
            "first": first,
            "first_cpu": first_cpu,
            "paused": statistics.median(paused),
            "paused_cpu": paused_cpu,
            "paused_p90": sorted(paused)[int(len(paused) * 0.9) - 1],
            "back": statistics.median(back),
            "slow": statistics.median(slow) if slow else None,
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
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    for label, files, size, n, long_pause in (
        ("5,000 files / 50 MB", 5000, 50_000_000, WARM_RUNS, 0.0),
        ("50,000 files / 100 MB", 50_000, 100_000_000, 15, 3.0),
    ):
        m = measure(files, size, n, long_pause)
        small = files == 5000
        off = m["off"]
        rows += [
            {
                "name": f"host, {label}: run with undo off",
                "value": off,
                "unit": "ms",
                "goal": "",
                "note": f"request to result, median of {2 * n}; load average {load}",
            },
            {
                "name": f"host, {label}: first run, added",
                "value": m["first"] - off,
                "unit": "ms",
                "goal": "< 1000 ms" if small else "",
                "note": f"{m['first']:.0f} ms in all: the first snapshot reads every file; host "
                f"CPU {m['first_cpu'] - m['off_cpu']:.0f} ms (with the check that follows)",
            },
            {
                "name": f"host, {label}: warm run, added",
                "value": m["paused"] - off,
                "unit": "ms",
                "goal": "< 25 ms median" if small else "",
                "note": f"median {m['paused']:.1f} ms vs {off:.1f} ms off, p90 "
                f"{m['paused_p90']:.1f} ms; {PAUSE_S} s between runs; host CPU per run "
                f"{m['paused_cpu']:.1f} ms vs {m['off_cpu']:.1f} ms off (the check included)",
            },
            {
                "name": f"host, {label}: runs back to back, added",
                "value": m["back"] - off,
                "unit": "ms",
                "goal": "",
                "note": f"median {m['back']:.1f} ms: each start waits for the check of the "
                "previous end",
            },
            *(
                [
                    {
                        "name": f"host, {label}: warm run, {long_pause:.0f} s apart, added",
                        "value": m["slow"] - off,
                        "unit": "ms",
                        "goal": "",
                        "note": f"median {m['slow']:.1f} ms: the check of the previous end is over",
                    }
                ]
                if m["slow"] is not None
                else []
            ),
            {
                "name": f"host, {label}: store growth per 1-file run",
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
        print(f"{r['name']:<52} {r['value']:>9.2f} {r['unit']}{goal}  — {r['note']}")
