"""Resource limits, for every confining backend (#12 item 8, #20 classes 8 and 9): going above
each one is stopped, and the same work just under it succeeds (the positive control).

Defaults: 512 processes, 4 GiB of memory, 2 GiB per file. The temp space is a size-limited tmpfs
(class 8) and the memory cap holds for the whole run through a memory cgroup (class 9); both are
tested with small caps. The default-memory cases map address space without touching it, so
nothing here needs gigabytes of RAM or disk.
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
            "documented: RLIMIT_DATA does not count shared memory, and a memory cgroup counts "
            "memory in use, not address space (test_two_processes_together_stop_at_the_runs_"
            "memory_cap touches its pages)"
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


# Writes up to {count} files of 1 MB into {dir} until a write fails; prints how many went in.
FILL = (
    "n=0; while [ $n -lt {count} ] && head -c 1000000 /dev/zero > {dir}/{name}$n; "
    "do n=$((n+1)); done; echo WROTE $n"
)
# Opens a file in /tmp, unlinks it, then writes up to {mb} MB into it; prints what went in.
UNLINKED = (
    "python3 - <<'EOF'\nimport os\nf = open('/tmp/u', 'wb'); os.unlink('/tmp/u'); n = 0\n"
    "try:\n    while n < {mb} << 20:\n        f.write(b'x' * (1 << 20)); f.flush(); n += 1 << 20\n"
    "except OSError as e:\n    print('ERR', e.strerror)\nprint('UNLINKED', n)\nEOF"
)
MIB = 1 << 20


def test_the_temp_space_is_capped_by_the_kernel(sbx, world):
    """#20 class 8: /tmp, /var/tmp and /dev/shm are one filesystem of max_temp_size: a write under
    the cap succeeds (the control), a writer as fast as it can goes no further than the cap, in
    any of the three, and nothing of it reaches the host's disk."""
    rb = sbx.with_config(sandbox={"limits": {"max_temp_size": "32M"}})
    ok = rb.run(f'head -c 8000000 /dev/zero > "$TMPDIR/f" && echo {CONTROL}; stat -f -c %t /tmp')
    assert CONTROL in ok.output and ok.status == "exited", ok
    assert ok.output.split()[-1] == "1021994", ok.output  # TMPFS_MAGIC: a tmpfs of its own
    for where in ("/tmp", "/var/tmp", "/dev/shm"):
        s = rb.start(FILL.format(count=100, dir=where, name="f") + "; sleep 30")
        out = wait_text_of(rb, s, "WROTE")
        # 32 MiB holds 33 files of 1 MB; the 34th fails, whoever writes it.
        assert "WROTE 33" in out and "No space left on device" in out, (where, out)
        # Outside: the run's private dir on the host's disk holds nothing of it.
        assert os.listdir(s.tmpdir) == [], (where, os.listdir(s.tmpdir))
        rb.kill(s)
    # The three share the cap: 20 MB in /var/tmp leave 13 files for /dev/shm.
    r = rb.run(
        FILL.format(count=20, dir="/var/tmp", name="a")
        + "; "
        + FILL.format(count=100, dir="/dev/shm", name="b")
    )
    assert "WROTE 20" in r.output and "WROTE 13" in r.output, r.output
    if sbx.name == "sandlock":  # its launcher measures the space when the command ends
        assert any("temp space" in n and "32 MiB" in n for n in r.notices), r.notices


def wait_text_of(rb, s, text: str) -> str:
    from tests.security.test_loopback import wait_text

    return wait_text(rb, s, (text,))


def test_an_unlinked_open_file_counts_against_the_temp_cap(sbx):
    """A file unlinked while still open keeps its blocks: it is stopped at the cap as well (a walk
    of the tree would not see it), while the same under the cap goes through (the control)."""
    rb = sbx.with_config(sandbox={"limits": {"max_temp_size": "32M"}})
    small = rb.run(UNLINKED.format(mb=8))
    assert f"UNLINKED {8 * MIB}" in small.output and "ERR" not in small.output, small.output
    big = rb.run(UNLINKED.format(mb=100))
    assert "ERR No space left on device" in big.output, big.output
    wrote = int(big.output.split("UNLINKED", 1)[1].split()[0])
    assert 24 * MIB <= wrote <= 32 * MIB, big.output


def test_the_temp_cap_is_at_most_half_the_available_memory():
    """A tmpfs lives in memory: the cap never exceeds half of what is available."""
    from run_bash.sandbox.tempfs import temp_size

    assert temp_size(1 << 40, available=8 << 30) == 4 << 30
    assert temp_size(32 * MIB, available=8 << 30) == 32 * MIB
    assert temp_size(1, available=8 << 30) == MIB  # never below 1 MiB
    assert temp_size(32 * MIB + 1, available=8 << 30) == 32 * MIB + 4096  # whole pages
    # Under the memory bound: never above half, at most a sixteenth below it, and the same
    # while memory moves by a few pages (a prepared sandbox keeps fitting).
    for available in (3 << 29, 1_000_000_000, (5 << 30) + 12345, 300 * MIB):
        sizes = {temp_size(1 << 40, available=available + k * 4096) for k in range(0, 40, 3)}
        assert len(sizes) == 1, (available, sizes)
        (size,) = sizes
        assert available // 2 * 15 // 16 <= size <= available // 2, (available, size)


# Allocates {mb} MB and touches every page, prints {mark}, holds it for a while.
HOG = (
    "python3 -c \"import time; b = bytearray({mb} << 20); print('{mark}', flush=True); "
    'time.sleep(3)"'
)


def whole_run_cap(name: str) -> None:
    """Skip where a run's memory cannot be capped as a whole (bubblewrap without a cgroup: the
    health check says so); sandlock counts the whole run itself."""
    from run_bash.sandbox.cgroups import CGROUPS

    whole, why = CGROUPS.describe()
    if name == "bubblewrap" and not whole:
        pytest.skip(f"no memory cgroup here ({why}): the cap is per process (documented)")


# Allocates {mb} MB and touches every page, then says TOGETHER (a word its command line does not
# hold) if the other one ({other}) holds its own memory at the same time. "Holds" is both a lock on
# its file in the run's temp dir (shared by the two), taken before the file gets its name, and its
# resident memory (``/proc/<pid>/statm``, the pid is in the file) of at least {mb} MB: a process
# the cap kills gives its memory back before the kernel drops its lock, so the lock alone would
# count a hog that is already being killed.
# Each stays until the other has looked (its seen- file) or has died, or 20 s pass; one that
# died before it held anything is told by its done- file (``pair``), so nobody waits 20 s for it.
PAIRED_HOG = (
    'python3 -c "import fcntl, os, time\n'
    "b = bytearray({mb} << 20); t = os.environ['TMPDIR']; end = time.time() + 20\n"
    "me = open(t + '/.held-{mark}', 'w'); fcntl.flock(me, fcntl.LOCK_EX)\n"
    "me.write(str(os.getpid())); me.flush()\n"
    "os.rename(t + '/.held-{mark}', t + '/held-{mark}')\n"
    "def alive(f):\n"
    "    try: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); return False\n"
    "    except OSError: return True\n"
    "def holds(f):\n"
    "    try: pages = int(open('/proc/%s/statm' % open(f.name).read()).read().split()[1])\n"
    "    except (OSError, ValueError, IndexError): return False\n"
    "    return alive(f) and pages * os.sysconf('SC_PAGE_SIZE') >= ({mb} << 20)\n"
    "other = None\n"
    "while other is None and time.time() < end and not os.path.exists(t + '/done-{other}'):\n"
    "    try: other = open(t + '/held-{other}')\n"
    "    except OSError: time.sleep(0.02)\n"
    "if other is not None and holds(other): print('TOGE' + 'THER', flush=True)\n"
    "open(t + '/seen-{mark}', 'w').close()\n"
    "while other and time.time() < end and not os.path.exists(t + '/seen-{other}') and alive(other):\n"
    '    time.sleep(0.02)"'
)


def test_two_processes_together_stop_at_the_runs_memory_cap(sbx):
    """#20 class 9: the memory cap holds for the whole run, not per process: two processes of
    600 MB each under a 1 GiB cap never hold their memory at the same time, while one gets it
    (the control), and without the sandbox both hold it together."""
    whole_run_cap(sbx.name)
    rb = sbx.with_config(sandbox={"limits": {"max_memory": "1G"}})
    one = rb.run(HOG.format(mb=600, mark=CONTROL))
    assert CONTROL in one.output, one
    first = PAIRED_HOG.format(mb=600, mark="a", other="b")
    second = PAIRED_HOG.format(mb=600, mark="b", other="a")
    done = '; touch "$TMPDIR/done-{}"; }} &'
    pair = f"{{ {first}{done.format('a')} {{ {second}{done.format('b')} wait; echo END"
    r = rb.run(pair, timeout=60)
    assert "END" in r.output, r.output
    assert "TOGETHER" not in r.output.splitlines(), r.output
    if sbx.name == "bubblewrap":  # the kernel's memory cgroup stopped it, and the result says so
        assert any("killed by the kernel" in n and "1 GiB" in n for n in r.notices), r.notices
    free = sbx.unconfined().run(pair, timeout=60).output
    assert free.splitlines().count("TOGETHER") == 2, free
    # The same sandbox with room for both: the two see each other hold their memory (the check
    # works inside the sandbox, so its silence under the cap is the cap's doing).
    roomy = sbx.with_config(sandbox={"limits": {"max_memory": "3G"}}).run(pair, timeout=60).output
    assert roomy.splitlines().count("TOGETHER") == 2, roomy


def test_a_runs_processes_are_in_its_cgroup_from_the_start(sbx):
    """Every process of a run is in the run's cgroup (seen from the host), none can leave it or
    raise its cap from inside (every cgroup file is read-only there), and the cgroup goes when
    the run has ended."""
    from run_bash.sandbox.cgroups import CGROUPS

    if not CGROUPS.describe()[0]:
        pytest.skip(f"no memory cgroup here ({CGROUPS.why_not})")
    escape = (
        "for f in $(find /sys/fs/cgroup -maxdepth 6 -name cgroup.procs -o -maxdepth 6 "
        "-name 'memory.*limit*' -o -maxdepth 6 -name memory.max 2>/dev/null); do "
        '( echo 0 > "$f" ) 2>/dev/null && echo "ESCAPED $f"; '
        '( echo -1 > "$f" ) 2>/dev/null && echo "RAISED $f"; done; sleep 30 & echo TRIED; wait'
    )
    s = sbx.start(escape, bg_after=0.1, timeout=60)
    try:
        out = wait_text_of(sbx, s, "TRIED")
        assert "ESCAPED" not in out and "RAISED" not in out, out
        assert s.launched is not None and s.launched.cgroup is not None and s.tracker is not None
        cgroup = s.launched.cgroup
        members = set(s.tracker.members())
        assert s.launched.pid in members and len(members) >= 2
        outside = members - cgroup.pids()
        # bubblewrap's root is `unshare`, which only waits for the namespace's first process
        # (that one joins the cgroup, then becomes bwrap); everything of the command is inside.
        assert outside == ({s.launched.pid} if sbx.name == "bubblewrap" else set()), outside
    finally:
        sbx.kill(s)
    assert not any(os.path.exists(d) for d in cgroup.dirs), cgroup.dirs


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
