"""`make bench`: run every benchmark and print one table, with ratios against plain `bash -c`.

Numbers are printed, never asserted: these machines are noisy. Sections: host (cold start, RPC round
trip), coldstart (a fresh Neovim's first run until its result, bench_coldstart.py), runtime (end-to-end `true`, a 200 MB output flood, 50 background sessions), and the checker,
sandbox, host-read set, change-store and waiting benchmarks in bench_checker.py / bench_sandbox.py /
bench_hostread.py / bench_changes.py / bench_wait.py, and change sets through the host with undo on and off in bench_undo.py, and one
run broken down by stage per backend, with and without prepared sandboxes, in bench_fastpath.py
(`make bench ARGS=fastpath` runs that section alone).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "bench"), str(ROOT)]

Row = dict[str, Any]


def nvim_bin() -> str:
    out = subprocess.run([str(ROOT / "scripts" / "nvim-path")], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("no Neovim >= 0.11: run `make deps`")
    return out.stdout.strip()


def plain_bash_ms(n: int = 50) -> float:
    """Median wall time of `bash -c true` started from Python."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], check=True)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def attach() -> Any:
    import pynvim

    return pynvim.attach(
        "child",
        argv=[
            nvim_bin(),
            "--clean",
            "--embed",
            "--headless",
            "-n",
            "--cmd",
            f"set rtp^={ROOT}",
            "-c",
            "runtime plugin/run_bash.lua",
        ],
    )


LUA_RUN_WAIT = """
local spec = ...
local done
local t = vim.uv.hrtime()
local info, err = require('run_bash').run(spec, function(r) done = r end)
if not info then error(err) end
vim.wait(600000, function() return done ~= nil end, 1)
return { (vim.uv.hrtime() - t) / 1e6, done }
"""

# A 10 ms timer that measures the main loop's worst gap; `stop_stall()` returns it in ms.
LUA_STALL_TIMER = """
local worst, last = 0, vim.uv.hrtime()
local timer = vim.uv.new_timer()
timer:start(10, 10, function()
  local now = vim.uv.hrtime()
  worst = math.max(worst, (now - last) / 1e6 - 10)
  last = now
end)
local function stop_stall() timer:stop(); timer:close(); return worst end
"""

LUA_STALL = (
    LUA_STALL_TIMER
    + """
-- Run a command while the timer watches the main loop.
local spec = ...
local done
local t = vim.uv.hrtime()
require('run_bash').run(spec, function(r) done = r end, spec.live and function() end or nil)
vim.wait(600000, function() return done ~= nil end, 5)
return { (vim.uv.hrtime() - t) / 1e6, stop_stall(), done.output_bytes }
"""
)


LUA_BUFFER_STALL = (
    LUA_STALL_TIMER
    + """
-- Like LUA_STALL, but the output goes to a live :RunBash buffer, as a user sees it.
local cmd = ...
local t = vim.uv.hrtime()
local info = require('run_bash.commands').start_in_buffer(cmd, { unsandboxed_ok = true })
vim.wait(600000, function()
  local s = require('run_bash').sessions[info.id]
  return s ~= nil and s.output ~= nil
end, 5)
local worst = stop_stall()
local buf = vim.fn.bufnr('run_bash://' .. info.id)
return { (vim.uv.hrtime() - t) / 1e6, worst, vim.api.nvim_buf_line_count(buf) }
"""
)


def vm_hwm_kib(pid: int) -> int:
    """Peak resident set size (VmHWM) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def host_rows(base_ms: float) -> list[Row]:
    rows: list[Row] = []
    # Baseline: a Neovim that spawns one process through vim.fn.system.
    nv = nvim_bin()
    base = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run(
            [nv, "--clean", "--headless", "-c", "lua vim.fn.system('true')", "-c", "qa!"],
            check=True,
        )
        base.append((time.perf_counter() - t) * 1000)
    colds, rtts = [], []
    for _ in range(5):
        nvim = attach()
        try:
            t = time.perf_counter()
            nvim.exec_lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
            nvim.exec_lua("assert(require('run_bash').request('sessions'))")
            colds.append((time.perf_counter() - t) * 1000)
            rt = nvim.exec_lua(
                """
                local chan = require('run_bash')._job()
                local t = vim.uv.hrtime()
                for _ = 1, 2000 do vim.rpcrequest(chan, 'run_bash.ping') end
                return (vim.uv.hrtime() - t) / 1e6 / 2000
                """
            )
            rtts.append(rt)
        finally:
            with contextlib.suppress(Exception):
                nvim.command("qa!")
            with contextlib.suppress(Exception):
                nvim.close()
    rows.append(
        {
            "name": "host cold start to first answered RPC",
            "value": statistics.median(colds),
            "unit": "ms",
            "goal": "< 150 ms",
            "note": f"baseline nvim -c 'lua vim.fn.system(\"true\")' = "
            f"{statistics.median(base):.1f} ms (whole editor run)",
        }
    )
    rows.append(
        {
            "name": "RPC round trip (ping)",
            "value": statistics.median(rtts),
            "unit": "ms",
            "goal": "< 0.2 ms",
            "note": "",
        }
    )
    return rows


def runtime_rows(base_ms: float) -> list[Row]:
    rows: list[Row] = []
    nvim = attach()
    try:
        nvim.exec_lua(
            "require('run_bash').setup({ sandbox = { backend = 'none' },"
            " sessions = { max_background = 64 } })"
        )
        spec = {"cmd": "true", "unsandboxed_ok": True}
        nvim.exec_lua(LUA_RUN_WAIT, spec)  # warm up
        times = [nvim.exec_lua(LUA_RUN_WAIT, spec)[0] for _ in range(50)]
        e2e = statistics.median(times)
        rows.append(
            {
                "name": ":RunBash true end to end (none backend)",
                "value": e2e,
                "unit": "ms",
                "goal": "<= 3x plain bash",
                "note": f"plain bash -c true = {base_ms:.2f} ms; ratio {e2e / base_ms:.2f}x",
            }
        )

        from run_bash.sandbox.base import CONFINING_BACKENDS

        for backend in CONFINING_BACKENDS:
            nvim.exec_lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)
            verdict = nvim.exec_lua("return require('run_bash').check('true')")
            if not verdict.get("sandboxed"):
                continue
            sspec = {"cmd": "true"}
            nvim.exec_lua(LUA_RUN_WAIT, sspec)
            stimes = [nvim.exec_lua(LUA_RUN_WAIT, sspec)[0] for _ in range(20)]
            se2e = statistics.median(stimes)
            rows.append(
                {
                    "name": f":RunBash true end to end ({backend})",
                    "value": se2e,
                    "unit": "ms",
                    "goal": "<= 2.5x plain bash" if backend == "sandlock" else "",
                    "note": f"ratio {se2e / base_ms:.1f}x; request to result through the host",
                }
            )
        nvim.exec_lua(
            "require('run_bash').setup({ sandbox = { backend = 'none' },"
            " sessions = { max_background = 64 } })"
        )

        t = time.perf_counter()
        subprocess.run(["bash", "-c", "yes | head -c 200M > /dev/null"], check=True)
        plain_flood = (time.perf_counter() - t) * 1000
        host_pid = nvim.funcs.jobpid(nvim.exec_lua("return require('run_bash')._job()"))
        import psutil

        host = psutil.Process(host_pid).children()[0]
        flood_spec = {"cmd": "yes | head -c 200M", "unsandboxed_ok": True, "live": True}
        ms, stall, nbytes = nvim.exec_lua(LUA_STALL, flood_spec)
        hwm_kib = vm_hwm_kib(host.pid)
        rows.append(
            {
                "name": "yes | head -c 200M: main-loop max stall",
                "value": stall,
                "unit": "ms",
                "goal": "< 50 ms",
                "note": f"{nbytes} bytes captured",
            }
        )
        rows.append(
            {
                "name": "yes | head -c 200M: host peak RSS",
                "value": hwm_kib / 1024,
                "unit": "MiB",
                "goal": "< 150 MiB",
                "note": "VmHWM of the host process over its whole life",
            }
        )
        buf_ms, buf_stall, buf_lines = nvim.exec_lua(LUA_BUFFER_STALL, "yes | head -c 50M")
        rows.append(
            {
                "name": "yes | head -c 50M into the :RunBash buffer: max stall",
                "value": buf_stall,
                "unit": "ms",
                "goal": "< 50 ms",
                "note": f"wall {buf_ms:.0f} ms; buffer kept {buf_lines} lines",
            }
        )
        rows.append(
            {
                "name": "yes | head -c 200M: wall time",
                "value": ms,
                "unit": "ms",
                "goal": "",
                "note": f"bash -c '... > /dev/null' = {plain_flood:.0f} ms; "
                f"ratio {ms / plain_flood:.2f}x",
            }
        )

        many = nvim.exec_lua(
            LUA_STALL_TIMER
            + """
            local rb = require('run_bash')
            local t = vim.uv.hrtime()
            local pending = 50
            for i = 1, 50 do
              local ok, err = rb.run(
                { cmd = 'setsid sleep 300 & sleep 300', bg_after = 0.2, unsandboxed_ok = true },
                function() pending = pending - 1 end)
              if not ok then error(err) end
            end
            vim.wait(60000, function() return pending == 0 end, 5)
            local listed = 0
            for _, s in ipairs(rb.sessions_list()) do
              if s.status == 'running' then listed = listed + 1 end
            end
            local killed
            rb.kill(nil, function(reply) killed = reply end)
            vim.wait(60000, function() return killed ~= nil end, 5)
            return { (vim.uv.hrtime() - t) / 1e6, stop_stall(), listed }
            """
        )
        time.sleep(0.5)
        survivors = []
        for p in host.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if p.name() == "sleep" and p.status() != psutil.STATUS_ZOMBIE:
                    survivors.append(p)
        rows.append(
            {
                "name": "50 background sessions: start+list+kill",
                "value": many[0],
                "unit": "ms",
                "goal": "",
                "note": f"{many[2]} listed as running",
            }
        )
        rows.append(
            {
                "name": "50 background sessions: main-loop max stall",
                "value": many[1],
                "unit": "ms",
                "goal": "< 50 ms",
                "note": "",
            }
        )
        rows.append(
            {
                "name": "50 background sessions: survivors after kill",
                "value": len(survivors),
                "unit": "",
                "goal": "0",
                "note": "",
            }
        )
    finally:
        with contextlib.suppress(Exception):
            nvim.command("qa!")
        with contextlib.suppress(Exception):
            nvim.close()
    return rows


def main() -> int:
    only = set(sys.argv[1:])
    base_ms = plain_bash_ms()
    sections: list[tuple[str, Any]] = [
        ("host", lambda: host_rows(base_ms)),
        ("runtime", lambda: runtime_rows(base_ms)),
    ]
    for name in (
        "bench_coldstart",
        "bench_checker",
        "bench_sandbox",
        "bench_hostread",
        "bench_changes",
        "bench_undo",
        "bench_history",
        "bench_wait",
        "bench_fastpath",
    ):
        if (ROOT / "bench" / f"{name}.py").exists():
            mod = importlib.import_module(name)
            sections.append((name.removeprefix("bench_"), mod.run))
    print(f"plain `bash -c true` from Python: {base_ms:.2f} ms (median of 50)\n")
    for name, fn in sections:
        if only and name not in only:
            continue
        print(f"== {name}")
        try:
            rows = fn()
        except Exception as err:  # one broken section must not hide the others
            print(f"   failed: {err}")
            continue
        for r in rows:
            value = r["value"]
            shown = f"{value:.3f}" if isinstance(value, float) else str(value)
            goal = f"  (goal {r['goal']})" if r.get("goal") else ""
            note = f"  — {r['note']}" if r.get("note") else ""
            print(f"   {r['name']:<48} {shown:>10} {r.get('unit', '')}{goal}{note}")
        print()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RUN_BASH_BENCH", "1")
    sys.exit(main())
