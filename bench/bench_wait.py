"""Waiting on output (`wait_for`, `wait`): how soon a matching line reaches Lua, what waiting
sessions cost the host while nothing happens, and what matching costs on a flood of output.

``run() -> list[dict]`` (rows ``{"name", "value", "unit", "goal", "note"}``) for ``bench/run.py``;
also runnable alone: ``python bench/bench_wait.py``. Everything goes through a real Neovim and the
host, with the "none" backend (the sandbox is not what is measured here).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT / "python", ROOT / "bench", ROOT):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

Row = dict[str, Any]

# The command prints the line with its CLOCK_MONOTONIC time, the clock of vim.uv.hrtime().
STAMP = "python3 -c 'import time; print(\"READY\", time.monotonic_ns(), flush=True)'"

LUA_READY_LATENCY = """
local spec = ...
local got
require('run_bash').run(spec, function(r) got = { vim.uv.hrtime(), r } end)
vim.wait(30000, function() return got ~= nil end, 1)
local r = got[2]
assert(r.ready == 'matched', vim.inspect(r))
local written = tonumber(r.matched_line:match('READY (%d+)'))
-- Keep the session from ending while we look: kill it afterwards.
local killed
require('run_bash').kill(r.id, function() killed = true end)
vim.wait(10000, function() return killed end, 5)
return (got[1] - written) / 1e6
"""

LUA_WAIT_LATENCY = """
local cmd = ...
local rb = require('run_bash')
local started
rb.run({ cmd = cmd, bg_after = 10, wait_for = '^up$', unsandboxed_ok = true },
  function(r) started = r end)
vim.wait(10000, function() return started ~= nil end, 1)
local got
local _, err = rb.wait(started.id, { wait_for = '^READY', timeout = 30 },
  function(reply) got = { vim.uv.hrtime(), reply } end)
assert(not err, err)
vim.wait(30000, function() return got ~= nil end, 1)
local w = got[2].result
assert(w and w.outcome == 'matched', vim.inspect(got[2]))
local written = tonumber(w.matched_line:match('READY (%d+)'))
local killed
rb.kill(started.id, function() killed = true end)
vim.wait(10000, function() return killed end, 5)
return (got[1] - written) / 1e6
"""

LUA_START_WAITERS = """
local n = ...
local rb = require('run_bash')
local ids, started = {}, 0
for _ = 1, n do
  local info = assert(rb.run({ cmd = 'echo up; exec sleep 300', bg_after = 10, wait_for = '^up$',
                               unsandboxed_ok = true }, function() started = started + 1 end))
  table.insert(ids, info.id)
end
vim.wait(20000, function() return started == n end, 5)
_G.__waits = {}
for _, id in ipairs(ids) do
  assert(rb.wait(id, { wait_for = 'never matches', timeout = 60 },
    function(reply) table.insert(_G.__waits, reply) end))
end
return ids
"""

LUA_FLOOD = """
local spec = ...
local done
local t = vim.uv.hrtime()
require('run_bash').run(spec, function(r) done = r end)
vim.wait(600000, function() return done ~= nil end, 5)
return { (vim.uv.hrtime() - t) / 1e6, done.output_bytes, done.ready or '' }
"""


def host_process(nvim: Any) -> Any:
    import psutil

    keeper = psutil.Process(nvim.funcs.jobpid(nvim.exec_lua("return require('run_bash')._job()")))
    return keeper.children()[0]


LUA_SETUP_NONE = """
require('run_bash').setup({ sandbox = { backend = 'none' }, sessions = { max_background = 64 } })
"""
LUA_SETUP_SANDLOCK = """
require('run_bash').setup({ sandbox = { backend = 'sandlock' }, sessions = { max_background = 64 },
  undo = { enabled = false } })
"""


def sandlock_works() -> bool:
    from run_bash.config import parse_config
    from run_bash.sandbox.base import get_backend

    return get_backend("sandlock", parse_config({})).availability().ok


def idle_row(nvim: Any, host: Any, name: str, note: str = "") -> Row:
    """Host CPU over 5 s while 16 background sessions each have a `wait` pending."""
    ids = nvim.exec_lua(LUA_START_WAITERS, 16)
    settled = settle(host)
    load = os.getloadavg()[0]
    c0, t0 = cpu_s(host), time.monotonic()
    time.sleep(5)
    c1, t1 = cpu_s(host), time.monotonic()
    pending = 16 - len(nvim.exec_lua("return _G.__waits"))
    for sid in ids:
        nvim.exec_lua("require('run_bash').kill(...)", sid)
    return {
        "name": name,
        "value": 100 * (c1 - c0) / (t1 - t0),
        "unit": "%",
        "goal": "~ 0",
        "note": f"{c1 - c0:.3f} s CPU in 5 s (10 ms ticks); {pending} waits pending; "
        f"load average {load:.2f} on {os.cpu_count()} CPUs; measured once the host's work "
        f"from earlier rows had ended ({settled:.1f} s after the starts)"
        + (f"; {note}" if note else ""),
    }


def settle(host: Any, quiet_s: float = 0.5, limit_s: float = 10.0) -> float:
    """Wait until the host has used no CPU for ``quiet_s`` (what earlier rows' runs left to do,
    their change sets and clean-up, is done), at most ``limit_s``; the seconds waited."""
    t0 = time.monotonic()
    last, quiet_since = cpu_s(host), t0
    while time.monotonic() - t0 < limit_s:
        time.sleep(0.1)
        now = cpu_s(host)
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            break
    return time.monotonic() - t0


def cpu_s(proc: Any) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def run() -> list[Row]:
    from run import attach  # bench/run.py

    rows: list[Row] = []
    nvim = attach()
    try:
        nvim.exec_lua(LUA_SETUP_NONE)
        spec = {
            "cmd": f"sleep 0.2; {STAMP}; exec sleep 60",
            "bg_after": 30,
            "wait_for": r"^READY \d+$",
            "unsandboxed_ok": True,
        }
        nvim.exec_lua(LUA_READY_LATENCY, spec)  # warm up
        ready = [nvim.exec_lua(LUA_READY_LATENCY, spec) for _ in range(20)]
        rows.append(
            {
                "name": "wait_for: line written -> result in Lua",
                "value": statistics.median(ready),
                "unit": "ms",
                "goal": "< 20 ms",
                "note": f"median of 20; max {max(ready):.2f} ms",
            }
        )
        cmd = f"echo up; sleep 0.3; {STAMP}; exec sleep 60"
        waits = [nvim.exec_lua(LUA_WAIT_LATENCY, cmd) for _ in range(20)]
        rows.append(
            {
                "name": "wait: line written -> reply in Lua",
                "value": statistics.median(waits),
                "unit": "ms",
                "goal": "< 20 ms",
                "note": f"median of 20; max {max(waits):.2f} ms",
            }
        )

        host = host_process(nvim)
        rows.append(idle_row(nvim, host, "16 sessions waiting: host CPU while idle"))
        if sandlock_works():
            nvim.exec_lua(LUA_SETUP_SANDLOCK)
            rows.append(
                idle_row(
                    nvim,
                    host,
                    "16 sandboxed (sandlock) sessions waiting: host CPU while idle",
                    "forwarding asks each project's namespace once a second",
                )
            )
            nvim.exec_lua(LUA_SETUP_NONE)

        # Matching on a flood: 100 MB of 2-byte lines with a pattern that never matches.
        flood = "yes | head -c 100M"
        base_spec = {"cmd": flood, "bg_after": 60, "unsandboxed_ok": True}
        c0 = cpu_s(host)
        plain_ms, nbytes, _ = nvim.exec_lua(LUA_FLOOD, base_spec)
        plain_cpu = cpu_s(host) - c0
        for label, pattern in (
            ("block search", "Listening on"),
            ("line by line", r"\AListening on"),  # \A keeps it to one line at a time
        ):
            c0 = cpu_s(host)
            ms, _, ready = nvim.exec_lua(LUA_FLOOD, {**base_spec, "wait_for": pattern})
            cpu = cpu_s(host) - c0
            rows.append(
                {
                    "name": f"100 MB of 2-byte lines, wait_for ({label})",
                    "value": cpu,
                    "unit": "s CPU",
                    "goal": "",
                    "note": f"without wait_for {plain_cpu:.2f} s CPU; wall {ms:.0f} ms vs "
                    f"{plain_ms:.0f} ms; {nbytes} bytes; ready={ready}",
                }
            )
    finally:
        with contextlib.suppress(Exception):
            nvim.command("qa!")
        with contextlib.suppress(Exception):
            nvim.close()
    return rows


if __name__ == "__main__":
    for r in run():
        value = r["value"]
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        goal = f"  (goal {r['goal']})" if r.get("goal") else ""
        print(f"{r['name']:<52} {shown:>10} {r['unit']}{goal}  — {r['note']}")
