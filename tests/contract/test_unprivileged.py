"""Runs as a normal user: what most users are. The suite itself often runs as root, whose
namespaces and capabilities hide what a normal user lacks (a bubblewrap run inside the project's
network namespace once failed for every normal user: ``unshare: Operation not permitted``).
As root, the runtime (``SessionManager``, the real backends, their launcher and prepared
sandboxes) is run as ``nobody`` with ``setpriv``; as a normal user, as that user.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from run_bash.sandbox.base import BACKEND_NAMES

SCRIPT = r"""
import asyncio, json, os, sys
sys.path.insert(0, sys.argv[1])
from run_bash.config import parse_config
from run_bash.sandbox.base import get_backend
from run_bash.sessions import SessionManager

CMD = "echo hi; id -u; readlink /proc/self/ns/net"


async def main(backend, base):
    cfg = parse_config({"sandbox": {"backend": backend}})
    avail = get_backend(backend, cfg).availability()
    if not avail.ok:
        print(json.dumps({"unavailable": avail.reason}))
        return
    out = {}
    for prepare in (True, False):
        d = os.path.join(base, f"prepare-{prepare}")
        proj = os.path.join(d, "proj")
        os.makedirs(proj)
        cfg = parse_config({"sandbox": {"backend": backend, "prepare": prepare}})
        environ = {"PATH": os.environ["PATH"], "HOME": d, "XDG_STATE_HOME": os.path.join(d, "xs")}
        m = SessionManager(
            cfg, loop=asyncio.get_running_loop(), state_dir=os.path.join(d, "state"),
            environ=environ,
        )
        os.makedirs(m.state_dir, mode=0o700, exist_ok=True)
        rows = []
        try:
            for _ in range(3):  # the first builds its sandbox; prepared ones take a spare
                s = m.start(CMD, cwd=proj, unsandboxed_ok=backend == "none")
                r = await asyncio.wait_for(m.wait_result(s.id), 60)
                rows.append([r.status, r.exit_code, r.output, r.sandboxed])
        finally:
            await m.shutdown()
        out[str(prepare)] = rows
    print(json.dumps(out))


asyncio.run(main(sys.argv[2], sys.argv[3]))
"""


@pytest.fixture
def as_user():
    """(argv prefix that runs a command as a normal user, that user's uid, a directory it owns)."""
    if os.geteuid() != 0:
        prefix: list[str] = []
        uid = os.getuid()
    else:
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv (util-linux) to run as another user")
        try:
            uid = pwd.getpwnam("nobody").pw_uid
        except KeyError:
            pytest.skip("no user nobody to run as")
        prefix = [
            "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all",
        ]  # fmt: skip
    d = Path(tempfile.mkdtemp(prefix="run_bash-user-"))
    os.chmod(d, 0o755)
    # A copy of the package the user can read (the worktree may not be).
    shutil.copytree(Path(__file__).resolve().parents[2] / "python", d / "python")
    (d / "runs").mkdir()
    if os.geteuid() == 0:
        for p in (d / "runs", d / "python"):
            os.chown(p, uid, uid)
    yield prefix, uid, d
    shutil.rmtree(d, ignore_errors=True)


def interpreter(prefix: list[str], uid: int) -> tuple[str, dict[str, str]]:
    """A Python the user can start, and start again (the sandbox launcher runs the host's
    interpreter), with this venv's packages: the venv's own, else the system's of the same
    version with the venv's site-packages on its path (a venv's base may be in a home the user
    cannot enter)."""
    site = [p for p in sys.path if p.endswith("site-packages")]
    check = (
        "import subprocess, sys; import sandlock, msgpack; "
        "subprocess.run([sys.executable, '-c', 'import sandlock'], check=True)"
    )
    why = ""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    system = {"PYTHONPATH": os.pathsep.join(site)}
    for exe, env in (
        (sys.executable, {}),
        *((f"{d}/{version}", system) for d in ("/usr/bin", "/usr/local/bin")),
    ):
        if not os.path.exists(exe):
            continue
        env = {"PATH": os.environ["PATH"], **env}
        probe = subprocess.run(
            [*prefix, exe, "-c", check], capture_output=True, text=True, env=env, cwd="/"
        )
        if probe.returncode == 0:
            return exe, env
        why = probe.stderr.strip().splitlines()[-1:] or [f"exit {probe.returncode}"]
    pytest.skip(f"no Python with this venv's packages that uid {uid} can start: {why[0]}")


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_a_normal_user_runs_commands_on_every_backend(as_user, backend):
    prefix, uid, d = as_user
    exe, env = interpreter(prefix, uid)
    proc = subprocess.run(
        [*prefix, exe, "-c", SCRIPT, str(d / "python"), backend, str(d / "runs")],
        capture_output=True, text=True, timeout=300, cwd="/", env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if "unavailable" in out:
        pytest.skip(f"{backend} is unavailable to uid {uid}: {out['unavailable']}")
    host_net = os.readlink("/proc/self/ns/net")
    for prepare, rows in out.items():
        assert len(rows) == 3, (prepare, rows)
        for status, code, output, sandboxed in rows:
            assert (status, code) == ("exited", 0), (backend, prepare, output)
            hi, who, net = output.splitlines()
            assert (hi, who) == ("hi", str(uid)), (backend, prepare, output)
            assert sandboxed is (backend != "none")
            # Confined runs are in the project's loopback-only network namespace; `none`, the
            # control, shows the reading sees the host's.
            assert (net == host_net) is (backend == "none"), (backend, prepare, net, host_net)
