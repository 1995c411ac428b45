"""Cold start: a fresh Neovim's first run until its result, against a fresh Neovim that does nothing.

``run() -> list[dict]`` for ``bench/run.py``; also runnable alone: ``python bench/bench_coldstart.py``.

Every Neovim here is a new process (the real binary, not a wrapper script), with its own XDG
directories and a small scratch project as its working directory. Times are taken from the
process's start (``CLOCK_MONOTONIC``, which both Python and ``vim.uv.hrtime()`` read) to the run's
result callback. Rows, for ``none`` and every confining backend that works here:

* **at once**: ``setup()`` and the run right after it, as a script started with Neovim does: the
  host starts in the background and the run waits in Lua's queue until it is up;
* **no setup**: the run is the first use of run_bash (it starts the host);
* **host up**: ``setup()`` started the host and it answered; from the run request to its result;
* **1 s after ready**: the same a second later, once what the host starts after ``ready`` (the
  first command's sandbox, the project's undo index) is done: a session's first command;
* **the first run's stages**: the "at once" runs from the request to the result, by the stages
  of ``bench_fastpath.py`` (its RPC is the wait for the host to start), medians;
* **the host's start-up**: where the "at once" hosts' time went, from the host's own log
  (``run_bash/startup.py``: interpreter and boot imports, fork (the sandbox launcher forked),
  the RPC channel's modules imported, run_bash imported and the service made, the checker loaded, setup (the options
  that came with ``hello`` applied), ready), medians in ms from ``jobstart``;
* the editor's longest main-loop stall from ``setup()`` to the first result (the queue never waits);
* **git repository**: "at once" again, in the same project made a git repository (its first
  policy asks git about it, and the guard lists its refs before the run).

Before each backend's "at once" rows it waits (up to 30 s) for the machine to be idle, the goal's
condition, and says how idle it was.

Baselines: ``nvim --headless +qa`` and a fresh Neovim's ``vim.system({"bash", "-c", "true"}):wait()``,
both from the process's start.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _sub in ("python", "bench"):
    if str(ROOT / _sub) not in sys.path:
        sys.path.insert(0, str(ROOT / _sub))

from bench_fastpath import ORDER, breakdown  # noqa: E402

Row = dict[str, Any]

# Writes "<hrtime of the result> <hrtime of the request> <worst stall ms> <exit code> <error>"
# to $COLD_OUT, then quits. $COLD_MODE: "at_once", "no_setup", "host_up" or "host_settled".
SCRIPT = r"""
local out, mode, backend = vim.env.COLD_OUT, vim.env.COLD_MODE, vim.env.COLD_BACKEND
-- The main loop's worst stall: a tick every 5 ms runs through vim.schedule, so a synchronous
-- call (an RPC request waiting for the host, as user input would) delays it.
local worst, last = 0, vim.uv.hrtime()
local timer = vim.uv.new_timer()
timer:start(5, 5, vim.schedule_wrap(function()
  local now = vim.uv.hrtime()
  worst = math.max(worst, (now - last) / 1e6 - 5)
  last = now
end))
local function finish(t_req, r)
  local t = vim.uv.hrtime()
  timer:stop()
  local f = assert(io.open(out, "w"))
  f:write(("%d %d %.3f %s %s\n"):format(t, t_req, worst, tostring(r.exit_code), tostring(r.error)))
  f:write(vim.json.encode(r.timing or vim.empty_dict()), "\n") -- the run's stage marks (s)
  f:close()
  vim.cmd("qa!")
end
local rb = require("run_bash")
if mode ~= "no_setup" then
  rb.setup({ sandbox = { backend = backend } })
end
if mode == "host_up" or mode == "host_settled" then
  vim.wait(60000, function() return require("run_bash.host").is_up() end, 1)
  if mode == "host_settled" then -- what the host does after ready (the first sandbox) is done
    vim.wait(1000, function() return false end, 10)
  end
  worst, last = 0, vim.uv.hrtime()
end
local t_req = vim.uv.hrtime()
local spec = { cmd = "true", cwd = vim.fn.getcwd(), unsandboxed_ok = backend == "none" or nil }
if mode == "no_setup" then
  spec.unsandboxed_ok = nil
end
local info, err = rb.run(spec, function(r) finish(t_req, r) end)
if not info then finish(t_req, { error = err }) end
"""

BASELINE_SYSTEM = r"""
vim.system({ "bash", "-c", "true" }):wait()
local f = assert(io.open(vim.env.COLD_OUT, "w"))
f:write(("%d\n"):format(vim.uv.hrtime()))
f:close()
vim.cmd("qa!")
"""


def real_nvim() -> str:
    """The Neovim binary itself (``scripts/nvim-path`` may name a launcher script)."""
    found = subprocess.run(
        [str(ROOT / "scripts" / "nvim-path")], capture_output=True, text=True, check=True
    ).stdout.strip()
    prog = subprocess.run(
        [found, "--clean", "--headless", "+lua io.stdout:write(vim.v.progpath)", "+qa"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return prog or found


class Cold:
    """Fresh Neovims in an isolated home, started in a small scratch project."""

    def __init__(self, root: str) -> None:
        self.nvim = real_nvim()
        self.root = Path(root)
        self.project = self.root / "proj"
        self.project.mkdir()
        for name in ("README", "main.py", "Makefile"):
            (self.project / name).write_text(f"{name}\n")
        self.script = self.root / "cold.lua"
        self.script.write_text(SCRIPT)
        self.baseline = self.root / "baseline.lua"
        self.baseline.write_text(BASELINE_SYSTEM)
        self.out = self.root / "out"
        self.stages: dict[str, float] = {}  # the last first run's, in ms (``breakdown``)
        self.env = dict(os.environ)
        for sub in ("config", "data", "state", "cache", "runtime"):
            (self.root / sub).mkdir(mode=0o700)
            self.env[f"XDG_{sub.upper()}_HOME" if sub != "runtime" else "XDG_RUNTIME_DIR"] = str(
                self.root / sub
            )

    def _nvim(self, *args: str, env: dict[str, str] | None = None) -> int:
        """Start a Neovim with run_bash on its runtimepath; the monotonic time it started."""
        with contextlib.suppress(FileNotFoundError):
            self.out.unlink()
        argv = [self.nvim, "--clean", "--headless", "-n", "--cmd", f"set rtp^={ROOT}"]
        argv += ["-c", "runtime plugin/run_bash.lua", *args]
        t0 = time.monotonic_ns()
        subprocess.run(
            argv,
            cwd=self.project,
            env={**self.env, **(env or {}), "COLD_OUT": str(self.out)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
        return t0

    def make_repository(self) -> None:
        """Make the project a git repository with one commit (its files)."""
        ident = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
        for args in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-qm", "files"]):
            subprocess.run(["git", *args], cwd=self.project, check=True, capture_output=True)

    def first_run(self, mode: str, backend: str) -> tuple[float, float]:
        """(ms to the result: from the process's start, or for "host_up" and "host_settled"
        from the request; the editor's worst stall in ms)."""
        t0 = self._nvim(
            "-c", f"luafile {self.script}", env={"COLD_MODE": mode, "COLD_BACKEND": backend}
        )
        first, _, marks = self.out.read_text().partition("\n")
        t_result, t_req, stall, code, err = first.split(maxsplit=4)
        # The run's stages from the request (which waits in Lua's queue while the host starts)
        # to the result callback, as ``make bench ARGS=fastpath`` names them.
        self.stages = breakdown(int(t_req) / 1e9, int(t_result) / 1e9, json.loads(marks or "{}"))
        if code != "0":
            raise RuntimeError(f"the first run failed ({mode}, {backend}): {err.strip()}")
        start = int(t_req) if mode in ("host_up", "host_settled") else t0
        return (int(t_result) - start) / 1e6, float(stall)

    def startup_marks(self) -> dict[str, float]:
        """The median of each start-up mark (``run_bash/startup.py``) over the hosts logged since
        the last call, in ms from ``jobstart``; the log is emptied."""
        log = self.root / "state" / "nvim" / "run_bash.log"
        per: dict[str, list[float]] = {}
        with contextlib.suppress(FileNotFoundError):
            for line in log.read_text().splitlines():
                _, found, marks = line.partition("start-up (ms from jobstart): ")
                for part in marks.split("; ")[0].split(", ") if found else ():
                    name, _, ms = part.rpartition(" +")
                    per.setdefault(name, []).append(float(ms))
            log.unlink()
        return {name: statistics.median(v) for name, v in per.items()}

    def bare(self) -> float:
        """``nvim --headless +qa``: the whole process, in ms."""
        t0 = time.monotonic_ns()
        subprocess.run(
            [self.nvim, "--clean", "--headless", "-n", "+qa"],
            cwd=self.project,
            env=self.env,
            check=True,
        )
        return (time.monotonic_ns() - t0) / 1e6

    def system_true(self) -> float:
        """A fresh Neovim's ``vim.system`` bash ``true``: from its start to the command's end."""
        t0 = self._nvim("-c", f"luafile {self.baseline}")
        return (int(self.out.read_text()) - t0) / 1e6


def host_python(n: int) -> Row:
    """The interpreter the host runs with here (the plugin's venv, as Lua picks it when
    ``g:run_bash_python`` is unset) and its bare start: ``python -c pass``. One that loads
    libpython as a shared library starts the host about 15 % slower (``scripts/pick-python``)."""
    venv = ROOT / ".venv" / "bin" / "python"
    python = str(venv) if venv.exists() else (shutil.which("python3") or "python3")
    probe = "import sys; print(sys.version.split()[0], any('libpython' in l for l in open('/proc/self/maps')))"
    version, shared = subprocess.run(
        [python, "-I", "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    bare = []
    for _ in range(n):
        t0 = time.monotonic_ns()
        subprocess.run([python, "-c", "pass"], check=True)
        bare.append((time.monotonic_ns() - t0) / 1e6)
    linked = "libpython shared" if shared == "True" else "linked statically"
    return {
        "name": "baseline: the host's Python, -c pass",
        "value": statistics.median(bare),
        "unit": "ms",
        "goal": "",
        "note": f"{_stats(bare)}; {os.path.realpath(python)} {version}, {linked}",
    }


def _stats(values: list[float]) -> str:
    return f"median of {len(values)}; range {min(values):.0f}-{max(values):.0f} ms"


def backends() -> list[str]:
    from run_bash.config import parse_config
    from run_bash.sandbox.base import BACKEND_NAMES, get_backend

    config = parse_config({})
    return [n for n in BACKEND_NAMES if n == "none" or get_backend(n, config).availability().ok]


def cpu_idle(window_s: float = 0.5) -> float:
    """The share of the machine's CPU time that was idle over the next ``window_s`` seconds
    (``/proc/stat``: idle and I/O wait against everything, stolen time included)."""

    def read() -> tuple[int, int]:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        return ticks[3] + ticks[4], sum(ticks)

    idle0, total0 = read()
    time.sleep(window_s)
    idle1, total1 = read()
    return (idle1 - idle0) / max(1, total1 - total0)


def settle(min_idle: float = 0.9, timeout_s: float = 30.0) -> str:
    """Wait until the machine is idle (the cold-start goal is for an idle machine: the sections
    before this one leave processes exiting and files being written back), at most
    ``timeout_s``; a note that says how idle it was."""
    began = time.monotonic()
    while True:
        share = cpu_idle()
        waited = time.monotonic() - began
        if share >= min_idle or waited >= timeout_s:
            break
    note = f"machine {share:.0%} idle just before"
    if waited >= 1:
        note += f" (waited {waited:.0f} s for it)"
    if share < min_idle:
        note += "; not idle: an upper bound"
    return note


def run(n: int = 8) -> list[Row]:
    rows: list[Row] = []
    root = tempfile.mkdtemp(prefix="run_bash-cold-")
    try:
        cold = Cold(root)
        bare = [cold.bare() for _ in range(n)]
        system = [cold.system_true() for _ in range(n)]
        rows.append(
            {
                "name": "baseline: nvim --headless +qa",
                "value": statistics.median(bare),
                "unit": "ms",
                "goal": "",
                "note": _stats(bare),
            }
        )
        rows.append(
            {
                "name": "baseline: fresh nvim, vim.system true",
                "value": statistics.median(system),
                "unit": "ms",
                "goal": "",
                "note": _stats(system) + "; from the process's start",
            }
        )
        rows.append(host_python(n))
        for backend in backends():
            idle = settle()
            cold.first_run("at_once", backend)  # the host's bytecode, the kernel's caches
            cold.startup_marks()  # (not counted)
            at_once, stages = [], []
            for _ in range(n):
                at_once.append(cold.first_run("at_once", backend))
                stages.append(cold.stages)
            times = [t for t, _ in at_once]
            rows.append(
                {
                    "name": f"cold start ({backend}): setup + run at once",
                    "value": statistics.median(times),
                    "unit": "ms",
                    "goal": "< 150 ms",
                    "note": _stats(times) + f"; fresh Neovim's start to the first result; {idle}",
                }
            )
            med = {k: statistics.median(st.get(k, 0.0) for st in stages) for k in stages[0]}
            rows.append(
                {
                    "name": f"cold start ({backend}): the first run's stages",
                    "value": med["total"],
                    "unit": "ms",
                    "goal": "",
                    "note": "medians, ms from setup()'s request to the result callback; RPC is "
                    "the wait for the host to start: "
                    + ", ".join(f"{k} {med[k]:.1f}" for k in (*ORDER, "result to Lua")),
                }
            )
            marks = cold.startup_marks()
            if marks:
                rows.append(
                    {
                        "name": f"cold start ({backend}): the host's start-up",
                        "value": marks.get("ready", 0.0),
                        "unit": "ms",
                        "goal": "",
                        "note": "medians, ms from jobstart: "
                        + ", ".join(f"{k} {v:.0f}" for k, v in marks.items()),
                    }
                )
            stalls = [s for _, s in at_once]
            rows.append(
                {
                    "name": f"cold start ({backend}): editor's worst stall",
                    "value": max(stalls),
                    "unit": "ms",
                    "goal": "",
                    "note": f"median {statistics.median(stalls):.1f} ms; from setup() to the "
                    "result (the run waits in a queue, not in the editor)",
                }
            )
            up = [cold.first_run("host_up", backend)[0] for _ in range(n)]
            rows.append(
                {
                    "name": f"cold start ({backend}): first run, host up",
                    "value": statistics.median(up),
                    "unit": "ms",
                    "goal": "",
                    "note": _stats(up) + "; setup() started the host; request to result",
                }
            )
            settled = [cold.first_run("host_settled", backend)[0] for _ in range(n)]
            rows.append(
                {
                    "name": f"cold start ({backend}): first run, 1 s after ready",
                    "value": statistics.median(settled),
                    "unit": "ms",
                    "goal": "",
                    "note": _stats(settled) + "; the host's first command once its start-up "
                    "work (the first sandbox, the undo index) is done; request to result",
                }
            )
        cold.make_repository()
        for backend in backends():
            idle = settle()
            cold.first_run("at_once", backend)  # (not counted)
            in_repo = [cold.first_run("at_once", backend)[0] for _ in range(n)]
            rows.append(
                {
                    "name": f"cold start ({backend}), git repository: setup + run at once",
                    "value": statistics.median(in_repo),
                    "unit": "ms",
                    "goal": "",
                    "note": _stats(in_repo) + "; the same project as a git repository (one "
                    "commit): the first policy asks git about it, the guard lists its refs; "
                    + idle,
                }
            )
        cold.startup_marks()  # (not counted)
        no_setup = [cold.first_run("no_setup", "auto")[0] for _ in range(n)]
        rows.append(
            {
                "name": "cold start (auto): first use, no setup()",
                "value": statistics.median(no_setup),
                "unit": "ms",
                "goal": "",
                "note": _stats(no_setup) + "; the run starts the host, default options",
            }
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> int:
    for row in run():
        note = f"  ({row['note']})" if row.get("note") else ""
        goal = f"  [goal {row['goal']}]" if row.get("goal") else ""
        print(f"{row['name']:52} {row['value']:9.2f} {row['unit']}{goal}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
