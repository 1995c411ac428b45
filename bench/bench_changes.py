"""Change-store cost per run: the latency that ``begin`` + ``finish`` add around a command, and
the store's growth, in a 5,000-file / 50 MB project and a 50,000-file one.

Printed beside the same command with snapshots off (the command alone), and beside git plumbing
doing the same snapshots (a separate GIT_DIR and GIT_INDEX_FILE with the project as work tree:
``git add -A`` + ``git write-tree`` at start and end), the mechanism this store was measured
against. ``run()`` returns rows for ``bench/run.py``; run this file directly to print them.
"""

from __future__ import annotations

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
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))

from run_bash.changes import ChangeStore, Token  # noqa: E402

Row = dict[str, Any]
WARM_RUNS = 30
PAUSE_S = 0.3  # between runs, as a chat turn leaves


def make_project(root: str, files: int, total_bytes: int) -> None:
    """``files`` text files spread over ~files/15 directories, ``total_bytes`` in all."""
    per = max(1, total_bytes // files)
    line = b"".join(b"%05d some source text, " % i for i in range(per // 24 + 2))
    for i in range(files):
        d = os.path.join(root, f"pkg{i % 40}", f"mod{(i // 40) % 8}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"file{i}.py"), "wb") as f:
            f.write(b"# %d\n" % i + line[: per - 8])
    with open(os.path.join(root, ".gitignore"), "wb") as f:
        f.write(b"*.pyc\n__pycache__/\n/build/\n*.log\nnode_modules/\n.venv/\n*.egg-info/\n"
                b"dist/\n.coverage\n!keep.log\n")  # fmt: skip
    subprocess.run(["git", "init", "-q", root], check=True)


def command(project: str, i: int) -> None:
    """The run itself: one file changed, as a plain bash process."""
    subprocess.run(
        ["bash", "-c", f"echo 'edit {i}' >> pkg1/mod1/file41.py"], cwd=project, check=True
    )


def du(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def warm_runs(store: ChangeStore, project: str, runs: int, pause_s: float) -> dict[str, Any]:
    """``runs`` runs that each change one file; ms medians of begin, finish and both."""
    added, begins, finishes = [], [], []
    for i in range(runs):
        if pause_s:
            time.sleep(pause_s)  # the agent's turn
        t0 = time.perf_counter()
        tok = store.begin(f"w{pause_s}-{i}", project)
        t1 = time.perf_counter()
        command(project, i)
        t2 = time.perf_counter()
        cs = store.finish(tok)
        t3 = time.perf_counter()
        assert len(cs.changes) == 1, cs.summary()
        begins.append((t1 - t0) * 1000)
        finishes.append((t3 - t2) * 1000)
        added.append((t1 - t0 + t3 - t2) * 1000)
    store.settle()
    return {
        "warm": statistics.median(added),
        "p90": sorted(added)[int(len(added) * 0.9) - 1],
        "begin": statistics.median(begins),
        "finish": statistics.median(finishes),
    }


def measure(files: int, total_bytes: int, runs: int = WARM_RUNS) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="run_bash-bench-changes-")
    try:
        project = os.path.join(work, "project")
        make_project(project, files, total_bytes)
        store = ChangeStore(os.path.join(work, "store"), home=os.path.join(work, "home"))
        off = []
        for i in range(runs):
            t = time.perf_counter()
            command(project, i)
            off.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        tok = store.begin("first", project)
        t_begin = time.perf_counter()
        command(project, -1)
        t_cmd = time.perf_counter()
        assert isinstance(tok, Token), tok
        store.finish(tok)
        first = (t_begin - t + time.perf_counter() - t_cmd) * 1000
        store.settle()
        store.collect()
        size0 = du(store.root)
        paused = warm_runs(store, project, runs, PAUSE_S)
        growth = (du(store.root) - size0) / runs
        back = warm_runs(store, project, runs, 0.0)
        full = ChangeStore(store.root, home=os.path.join(work, "home"), quick_finish=False)
        full.finish(full.begin("full0", project))
        every = warm_runs(full, project, runs, 0.0)
        git_ms = git_snapshots(project, runs=min(runs, 10))
        return {
            "off": statistics.median(off),
            "first": first,
            "paused": paused,
            "back": back,
            "full": every,
            "growth": growth,
            "store0": size0,
            "git_first": git_ms[0],
            "git_warm": git_ms[1],
            "floor": walk_floor(project),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def walk_floor(project: str, runs: int = 15) -> float:
    """Median ms of the least a Python walk can do: list every directory and lstat every entry."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        stack = [project]
        while stack:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    e.stat(follow_symlinks=False)
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def git_snapshots(project: str, runs: int) -> tuple[float, float]:
    """(first, warm median) ms of git ghost snapshots around the same command."""
    gitdir = tempfile.mkdtemp(prefix="run_bash-bench-ghost-")
    env = {
        **os.environ,
        "GIT_DIR": gitdir,
        "GIT_WORK_TREE": project,
        "GIT_INDEX_FILE": os.path.join(gitdir, "index"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    try:
        subprocess.run(["git", "init", "-q", "--bare", gitdir], check=True)

        def snap() -> None:
            subprocess.run(["git", "-c", "core.fsmonitor=false", "add", "-A"], env=env, check=True)
            subprocess.run(["git", "write-tree"], env=env, check=True, capture_output=True)

        t = time.perf_counter()
        snap()
        first = (time.perf_counter() - t) * 1000
        warm = []
        for i in range(runs):
            t0 = time.perf_counter()
            snap()
            t1 = time.perf_counter()
            command(project, i)
            t2 = time.perf_counter()
            snap()
            warm.append((t1 - t0 + time.perf_counter() - t2) * 1000)
        return first, statistics.median(warm)
    finally:
        shutil.rmtree(gitdir, ignore_errors=True)


def run() -> list[Row]:
    rows: list[Row] = []
    for label, files, size in (
        ("5,000 files / 50 MB", 5000, 50_000_000),
        ("50,000 files / 100 MB", 50_000, 100_000_000),
    ):
        m = measure(files, size)
        p, b, f = m["paused"], m["back"], m["full"]
        small = files == 5000
        rows += [
            {
                "name": f"{label}: first run, begin+finish",
                "value": m["first"],
                "unit": "ms",
                "goal": "< 1000 ms" if small else "",
                "note": f"git add -A + write-tree: {m['git_first']:.0f} ms (one snapshot)",
            },
            {
                "name": f"{label}: warm, 1 file changed, begin+finish",
                "value": p["warm"],
                "unit": "ms",
                "goal": "< 25 ms median" if small else "",
                "note": f"begin {p['begin']:.1f} + finish {p['finish']:.1f} ms, p90 {p['p90']:.1f}, "
                f"{PAUSE_S} s between runs; snapshots off: the command alone {m['off']:.1f} ms",
            },
            {
                "name": f"{label}: warm, runs back to back",
                "value": b["warm"],
                "unit": "ms",
                "goal": "",
                "note": f"begin {b['begin']:.1f} + finish {b['finish']:.1f} ms (the check of an end "
                "waits for a quiet project and gives way to the next run)",
            },
            {
                "name": f"{label}: warm, full walk at every end",
                "value": f["warm"],
                "unit": "ms",
                "goal": "",
                "note": f"quick_finish=False: begin {f['begin']:.1f} + finish {f['finish']:.1f} ms; "
                f"a bare Python walk (scandir + lstat) {m['floor']:.1f} ms; git ghost snapshots "
                f"{m['git_warm']:.1f} ms",
            },
            {
                "name": f"{label}: store growth per 1-file run",
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
