"""sandlock policy translation: pure (no sandbox is started)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.sandbox.base import RunSpec
from run_bash.sandbox.loopback import (
    WELL_KNOWN_SERVICE_PORTS,
    LoopbackGate,
    denied_binds,
    is_local,
    local_ports_allowed,
)
from run_bash.sandbox.policy import Limits, Policy
from run_bash.sandbox.sandlock import Layout, Sandlock
from run_bash.sandbox.sandlock_options import map_extra_args

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


def test_kwargs_in_the_mount_namespace(tmp_path):
    policy, spec = make(tmp_path)
    b = Sandlock(parse_config({}))
    kw, notes = b.sandbox_kwargs(policy, spec, Layout(mount_ns=True, shared_netns=True))
    assert kw["clean_env"] is True
    # /tmp, /var/tmp and /dev/shm are the private dir's binds inside the namespace
    assert kw["env"]["TMPDIR"] == "/tmp"
    assert "/tmp" in kw["fs_writable"] and str(tmp_path / "tmp") not in kw["fs_writable"]
    assert "chroot" not in kw
    assert kw["cwd"] == spec.cwd
    assert kw["max_processes"] == 10 and kw["max_memory"] == 1 << 30
    # denied and protected paths are mounts; only a missing read-only carve-out stays denied
    assert kw["fs_denied"] == [str(tmp_path / ".cache/nvim")]
    # the shared loopback-only namespace: every loopback port, any bind
    assert "pypi.org:443" in kw["net_allow"] and "tcp://127.0.0.1:*" in kw["net_allow"]
    assert kw["net_allow_bind"] == ["*"] and "net_deny" not in kw and "net_deny_bind" not in kw
    assert notes == []


def test_kwargs_without_a_mount_namespace(tmp_path):
    policy, spec = make(tmp_path)
    b = Sandlock(parse_config({}))
    kw, _notes = b.sandbox_kwargs(policy, spec, Layout(mount_ns=False, shared_netns=False))
    assert kw["env"]["TMPDIR"] == str(tmp_path / "tmp")
    assert str(tmp_path / "tmp") in kw["fs_writable"] and "/tmp" not in kw["fs_writable"]
    # read-only carve-outs are denied; members of the host-read set are not (a deny of a name
    # that does not exist yet makes git warn on every read of it; the guard keeps them)
    assert str(tmp_path / ".cache/nvim") in kw["fs_denied"]
    assert str(Path(spec.cwd) / ".envrc") not in kw["fs_denied"]
    assert str(Path(spec.cwd) / ".git/hooks") not in kw["fs_denied"]
    # the host's network: binds only above 1024, off the well-known service ports
    assert kw["net_allow_bind"] == ["*"] and kw["net_deny_bind"] == denied_binds()


def test_request_binds_protected_paths_and_hides_denied_ones(tmp_path):
    policy, spec = make(tmp_path, allow_local_ports=[8080])
    proj = Path(spec.cwd)
    (proj / ".git/config").write_text("[core]\n")
    (proj / ".envrc").symlink_to("elsewhere")  # a symlink is watched, never bound
    secret = proj / "secret.env"
    secret.write_text("x")
    policy.denied.append(str(secret))
    tools = tmp_path / "tools"
    tools.mkdir()
    policy.readable.append(str(tools))
    req, _ = Sandlock(parse_config({})).request(policy, spec, Layout(True, False))
    # exactly the policy's binds, in its order: .git onto itself, then the members read-only
    assert req["binds"] == policy.protect_binds()
    assert req["binds"] == [
        ("self", str(proj / ".git")),
        ("ro", str(proj / ".git/config")),
        ("ro", str(proj / ".git/hooks")),
    ]
    assert req["hide"] == [str(secret)]  # /etc/shadow is not granted here: Landlock denies it
    # the project lies under /tmp: bound back over the private /tmp, parents first
    assert ("rw", str(proj)) in req["reexpose"] and all(p != "/tmp" for _, p in req["reexpose"])
    # a readable grant there is a read-only bind: the write grant of /tmp would cover it
    assert ("ro", str(tools)) in req["reexpose"]
    assert req["gate"] == {"owner": os.getpid(), "allowed": [8080], "every": False}
    assert req["argv"][1:] == ["-c", "echo hi"] and req["max_file_size"] == 1 << 20


def test_denied_binds_cover_privileged_and_well_known_ports():
    denied = denied_binds()
    assert denied[0] == "1-1023"
    assert sorted(int(p) for p in denied[1:]) == sorted(WELL_KNOWN_SERVICE_PORTS)
    assert all(p >= 1024 for p in WELL_KNOWN_SERVICE_PORTS)


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("0.0.0.0", True),
        ("::", True),
        ("::ffff:127.0.0.1", True),
        ("192.0.2.1", False),
        ("2001:db8::1", False),
        ("localhost", False),  # sandlock reports addresses, never names
    ],
)
def test_is_local(host, local):
    assert is_local(host) is local


def test_local_ports_allowed_by_network_allow():
    ports, every = local_ports_allowed(["pypi.org:443", "localhost:5432", "*:8443", "[::1]:9"])
    assert ports == {5432, 8443, 9} and not every
    assert local_ports_allowed(["127.0.0.1:*"]) == (set(), True)


def test_gate_lets_through_owned_and_allowed_ports_only():
    """A listener held by a descendant of the owner is reachable; one held by the owner itself
    (a host service, from the gate's view) is refused; an allowed port is reachable."""
    import socket
    import subprocess
    import sys
    from types import SimpleNamespace

    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); "
            "print(s.getsockname()[1], flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen()
    try:
        owned = int(child.stdout.readline())
        foreign = host.getsockname()[1]
        gate = LoopbackGate(os.getpid(), allowed=[7])

        def connect(h, port):
            return gate(SimpleNamespace(syscall="connect", host=h, port=port))

        assert connect("127.0.0.1", owned) == 0
        assert connect("127.0.0.1", foreign) == errno.ECONNREFUSED
        assert connect("::ffff:127.0.0.1", foreign) == errno.ECONNREFUSED
        assert connect("127.0.0.1", 7) == 0  # allowed, listener or not
        assert connect("192.0.2.1", foreign) == 0  # not loopback: sandlock's own rules decide
        assert gate(SimpleNamespace(syscall="bind", host="127.0.0.1", port=foreign)) == 0
        assert (
            LoopbackGate(os.getpid(), every=True)(
                SimpleNamespace(syscall="connect", host="127.0.0.1", port=foreign)
            )
            == 0
        )
    finally:
        child.kill()
        child.wait()
        host.close()


def test_argv_is_plain_bash():
    argv = Sandlock(parse_config({})).argv("true")
    assert argv[1:] == ["-c", "true"] and argv[0].endswith("bash")


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
    kw, notes = b.sandbox_kwargs(policy, spec, Layout(mount_ns=False, shared_netns=False))
    assert "/root" in kw["fs_denied"]
    assert "tcp://*:443" in kw["net_allow"]
    assert "/tmp" not in kw["fs_writable"]
    assert any("/tmp" in n and "dropped" in n for n in notes)
    # In the mount namespace /tmp is the private dir: the grant is kept and said so. A denied
    # path inside a grant is covered by a mount; one outside every grant needs nothing.
    (Path(spec.cwd) / "private").mkdir()
    prof.write_text(prof.read_text().replace('"/root"', f'"/root", "{spec.cwd}/private"'))
    req, notes = Sandlock(cfg).request(policy, spec, Layout(mount_ns=True, shared_netns=True))
    assert "/tmp" in req["sandbox"]["fs_writable"]
    assert req["hide"] == [f"{spec.cwd}/private"]
    assert "/root" not in req["sandbox"]["fs_denied"] + req["hide"]
    assert any("/tmp is the run's private temp dir" in n for n in notes)


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
