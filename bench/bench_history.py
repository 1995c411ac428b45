"""A long session: host RSS, open files and Neovim's RSS over 1,000 runs through the host.

The host keeps ``sessions.keep_finished`` (100) finished sessions; past that, memory and open files
must stay flat. Printed: the values after 100 and 1,000 runs and the slope over runs 200-1,000 (a
least-squares line through samples every 100 runs), per 100 runs.

``run() -> list[dict]`` for ``bench/run.py``; also runnable alone: ``python bench/bench_history.py``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT / "python", ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

Row = dict[str, Any]
RUNS = 1000
EVERY = 100

LUA_RUNS = """
local n, spec = ...
local rb = require('run_bash')
for _ = 1, n do
  local done
  local info, err = rb.run(spec, function(r) done = r end)
  if not info then error(err) end
  vim.wait(60000, function() return done ~= nil end, 1)
end
collectgarbage()
local count = 0
for _ in pairs(rb.sessions) do count = count + 1 end
return count
"""


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of (x, y) points, per EVERY x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var * EVERY if var else 0.0


def history_rows(backend: str) -> list[Row]:
    import psutil
    from run import attach

    nvim = attach()
    try:
        nvim.exec_lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)
        verdict = nvim.exec_lua("return require('run_bash').check('true')")
        if backend != "none" and not verdict.get("sandboxed"):
            return []
        spec = {"cmd": "echo hello", "unsandboxed_ok": backend == "none"}
        host_pid = (
            psutil.Process(nvim.funcs.jobpid(nvim.exec_lua("return require('run_bash')._job()")))
            .children()[0]
            .pid
        )
        nvim_pid = nvim.funcs.getpid()
        samples: list[tuple[int, int, int, int, int]] = []
        done = 0
        while done < RUNS:
            mirrored = nvim.exec_lua(LUA_RUNS, EVERY, spec)
            done += EVERY
            samples.append(
                (done, rss_kib(host_pid), open_files(host_pid), rss_kib(nvim_pid), mirrored)
            )
    finally:
        with contextlib.suppress(Exception):
            nvim.command("qa!")
        with contextlib.suppress(Exception):
            nvim.close()
    late = [s for s in samples if s[0] >= 2 * EVERY]
    first, last = samples[0], samples[-1]
    rows = [
        {
            "name": f"{RUNS} runs ({backend}): host RSS slope",
            "value": slope([(s[0], s[1]) for s in late]),
            "unit": "KiB/100 runs",
            "goal": "~0 (flat)",
            "note": f"RSS {first[1] / 1024:.1f} MiB after {first[0]}, "
            f"{last[1] / 1024:.1f} MiB after {last[0]}",
        },
        {
            "name": f"{RUNS} runs ({backend}): host open files slope",
            "value": slope([(s[0], s[2]) for s in late]),
            "unit": "fds/100 runs",
            "goal": "0",
            "note": f"{first[2]} open after {first[0]}, {last[2]} after {last[0]}",
        },
        {
            "name": f"{RUNS} runs ({backend}): Neovim RSS slope",
            "value": slope([(s[0], s[3]) for s in late]),
            "unit": "KiB/100 runs",
            "goal": "~0 (flat)",
            "note": f"RSS {first[3] / 1024:.1f} MiB after {first[0]}, "
            f"{last[3] / 1024:.1f} MiB after {last[0]}; Lua mirror holds {last[4]} sessions",
        },
    ]
    return rows


def run() -> list[Row]:
    from run_bash.config import parse_config
    from run_bash.sandbox.base import get_backend

    rows = history_rows("none")
    if get_backend("sandlock", parse_config({})).availability().ok:
        rows += history_rows("sandlock")
    return rows


if __name__ == "__main__":
    for r in run():
        print(f"{r['name']:<48} {r['value']:>10.1f} {r['unit']}  — {r['note']}")
