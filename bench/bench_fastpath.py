"""One run broken down by stage, per backend, through a real headless Neovim.

``require("run_bash").run({cmd = "true"})`` until its result callback, against
``vim.system({"bash", "-c", "true"}):wait()`` in the same Neovim (the two alternate, so the
machine's drift falls on both), the median of ``RUNS`` after ``WARMUP`` runs, in a small scratch
project and in a 5,000-file git project with undo on. The stages come from the run's own result
(``timing``: the host's ``time.monotonic()`` marks, the clock of ``vim.uv.hrtime()``), so they
time the product's own path:

* RPC: Lua's call until the host's ``run`` handler;
* gate: the pause list and the approval decision;
* snapshot: until the project's snapshot is taken (the change store; with undo off, the queue);
* policy: building the policy (with the hop to the worker thread), without the host-read set;
* host-read set: what the host reads later from the project (``hostread.py``);
* guard: its trusted states and watches (``guard.py``);
* claim: taking the prepared sandbox, once it is shown to be exactly the run's (``spares.py``);
* spawn: the run's files and the backend's start until it has a pid (or the command handed to
  the prepared sandbox);
* exec: until the command's root exits (the backend's set-up that is left, bash, ``true``);
* then, from the exit until the result is made, each of what that waits for: reap (the root's
  exit status: sandlock's comes from its supervisor), sweep (what the command left behind, and
  the end of its output), post-run check (the files the host reads, ``Keeper.finish``), change
  set (with undo on) and result (the result itself);
* result to Lua: until Lua's callback has the result.

``first byte`` (of ``echo``'s output, the median of ``ECHO_RUNS`` paced as the series) is printed
beside them, and the CPU time per run of the host and of what it started (``cpu_ms``: the
sandboxes' processes, the fork server), and of the whole machine (``machine_ms``: kernel threads
too, such as those tearing namespaces down; with the ``vim.system`` bash beside each run): back to
back on a machine of few cores, that total over the CPUs, and not the wait, bounds the rate.
Last, the
commands an agent runs most (``EVERYDAY``: git status, ls -R, find, grep -r in the 5,000-file
project), end to end against the same command through ``vim.system``: what a backend adds to each
file system call shows there. With a
prepared sandbox (``sandbox.prepare``), the note says how many runs took one, and how many had
the next one made beside them as soon as they started (``spares.core_free``: a core was free;
on a loaded machine it is made later, and runs back to back wait for it). ``run()`` returns
rows for ``bench/run.py``; run this file directly to print them.
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

from bench_changes import make_project  # noqa: E402
from run import attach  # noqa: E402

Row = dict[str, Any]
RUNS = 40
WARMUP = 5
# Runs of `echo x` whose first byte is timed (the median is printed).
ECHO_RUNS = 5
BIG_FILES = 5000

LUA_PAIR = """
local spec = ...
local t = vim.uv.hrtime()
vim.system({ "bash", "-c", "true" }):wait()
local bash_ms = (vim.uv.hrtime() - t) / 1e6
local done, t_cb
local t0 = vim.uv.hrtime()
local info, err = require('run_bash').run(spec, function(r)
  done = r
  t_cb = vim.uv.hrtime()
end)
if not info then error(err) end
vim.wait(600000, function() return done ~= nil end, 1)
return { bash_ms, t0 / 1e9, t_cb / 1e9, done }
"""

# An everyday command end to end, against the same command through ``vim.system`` bash.
LUA_CMD = """
local spec = ...
local t = vim.uv.hrtime()
vim.system({ "bash", "-c", spec.cmd }, { cwd = spec.cwd }):wait()
local bash_ms = (vim.uv.hrtime() - t) / 1e6
local done
local t0 = vim.uv.hrtime()
local info, err = require('run_bash').run(spec, function(r) done = r end)
if not info then error(err) end
vim.wait(600000, function() return done ~= nil end, 1)
return { bash_ms, (vim.uv.hrtime() - t0) / 1e6, done.exit_code }
"""
# What an agent runs most, in the 5,000-file project: each walks the tree or reads every file,
# so what a backend adds to a file system call shows here, not in `true`.
EVERYDAY = (
    "git status --short",
    "ls -R >/dev/null",
    "find . -type f | wc -l",
    "grep -r zzz . | wc -l",
)
EVERYDAY_RUNS = 5

# (label, mark it ends at); each stage runs from the previous mark present to its own.
STAGES = (
    ("RPC", "rpc"),
    ("gate", "gate"),
    ("snapshot", "snapshot"),
    ("policy", "prepare"),
    ("host-read set", "hostread"),
    ("policy", "policy"),
    ("guard", "guard"),
    ("claim", "claimed"),
    ("spawn", "spawned"),
    ("spawn", "took_spare"),
    ("exec", "exit"),
    ("reap", "reaped"),
    ("sweep", "swept"),
    ("sweep", "drained"),
    ("post-run check", "checked"),
    ("change set", "changes"),
    ("result", "result"),
)
# The stages in the order they come, each once (a label may end at one of several marks).
ORDER = tuple(dict.fromkeys(label for label, _mark in STAGES))
# Seconds between two measured runs (RUN_BASH_BENCH_GAP): an agent's turn between commands.
GAP = float(os.environ.get("RUN_BASH_BENCH_GAP", "0"))


def breakdown(t0: float, t_cb: float, marks: dict[str, float]) -> dict[str, float]:
    """Milliseconds per stage of one run (stages whose marks are missing fold into the next)."""
    out = dict.fromkeys((*ORDER, "result to Lua"), 0.0)
    prev = t0
    for label, mark in STAGES:
        at = marks.get(mark)
        if at is None:
            continue
        out[label] += (at - prev) * 1000
        prev = at
    out["result to Lua"] = (t_cb - prev) * 1000
    out["total"] = (t_cb - t0) * 1000
    return out


def setup(nvim: Any, backend: str, undo: bool, prepare: bool = True) -> None:
    nvim.exec_lua(
        "require('run_bash').setup(...); assert(require('run_bash').request('sessions'))",
        {"sandbox": {"backend": backend, "prepare": prepare}, "undo": {"enabled": undo}},
    )


# How each confining backend is measured: (label, sandbox.prepare, seconds between runs). With
# preparation off every run builds its sandbox (the path before #23); back to back, the next
# run's sandbox is still being made when it comes; with a pause (an agent's turn between two
# commands is seconds long) it is ready.
MODES = (
    ("prepare off", False, 0.0),
    ("prepared, back to back", True, 0.0),
    ("prepared, 0.1 s apart", True, 0.1),
)

# ``none`` has no sandbox to prepare: measured back to back and with the same pause.
NONE_MODES = (("back to back", True, 0.0), ("0.1 s apart", True, 0.1))


def cpu_ms(host: Any) -> tuple[float, float]:
    """CPU time (ms) of the host process itself, and of what it started: its children that
    ended (the sandboxes' processes it reaped) and those still there (the fork server, with the
    runs it reaped). Processes still running, or not reaped yet, are not in it: for sandlock,
    whose runs end under the fork server, the second figure is a floor."""
    import psutil

    t = host.cpu_times()
    kids = t.children_user + t.children_system
    for c in host.children():
        with contextlib.suppress(psutil.Error):
            k = c.cpu_times()
            kids += k.user + k.system + k.children_user + k.children_system
    return (t.user + t.system) * 1000, kids * 1000


def machine_ms() -> float:
    """CPU time (ms) the whole machine has spent busy (every CPU, every process and kernel thread:
    ``/proc/stat``), so far: what bounds commands back to back on a machine of few cores. Busy is
    user, nice, system, irq and softirq time; idle, iowait and a virtual machine's steal time
    (its CPUs running something else) are not."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = ticks
    return (user + nice + system + irq + softirq) * 1000 / os.sysconf("SC_CLK_TCK")


def series(nvim: Any, project: str, backend: str, gap: float = GAP) -> dict[str, Any]:
    from bench_wait import host_process

    spec = {"cmd": "true", "cwd": project, "approved": True, "unsandboxed_ok": True}
    for _ in range(WARMUP):
        nvim.exec_lua(LUA_PAIR, spec)
    bash: list[float] = []
    stages: list[dict[str, float]] = []
    spares = beside = 0
    host = host_process(nvim)
    cpu0 = cpu_ms(host)
    busy0 = machine_ms()
    for _ in range(RUNS):
        if gap:
            time.sleep(gap)
        bash_ms, t0, t_cb, result = nvim.exec_lua(LUA_PAIR, spec)
        assert result.get("exit_code") == 0, result
        bash.append(bash_ms)
        marks = result.get("timing") or {}
        spares += "took_spare" in marks
        beside += "beside" in marks
        stages.append(breakdown(t0, t_cb, marks))
    cpu1 = cpu_ms(host)
    busy1 = machine_ms()
    # Paced as the series was (a run straight after the last one finds no sandbox made for it
    # in the 0.1 s mode): the median of a few.
    echo = {**spec, "cmd": "echo x"}
    firsts: list[float] = []
    for _ in range(ECHO_RUNS):
        if gap:
            time.sleep(gap)
        _b, t0, _t, result = nvim.exec_lua(LUA_PAIR, echo)
        marks = result.get("timing") or {}
        if "first_byte" in marks:
            firsts.append((marks["first_byte"] - t0) * 1000)
    first = statistics.median(firsts) if firsts else None
    med = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
    return {
        "bash": statistics.median(bash),
        "stages": med,
        "first_byte": first,
        "spares": spares,
        "beside": beside,
        "backend": backend,
        "cpu": ((cpu1[0] - cpu0[0]) / RUNS, (cpu1[1] - cpu0[1]) / RUNS),
        "machine": (busy1 - busy0) / RUNS,
    }


def everyday(nvim: Any, project: str, backend: str) -> list[Row]:
    """``EVERYDAY`` through ``run`` (a prepared sandbox, 0.1 s apart, undo off) against bash."""
    rows: list[Row] = []
    setup(nvim, backend, False, True)
    for cmd in EVERYDAY:
        spec = {"cmd": cmd, "cwd": project, "approved": True, "unsandboxed_ok": True}
        nvim.exec_lua(LUA_CMD, spec)
        bash: list[float] = []
        ours: list[float] = []
        for _ in range(EVERYDAY_RUNS):
            time.sleep(GAP or 0.1)
            bash_ms, run_ms, code = nvim.exec_lua(LUA_CMD, spec)
            assert code == 0, (cmd, backend, code)
            bash.append(bash_ms)
            ours.append(run_ms)
        b, o = statistics.median(bash), statistics.median(ours)
        rows.append(
            {
                "name": f"{BIG_FILES:,} files, {backend}: `{cmd}`",
                "value": o,
                "unit": "ms",
                "goal": "",
                "note": f"{o / b:.2f}x vim.system bash ({b:.1f} ms), {o - b:+.1f} ms",
            }
        )
    return rows


def rows_of(label: str, m: dict[str, Any]) -> list[Row]:
    st = m["stages"]
    ratio = st["total"] / m["bash"]
    parts = ", ".join(f"{k} {st[k]:.2f}" for k in (*ORDER, "result to Lua") if st[k] >= 0.005)
    first = (
        f"; first byte of `echo x` {m['first_byte']:.1f} ms (median of {ECHO_RUNS})"
        if m["first_byte"]
        else ""
    )
    cpus = os.cpu_count() or 1
    spare = f"; {m['spares']}/{RUNS} runs took a prepared sandbox" if m["spares"] else ""
    if m["spares"]:
        spare += f", {m['beside']}/{RUNS} had the next one made beside them at once"
    goal = ""
    if m["backend"] == "none":
        goal = "<= 1.3x bash"
    else:
        goal = "<= 3x bash" if "small" in label else "<= 4x bash (stretch 2x)"
    return [
        {
            "name": f"{label}, {m['backend']}: `true` end to end",
            "value": st["total"],
            "unit": "ms",
            "goal": goal,
            "note": f"{ratio:.2f}x vim.system bash ({m['bash']:.2f} ms){spare}{first}; CPU per "
            f"run: the host {m['cpu'][0]:.1f} ms, what it started {m['cpu'][1]:.1f} ms, the "
            f"whole machine {m['machine']:.1f} ms with the bash beside it (on {cpus} CPUs, "
            f"{m['machine'] / cpus:.1f} ms of wall time at the least)",
        },
        {
            "name": f"{label}, {m['backend']}: stages (ms, medians)",
            "value": "",
            "unit": "",
            "goal": "",
            "note": parts,
        },
    ]


def backends() -> list[str]:
    from run_bash.config import parse_config
    from run_bash.sandbox.base import CONFINING_BACKENDS, get_backend

    out = ["none"]
    for name in CONFINING_BACKENDS:
        if get_backend(name, parse_config({})).availability().ok:
            out.append(name)
    return out


def run() -> list[Row]:
    rows: list[Row] = []
    work = tempfile.mkdtemp(prefix="run_bash-bench-fast-")
    state = os.path.join(work, "state")
    os.makedirs(state)
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = state
    nvim = None
    try:
        small = os.path.join(work, "small")
        os.makedirs(os.path.join(small, "src"))
        for i in range(5):
            Path(small, "src", f"f{i}.txt").write_text(f"file {i}\n")
        big = os.path.join(work, "big")
        make_project(big, BIG_FILES, 20_000_000)
        nvim = attach()
        load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
        for label, project, undo in (
            ("small project", small, False),
            (f"{BIG_FILES:,}-file git project, undo on", big, True),
        ):
            for backend in backends():
                modes = MODES if backend != "none" else NONE_MODES
                for mode, prepare, gap in modes:
                    setup(nvim, backend, undo, prepare)
                    if undo:  # the first snapshot reads every file: not what is measured here
                        nvim.exec_lua(LUA_PAIR, {"cmd": "true", "cwd": project, "approved": True,
                                                 "unsandboxed_ok": True})  # fmt: skip
                        time.sleep(1.0)
                    where = f"{label}, {mode}" if mode else label
                    rows += rows_of(where, series(nvim, project, backend, gap))
        for backend in backends():
            rows += everyday(nvim, big, backend)
        rows[0]["note"] += f"; load average {load}"
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
    return rows


if __name__ == "__main__":
    for r in run():
        value = f"{r['value']:>9.2f}" if isinstance(r["value"], float) else " " * 9
        goal = f"  (goal {r['goal']})" if r.get("goal") else ""
        print(f"{r['name']:<62} {value} {r['unit']}{goal}  — {r['note']}")
