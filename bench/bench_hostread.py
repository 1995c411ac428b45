"""What keeping the host-read set costs per run: a 5,000-file repository with three submodules,
a venv on the host's PATH (read-only inside runs) and a writable npm cache, first run and warm.

Three parts, each measured on its own (medians; the guard's and the PATH check's share by
difference, with and without the PATH directories in the set):

* **host-read set**: ``Discovery.discover`` (git asked on the first run only; warm: stat
  signatures, one ``lstat`` per directory of every writable grant, the PATH units);
* **guard**: ``Keeper.prepare`` + ``Keeper.finish`` (trusted states, inotify watches, the post-run
  comparison of every member, the walk for new repositories), PATH directories left out;
* **PATH check**: the PATH units and their links' targets (in the set), each PATH directory's
  state before the run and its comparison after it (in the guard).

``run() -> list[dict]`` for ``bench/run.py``; also runnable alone.
"""

from __future__ import annotations

import dataclasses
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
for p in (ROOT / "python", ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench_sandbox import make_repo  # noqa: E402

from run_bash.sandbox.guard import Keeper  # noqa: E402
from run_bash.sandbox.hostread import Discovery, HostRead  # noqa: E402
from run_bash.sandbox.pathguard import link_targets, path_dirs  # noqa: E402
from run_bash.sandbox.pathstate import changes, dir_state  # noqa: E402
from run_bash.sandbox.places import Places  # noqa: E402

Row = dict[str, Any]


def _times_ms(fn: Any, n: int, warm: bool = True) -> list[float]:
    if warm:
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def world(root: str) -> tuple[str, dict[str, str], list[str]]:
    """The repository, the host's environment (a venv of the project first on PATH) and the
    writable grants (the project and a 256-directory npm cache)."""
    repo = make_repo(root)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", f"{repo}/.venv"], check=True)
    home = os.path.join(root, "home")
    cache = os.path.join(home, ".npm/_cacache")
    for i in range(256):
        os.makedirs(os.path.join(cache, f"index-v5/{i:02x}"), exist_ok=True)
    env = {"HOME": home, "PATH": f"{repo}/.venv/bin:/usr/local/bin:/usr/bin:/bin"}
    # A repository's config files were not all written in the last two seconds: the guard's
    # states of files that settled are compared by their stat signature (members.SETTLED_NS).
    time.sleep(2.1)
    return repo, env, [repo, cache]


def _count_dirs(root: str, skip: Any) -> int:
    """Directories a walk for new repositories visits (not ``.git``, nor what is kept whole)."""
    n = 0
    for d, subdirs, _files in os.walk(root):
        n += 1
        subdirs[:] = [s for s in subdirs if s != ".git" and os.path.join(d, s) not in skip]
    return n


def run(n: int = 30) -> list[Row]:
    root = tempfile.mkdtemp(prefix="run_bash-bench-hostread-")
    try:
        return _rows(root, n)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _rows(root: str, n: int) -> list[Row]:
    repo, env, writable = world(root)
    home = env["HOME"]

    def discover(d: Discovery) -> HostRead:
        return d.discover(repo, writable=writable, env=env, home=home)

    first_set = _times_ms(lambda: discover(Discovery()), max(5, n // 4), warm=False)
    shared = Discovery()
    hr = discover(shared)
    warm_set = _times_ms(lambda: discover(shared), n)

    def path_part() -> None:
        for pd in path_dirs(env["PATH"], writable, [repo]):
            link_targets(pd, Places(writable))

    path_in_set = _median(_times_ms(path_part, n))

    no_path = dataclasses.replace(hr, path_dirs=())
    state = {"i": 0}

    def guard(keeper: Keeper, h: HostRead) -> None:
        state["i"] += 1
        sid = f"b{state['i']}"
        keeper.prepare(sid, h)
        keeper.finish(sid, "", 0)

    def first_guard() -> None:
        keeper = Keeper(os.path.join(root, "quarantine"), discovery=shared)
        guard(keeper, hr)
        keeper.shutdown()

    first_guard_ms = _median(_times_ms(first_guard, max(5, n // 4)))
    keeper = Keeper(os.path.join(root, "quarantine"), discovery=shared)
    warm_with = _median(_times_ms(lambda: guard(keeper, hr), n))
    warm_without = _median(_times_ms(lambda: guard(keeper, no_path), n))
    keeper.shutdown()

    def path_in_guard() -> None:
        for pd in hr.path_dirs:
            changes(pd, dir_state(pd.path), Places(hr.writable))

    path_compare = _median(_times_ms(path_in_guard, n))
    set_warm = _median(warm_set)
    dirs = sum(_count_dirs(r, hr.sealed) for r in hr.scan)
    walk = _median(_times_ms(lambda: [shared.trees.find(r) for r in hr.scan], n))
    path_total = path_in_set + path_compare
    total = set_warm + warm_with
    kept = (
        f"{len(hr.members)} members, {len(hr.sealed)} kept whole, {len(hr.git_dirs)} git dirs, "
        f"{len(hr.path_dirs)} PATH dir, {len(hr.scan)} trees walked"
    )
    return [
        {
            "name": "host-read set: first run (git asked)",
            "value": _median(first_set),
            "unit": "ms",
            "goal": "",
            "note": kept,
        },
        {
            "name": "host-read set: warm (stat signatures + tree walks)",
            "value": set_warm,
            "unit": "ms",
            "goal": "",
            "note": f"range {min(warm_set):.2f}-{max(warm_set):.2f} ms; of which one walk of "
            f"{dirs} directories {walk:.2f} ms (the guard walks them again after the run)",
        },
        {
            "name": "guard: first run (inotify, trusted states, check)",
            "value": first_guard_ms,
            "unit": "ms",
            "goal": "",
        },
        {
            "name": "guard: warm, PATH dirs left out",
            "value": warm_without,
            "unit": "ms",
            "goal": "",
        },
        {
            "name": "PATH check: warm (units + state before + compare after)",
            "value": path_total,
            "unit": "ms",
            "goal": "",
            "note": f"in the set {path_in_set:.2f} ms; state + compare {path_compare:.2f} ms "
            "(counted in the total below)",
        },
        {
            "name": "host-read set + guard + PATH check, warm (all three)",
            "value": total,
            "unit": "ms",
            "goal": "< 5 ms",
        },
    ]


def main() -> int:
    for row in run():
        note = f"  ({row['note']})" if row.get("note") else ""
        goal = f"  [goal {row['goal']}]" if row.get("goal") else ""
        print(f"{row['name']:62} {row['value']:9.2f} {row['unit']}{goal}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
