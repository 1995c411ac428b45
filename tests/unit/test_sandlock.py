"""sandlock policy translation: pure (no sandbox is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.sandbox.base import RunSpec
from run_bash.sandbox.policy import Limits, Policy
from run_bash.sandbox.sandlock import Sandlock, map_extra_args

pytest.importorskip("sandlock")


def make(tmp_path: Path, **over) -> tuple[Policy, RunSpec]:
    proj = tmp_path / "proj"
    (proj / ".git/hooks").mkdir(parents=True)
    policy = Policy(
        cwd=str(proj),
        home=str(tmp_path),
        readable=["/usr"],
        writable=[str(proj), "/dev/null"],
        denied=["/etc/shadow"],
        protected=[str(proj / ".git/config"), str(proj / ".git/hooks"), str(proj / ".envrc")],
        git_dirs=[str(proj / ".git")],
        read_only=[str(tmp_path / ".cache/nvim")],
        blocked_local_ports=[5432],
        network_allow=["pypi.org:443"],
        limits=Limits(10, 1 << 30, 1 << 20),
        **over,
    )
    (tmp_path / "tmp").mkdir()
    spec = RunSpec(
        cmd="echo hi",
        cwd=str(proj),
        env={"PATH": "/usr/bin"},
        stdout_fd=1,
        tmpdir=str(tmp_path / "tmp"),
        session_id="abc",
    )
    return policy, spec


def test_kwargs(tmp_path):
    policy, spec = make(tmp_path)
    kw, notes = Sandlock(parse_config({})).sandbox_kwargs(policy, spec)
    assert kw["clean_env"] is True
    assert kw["env"]["TMPDIR"] == str(tmp_path / "tmp")
    assert str(tmp_path / "tmp") in kw["fs_writable"]
    assert "/tmp" not in kw["fs_writable"] and "chroot" not in kw
    assert kw["cwd"] == spec.cwd
    assert kw["max_processes"] == 10 and kw["max_memory"] == 1 << 30
    # read-only carve-outs are denied; members of the host-read set are not (a deny of a name
    # that does not exist yet makes git warn on every read; the guard keeps them)
    assert str(tmp_path / ".cache/nvim") in kw["fs_denied"]
    assert str(Path(spec.cwd) / ".envrc") not in kw["fs_denied"]
    assert str(Path(spec.cwd) / ".git/hooks") not in kw["fs_denied"]
    # network: user endpoints + loopback TCP, minus other services' ports
    assert "pypi.org:443" in kw["net_allow"]
    assert "tcp://127.0.0.0/8:*" in kw["net_allow"]
    assert "tcp://127.0.0.0/8:5432" in kw["net_deny"]
    assert kw["net_allow_bind"] == ["*"]
    assert notes == []


def test_argv_is_plain_bash():
    argv = Sandlock(parse_config({})).argv("true")
    assert argv[1:] == ["-c", "true"] and argv[0].endswith("bash")


def test_spawner_thread_holds_no_capabilities():
    from run_bash.sandbox.capabilities import capless_spawner

    def caps():
        with open("/proc/thread-self/status") as f:
            return {ln.split()[0]: int(ln.split()[1], 16) for ln in f if ln.startswith("Cap")}

    spawner = capless_spawner()
    assert spawner.error is None
    assert set(spawner.call(caps).values()) == {0}
    with pytest.raises(ZeroDivisionError):
        spawner.call(lambda: 1 / 0)
    assert spawner.call(lambda: 42) == 42


def test_profile_is_merged(tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text(
        '[filesystem]\nread = ["/opt"]\nwrite = ["/tmp", "/var/tmp"]\ndeny = ["/root"]\n'
        '[network]\nallow = ["tcp://*:443"]\n'
    )
    cfg = parse_config({"sandbox": {"backends": {"sandlock": {"profile": str(prof)}}}})
    b = Sandlock(cfg)
    assert b.validate() == []
    policy, spec = make(tmp_path)
    kw, notes = b.sandbox_kwargs(policy, spec)
    assert "/root" in kw["fs_denied"]
    assert "tcp://*:443" in kw["net_allow"]
    assert "/tmp" not in kw["fs_writable"]
    assert any("/tmp" in n for n in notes)


def test_profile_problems(tmp_path):
    b = Sandlock(
        parse_config({"sandbox": {"backends": {"sandlock": {"profile": str(tmp_path / "x")}}}})
    )
    assert "does not exist" in b.validate()[0]
    bad = tmp_path / "bad.toml"
    bad.write_text("[filesystem\n")
    b = Sandlock(parse_config({"sandbox": {"backends": {"sandlock": {"profile": str(bad)}}}}))
    assert b.validate()


def test_extra_args_mapping_and_warning():
    mapped, unmapped = map_extra_args(["-w", "/a", "--fs-read=/b", "--port-remap", "--foo", "-r"])
    assert mapped == {"fs_writable": ["/a"], "fs_readable": ["/b"]}
    assert unmapped == ["--foo", "-r"]
    b = Sandlock(
        parse_config({"sandbox": {"backends": {"sandlock": {"extra_args": ["-w", "/a", "--x"]}}}})
    )
    w = b.warnings()
    assert any("sandbox.rules.fs_writable" in x for x in w)
    assert any("--x" in x for x in w)
    assert b.validate() == []


def test_availability_is_cached():
    b = Sandlock(parse_config({}))
    a = b.availability()
    assert b.availability() is a
    assert a.version.startswith("sandlock")
