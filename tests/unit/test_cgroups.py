"""Where runs' cgroups are made (``sandbox/cgroups.py``): read from mountinfo and
/proc/self/cgroup, decided on the directories themselves. The kernel side (a run stopped at its
memory cap) is tests/security/test_limits.py."""

from __future__ import annotations

import os
from pathlib import Path

from run_bash.health import memory_cap
from run_bash.sandbox.cgroups import Cgroups, find_places, memberships, mounts, remove_stale


def v2_tree(root: Path, path: str, enabled: dict[str, str]) -> Path:
    """A fake cgroup2 mount at ``root`` with the cgroups of ``path``; ``enabled``: relative
    cgroup -> its cgroup.subtree_control."""
    (root / "cgroup.controllers").parent.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    d = root
    for part in ["", *path.strip("/").split("/")]:
        d = d / part if part else d
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup.procs").write_text("")
        rel = str(d.relative_to(root))
        (d / "cgroup.subtree_control").write_text(enabled.get(rel, "") + "\n")
    return d


def mountinfo_v2(point: Path) -> str:
    return f"41 31 0:38 / {point} rw,relatime - cgroup2 cgroup2 rw\n"


def test_v2_takes_the_deepest_writable_cgroup_that_enables_memory_for_its_children(tmp_path):
    root = tmp_path / "cg"
    own = "/user.slice/user-1000.slice/user@1000.service/app.slice/nvim.scope"
    enabled = {
        ".": "cpu memory pids",
        "user.slice": "memory pids",
        "user.slice/user-1000.slice": "memory pids",
        "user.slice/user-1000.slice/user@1000.service": "memory pids",
        # app.slice enables nothing: its children (our own scope) cannot have memory.
    }
    v2_tree(root, own, enabled)
    places, why = find_places(mountinfo_v2(root), f"0::{own}\n")
    assert why == ""
    base = str(root / "user.slice/user-1000.slice/user@1000.service")
    assert places["memory"].base == base and places["memory"].version == 2
    assert places["pids"].base == base
    # Not writable there (a slice of the system's): the next writable one up is taken.
    os.chmod(Path(base) / "cgroup.procs", 0o444)
    if os.geteuid() != 0:  # root writes anything: the permission is not checked for it
        places, _ = find_places(mountinfo_v2(root), f"0::{own}\n")
        assert places["memory"].base == str(root / "user.slice/user-1000.slice")


def test_v2_without_the_memory_controller_for_children_has_no_place_and_says_why(tmp_path):
    root = tmp_path / "cg"
    own = "/session.scope"
    v2_tree(root, own, {".": "cpu"})
    places, why = find_places(mountinfo_v2(root), f"0::{own}\n")
    assert "memory" not in places
    assert "memory controller enabled for its children" in why


def test_v1_uses_the_processes_own_cgroup_in_the_memory_hierarchy(tmp_path):
    mem, pids = tmp_path / "memory", tmp_path / "pids"
    (mem / "process_api/abc").mkdir(parents=True)
    (mem / "process_api/abc/cgroup.procs").write_text("")
    pids.mkdir()
    (pids / "cgroup.procs").write_text("")
    info = (
        f"35 31 0:32 / {mem} rw,relatime - cgroup cgroup rw,memory\n"
        f"39 31 0:36 / {pids} rw,relatime - cgroup cgroup rw,pids\n"
        f"41 31 0:38 / {tmp_path / 'unified'} rw,relatime - cgroup2 cgroup2 rw\n"
    )
    own = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n0::/\n"
    places, why = find_places(info, own)
    assert why == "" and places["memory"].version == 1
    assert places["memory"].base == str(mem / "process_api/abc")
    assert places["pids"].base == str(pids)


def test_parsing_mountinfo_and_proc_self_cgroup():
    info = (
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "41 31 0:38 /sub /sys/fs/cgroup/with\\040space rw - cgroup2 cgroup2 rw\n"
        "22 1 0:5 / /proc rw - proc proc rw\n"
    )
    got = mounts(info)
    assert [(m.version, sorted(m.controllers), m.root, m.point) for m in got] == [
        (1, ["memory"], "/", "/sys/fs/cgroup/memory"),
        (1, [], "/", "/sys/fs/cgroup/cpu"),
        (2, [], "/sub", "/sys/fs/cgroup/with space"),
    ]
    assert memberships("4:memory:/a\n8:pids:/\n0::/b\n1:cpu,cpuacct:/c\n") == {
        "memory": "/a",
        "pids": "/",
        "2": "/b",
    }


def test_no_cgroup_means_health_says_the_cap_is_per_process(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text("22 1 0:5 / /proc rw - proc proc rw\n")
    own = tmp_path / "cgroup"
    own.write_text("0::/\n")
    none = Cgroups(str(info), str(own))
    assert none.make("s1", 1 << 30) is None
    whole, why = none.describe()
    assert not whole and "no cgroup hierarchy with the memory controller" in why
    item = memory_cap(none)
    assert item["level"] == "warn" and "per process" in item["msg"]
    assert "RLIMIT_DATA" in item["msg"] and item["advice"]


def test_stale_host_directories_are_removed_and_live_ones_kept(tmp_path):
    (tmp_path / "run_bash-999999999/run1").mkdir(parents=True)
    (tmp_path / f"run_bash-{os.getpid()}/run2").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    assert remove_stale(str(tmp_path)) == 1
    assert sorted(os.listdir(tmp_path)) == ["other", f"run_bash-{os.getpid()}"]
