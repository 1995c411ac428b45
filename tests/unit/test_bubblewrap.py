"""bubblewrap argv builder: pure, no bwrap needed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.sandbox.base import RunSpec
from run_bash.sandbox.bubblewrap import Bubblewrap, bwrap_args
from run_bash.sandbox.bwprobe import kernel_has_pid_cap, pid_max_for
from run_bash.sandbox.policy import Limits, Policy


def make(tmp_path: Path, **over) -> tuple[Policy, RunSpec]:
    proj = tmp_path / "proj"
    (proj / ".git/hooks").mkdir(parents=True)
    (proj / ".git/config").write_text("")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret.txt").write_text("")
    (tmp_path / "tmp").mkdir()
    policy = Policy(
        cwd=str(proj),
        home=str(tmp_path),
        readable=["/usr", str(tmp_path)],
        writable=[str(proj), "/dev/null"],
        denied=[str(tmp_path / "secret"), str(tmp_path / "secret.txt"), str(tmp_path / "nope")],
        protected=[str(proj / ".git/config"), str(proj / ".git/hooks"), str(proj / ".envrc")],
        git_dirs=[str(proj / ".git")],
        limits=Limits(10, 1 << 30, 1 << 20),
        **over,
    )
    spec = RunSpec(
        cmd="echo hi",
        cwd=str(proj),
        env={},
        stdout_fd=1,
        tmpdir=str(tmp_path / "tmp"),
        session_id="x",
    )
    return policy, spec


def pairs(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_isolation_flags(tmp_path):
    policy, spec = make(tmp_path)
    args = bwrap_args(policy, spec)
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--disable-userns"):
        assert flag in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in args
    assert args[args.index("--proc") + 1] == "/proc"
    assert args[args.index("--dev") + 1] == "/dev"
    assert args[-2:] == ["--chdir", spec.cwd]


def test_share_net_only_with_allow_list(tmp_path):
    policy, spec = make(tmp_path, network_allow=["example.org:443"])
    assert "--share-net" in bwrap_args(policy, spec)


def test_private_tmp_is_the_run_dir(tmp_path):
    policy, spec = make(tmp_path)
    args = bwrap_args(policy, spec)
    binds = [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--bind"]
    for m in ("/tmp", "/var/tmp", "/dev/shm"):
        assert (str(tmp_path / "tmp"), m) in binds


def test_binds_order_and_protection(tmp_path):
    policy, spec = make(tmp_path)
    args = bwrap_args(policy, spec)
    proj = spec.cwd
    # readable parent before the writable project inside it
    assert args.index(str(tmp_path)) < args.index(proj)
    ro = [args[i + 1] for i, a in enumerate(args) if a == "--ro-bind"]
    assert f"{proj}/.git/config" in ro and f"{proj}/.git/hooks" in ro
    assert f"{proj}/.envrc" not in ro  # does not exist: guarded instead (no mount point file)
    # .git bound onto itself: a mount point cannot be renamed or removed
    i = args.index("--bind", args.index(f"{proj}/.git") - 1)
    assert args[i + 1 : i + 3] == [f"{proj}/.git", f"{proj}/.git"]
    # /dev entries come from --dev, never from the host
    assert "/dev/null" not in pairs(args, "--bind")


def test_denied_dirs_masked_files_covered(tmp_path):
    policy, spec = make(tmp_path)
    args = bwrap_args(policy, spec)
    assert str(tmp_path / "secret") in pairs(args, "--tmpfs")
    i = args.index(str(tmp_path / "secret.txt"))
    assert args[i - 2 : i] == ["--ro-bind", "/dev/null"]
    assert str(tmp_path / "nope") not in args
    # masks come after the binds they cover
    assert args.index("--tmpfs") > args.index(str(tmp_path))


def test_argv_runs_bwrap_in_its_own_pid_namespace_with_the_limits_inside(tmp_path):
    policy, spec = make(tmp_path)
    b = Bubblewrap(
        parse_config(
            {"sandbox": {"backends": {"bubblewrap": {"extra_args": ["--hostname", "box"]}}}}
        )
    )
    argv = b.argv(policy, spec)
    bw = next(i for i, a in enumerate(argv) if a.endswith("bwrap"))
    assert "--hostname" in argv[bw:]
    inside = argv[argv.index("--", bw) + 1 :]
    # Limits are set inside bwrap's user namespace (RLIMIT_NPROC then counts this run only).
    mem = policy.limits.max_memory
    assert inside[0].endswith("prlimit")
    assert inside[1:5] == [
        f"--fsize={1 << 20}:{1 << 20}",
        "--nproc=10:10",
        f"--data={mem}:{mem}",
        "--",
    ]
    assert inside[5:] == [inside[5], "-c", "echo hi"] and inside[5].endswith("bash")
    mode = b.pid_namespace()
    assert mode in ("capped", "plain", "")
    if mode:
        assert argv[0].endswith("unshare")
        assert argv[1 : argv.index("--")][-4:] == [
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
        ]
    if mode == "capped":
        # pid 1 of the run's namespace writes pid_max (10 processes + bwrap's init) and then
        # ns_last_pid, so every pid comes from 300..pid_max.
        init = argv.index("run_bash-init")
        assert argv[init + 1 : init + 3] == [str(pid_max_for(10)), "300"]
        assert pid_max_for(10) == 311
    assert ("--uid" in argv[bw:]) == (bool(mode) and os.getuid() != 0)


def test_the_runs_first_process_joins_its_cgroups_and_mounts_its_temp_space(tmp_path):
    """pid 1 of the run's namespace gets the cgroup.procs files and the tmpfs to mount on the
    private dir; bwrap binds that dir on the three temp dirs. Without a pid namespace the same
    script runs first (no mount: bwrap makes a tmpfs of the size per temp dir)."""
    policy, spec = make(tmp_path)
    b = Bubblewrap(parse_config({}))
    procs = ["/sys/fs/cgroup/x/cgroup.procs", "/sys/fs/cgroup/y/cgroup.procs"]
    argv = b.argv(policy, spec, cgroup_procs=procs, temp=1 << 20)
    init = argv.index("run_bash-init")
    bw = next(i for i, a in enumerate(argv) if a.endswith("bwrap"))
    assert argv[init - 2] == "-c" and argv[init - 3] == "/bin/sh"
    assert argv[bw - 3 : bw] == [*procs, "--"]
    private = os.path.realpath(spec.tmpdir)
    if b.pid_namespace():
        data, where = argv[init + 3], argv[init + 4]
        assert data.startswith(f"size={1 << 20},") and "mode=0700" in data
        assert where == private
        assert pairs(argv[bw:], "--bind").count(private) == 3
        assert not set(pairs(argv[bw:], "--tmpfs")) & {"/tmp", "/var/tmp", "/dev/shm"}
    b._pid_mode = ""  # as where `unshare` cannot make a pid namespace
    argv = b.argv(policy, spec, cgroup_procs=procs, temp=1 << 20)
    assert argv[0] == "/bin/sh" and argv[argv.index("run_bash-init") + 3] == "-"
    inner = argv[next(i for i, a in enumerate(argv) if a.endswith("bwrap")) :]
    assert pairs(inner, "--tmpfs")[:3] == ["/tmp", "/var/tmp", "/dev/shm"]
    assert pairs(inner, "--size") == [str(1 << 20)] * 3  # before each of the three
    # No cgroup and no pid namespace: bwrap is the first process.
    assert b.argv(policy, spec, temp=1 << 20)[0].endswith("bwrap")


@pytest.mark.parametrize(
    ("release", "capped"),
    [
        ("6.18.44-fc-v657", True),
        ("6.14.0", True),
        ("7.1.2-arch1", True),
        ("6.13.12-200.fc41.x86_64", False),
        ("5.15.0-91-generic", False),
        ("garbage", False),
    ],
)
def test_the_pid_cap_is_only_used_where_pid_max_is_per_namespace(release, capped):
    assert kernel_has_pid_cap(release) is capped


def test_pid_max_gives_the_command_exactly_its_processes():
    assert pid_max_for(512) == 300 + 512 + 1
    assert pid_max_for(10**9) == 4194304


def bwrap_with(extra):
    return Bubblewrap(
        parse_config({"sandbox": {"backends": {"bubblewrap": {"extra_args": extra}}}})
    )


def test_validate_rejects_double_dash():
    assert "must not contain `--`" in bwrap_with(["--"]).validate()[0]


def test_validate_names_extra_args_that_bwrap_rejects(tmp_path):
    """Extra arguments that would make every run fail are found at setup by a dry run."""
    if not Bubblewrap(parse_config({})).availability().ok:
        pytest.skip("bubblewrap is not available here")
    [problem] = bwrap_with(["--no-such-option"]).validate()
    assert problem.startswith("`sandbox.backends.bubblewrap.extra_args`: bwrap rejects them")
    assert "no-such-option" in problem
    [problem] = bwrap_with(["--ro-bind", str(tmp_path / "missing"), "/srv/x"]).validate()
    assert "missing" in problem
    # Positive control: arguments bwrap accepts pass.
    assert (
        bwrap_with(["--hostname", "box", "--ro-bind", str(tmp_path), str(tmp_path)]).validate()
        == []
    )


def test_joining_the_shared_network_namespace(tmp_path):
    policy, spec = make(tmp_path)
    b = Bubblewrap(parse_config({}))
    argv = b.argv(policy, spec, ("/proc/1/fd/5", "/proc/1/fd/6"))
    i = next(i for i, a in enumerate(argv) if a.endswith("nsenter"))
    assert argv[i + 1 : i + 5] == [
        "--user=/proc/1/fd/5",
        "--net=/proc/1/fd/6",
        "--preserve-credentials",
        "--",
    ]
    assert "--share-net" in argv  # stays in the joined namespace
    # With outside network allowed, the host's network is shared instead (no join).
    policy2, _ = make(tmp_path / "b", network_allow=["x:1"])
    assert not any(a.endswith("nsenter") for a in b.argv(policy2, spec, ("/a", "/b")))


def test_a_prepared_sandboxs_bash_sets_its_limits_itself_when_its_units_are_exact(tmp_path):
    """A prepared sandbox's bash (the trampoline) sets the per-process limits with ``ulimit``
    (KiB units) instead of starting ``prlimit``; a size that is no whole number of KiB, or bash
    in POSIX mode (512-byte blocks for file sizes), keeps ``prlimit``; any other command too."""
    from dataclasses import replace

    from run_bash.sandbox.bubblewrap import per_process_limits
    from run_bash.sandbox.bwprobe import prlimit_path
    from run_bash.sandbox.spare import TRAMPOLINE

    policy, spec = make(tmp_path)
    spare = replace(spec, cmd=TRAMPOLINE)
    mem = policy.limits.max_memory
    assert per_process_limits(policy, spare) == (
        [],
        f"ulimit -f {(1 << 20) // 1024} -u 10 -d {mem // 1024} || exit 125; {TRAMPOLINE}",
    )
    odd = replace(policy, limits=replace(policy.limits, max_file_size=1000))
    posix = replace(spare, env={**spare.env, "POSIXLY_CORRECT": "1"})
    shellopts = replace(spare, env={**spare.env, "SHELLOPTS": "posix"})
    for p, s in ((odd, spare), (policy, posix), (policy, shellopts), (policy, spec)):
        limits, cmd = per_process_limits(p, s)
        assert cmd == s.cmd
        if prlimit_path():
            size = p.limits.max_file_size
            assert limits[0] == prlimit_path() and limits[1] == f"--fsize={size}:{size}"
