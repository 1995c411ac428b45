"""Resource limits at their defaults, for every confining backend (#12 item 8): going above each
one is stopped, and the same work just under it succeeds (the positive control).

Defaults: 512 processes, 4 GiB of memory, 2 GiB per file; and a run's temp dir cap. The memory cases
map address space without touching it, so nothing here needs gigabytes of RAM or disk.
"""

from __future__ import annotations

import os

import pytest

from run_bash.config import parse_config
from tests.security.conftest import CONTROL

GIB = 1024**3

# Forks sleeping children until fork fails or `n` are alive; prints how many it got. Python's
# fork does not retry on EAGAIN the way bash does.
STORM = (
    "python3 - {n} <<'EOF'\nimport os, sys, time\nn = 0\nfor _ in range(int(sys.argv[1])):\n"
    "    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n"
    "        time.sleep(60)\n        os._exit(0)\n    n += 1\nprint('FORKED', n)\nEOF"
)


def forked(output: str) -> int:
    return int(output.split("FORKED", 1)[1].split()[0])


def test_a_fork_storm_stops_at_the_default_process_cap(sbx):
    cap = parse_config({}).sandbox.limits.max_processes
    assert cap == 512
    r = sbx.run(STORM.format(n=cap + 200), timeout=120)
    # The command's own processes (bash exec's python) count: at most cap - 1 children.
    assert forked(r.output) <= cap - 1, r.output
    # Control: the run got close to the cap (fork works up to it, not far below).
    assert forked(r.output) >= cap - 16, r.output


@pytest.mark.parametrize("kind", ["private", "shared"])
def test_a_memory_hog_stops_at_the_default_memory_limit(sbx, kind):
    limit = parse_config({}).sandbox.limits.max_memory
    assert limit == 4 * GIB
    if sbx.name == "bubblewrap" and kind == "shared":
        pytest.skip(
            "documented: RLIMIT_DATA does not count shared memory (bubblewrap has no cgroup)"
        )
    flags = "mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS" if kind == "private" else "mmap.MAP_SHARED"
    hog = (
        'python3 -c "import mmap; m = mmap.mmap(-1, {size}, flags={flags}); m[0] = 1; '
        "print('{mark}', {size})\""
    )
    r = sbx.run(
        hog.format(size=int(3.5 * GIB), flags=flags, mark=CONTROL)
        + "; "
        + hog.format(size=int(4.5 * GIB), flags=flags, mark="MAPPED")
    )
    assert CONTROL in r.output, r.output  # 3.5 GiB is allowed
    assert "MAPPED" not in r.output, r.output


def test_a_file_past_the_default_size_limit_is_refused(sbx, world):
    limit = parse_config({}).sandbox.limits.max_file_size
    assert limit == 2 * GIB
    r = sbx.run(
        f"truncate -s {GIB} small && echo {CONTROL}; "
        f"truncate -s {limit + 1} big; dd if=/dev/zero of=big2 bs=1 count=1 seek={limit} "
        "status=none; echo done"
    )
    assert CONTROL in r.output, r.output
    assert (world.project / "small").stat().st_size == GIB
    for name in ("big", "big2"):
        path = world.project / name
        assert not path.exists() or path.stat().st_size <= limit, (name, r.output)


def test_a_run_filling_its_temp_dir_is_stopped(sbx):
    rb = sbx.with_config(sandbox={"limits": {"max_temp_size": "32M"}})
    ok = rb.run(f'head -c 8000000 /dev/zero > "$TMPDIR/f" && echo {CONTROL}')
    assert CONTROL in ok.output and ok.status == "exited", ok
    s = rb.start(
        'for i in $(seq 1 200); do head -c 1000000 /dev/zero > "$TMPDIR/f$i"; done; echo FILLED',
        timeout=90,
    )
    r = rb.wait(s, 120)
    assert r.status == "killed" and "FILLED" not in r.output, r
    assert any("over its cap of 32 MiB" in n for n in r.notices), r.notices
    assert not os.path.exists(s.tmpdir)


def test_a_lower_process_cap_holds_per_run(sbx, world):
    """Two runs at once each get their own cap (not one budget shared by the user's processes)."""
    cap = 16
    rb = sbx.with_config(sandbox={"limits": {"max_processes": cap}})
    first = rb.start(
        STORM.format(n=cap + 20) + "\nwhile [ ! -e go ]; do sleep 0.05; done", timeout=60
    )
    second = rb.run(STORM.format(n=cap + 20), timeout=60)
    (world.project / "go").touch()
    r1 = rb.wait(first, 90)
    for r in (r1, second):
        assert cap // 2 <= forked(r.output) <= cap - 1, r.output
