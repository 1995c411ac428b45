"""#15 classes 6 and 7: the guard cannot be stalled, frozen, blinded, locked out or poisoned, and
no host call waits on a file a sandbox can touch.

Through the product's spawn path (``SessionManager``; the RPC layer ``Service`` for class 7) under
every confining backend. The lock-out and blinding cases run as a normal user (``rbtest``), where
file permissions and the inotify limits apply; they are skipped when that user does not exist.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from run_bash.service import Service
from tests.conftest import ROOT
from tests.security.conftest import CONTROL, backend_or_skip, selected_backends
from tests.security.test_hostread import fsmonitor_cfg, git, hook, pwned

LEASE = textwrap.dedent(
    """\
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDONLY)
    fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)  # F_SETLEASE: every other open now waits for us
    print("LEASED", flush=True)
    time.sleep(float(sys.argv[2]))
    print("LEASE-KEPT", flush=True)
    """
)


def test_stall_40000_hardlinks_into_hooks(sbx, world):
    """40,000 names of a file just over 4 MiB moved into .git/hooks, then .git/config rewritten:
    the guard's work is bounded by what it keeps, so the config change never sticks and the run
    is stopped at the first name (sandlock); bubblewrap's read-only binds refuse both. No run can
    make a hard link (``seccomp.LINKS``): the 40,000 names are the user's, made before the run."""
    script = textwrap.dedent(
        f"""\
        import os
        print("{CONTROL}", flush=True)
        for i in range(40000):
            try:
                os.rename(f"links/h{{i}}", f".git/hooks/h{{i}}")
            except OSError:
                pass
        with open(".git/config", "a") as f:
            f.write('[core]\\n\\tfsmonitor = "touch {world.home}/PWNED-stall; false"\\n')
        print("CONFIG-WRITTEN", flush=True)
        """
    )
    (world.project / "stall.py").write_text(script)
    big = world.project / "big"
    big.write_bytes(b"#!/bin/sh\n" + b"#" * (4 * 1024 * 1024 + 64))
    links = world.project / "links"
    links.mkdir()
    for i in range(40000):  # hard links the user made, which a run can still move
        os.link(big, links / f"h{i}")
    config = (world.project / ".git/config").read_bytes()
    hooks = sorted(p.name for p in (world.project / ".git/hooks").iterdir())
    r = sbx.run("python3 stall.py", timeout=120)
    assert CONTROL in r.output, r.output  # the run started
    assert "CONFIG-WRITTEN" not in r.output, r.output
    assert (world.project / ".git/config").read_bytes() == config
    assert sorted(p.name for p in (world.project / ".git/hooks").iterdir()) == hooks
    git(world, "status")
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert pwned(world) == []


def test_stall_a_flood_of_names_before_a_new_nvim_lua(sbx, world):
    """40,000 names created in the project's root (every one an event in a watched directory),
    then `.nvim.lua`, which does not exist yet and so is not bound on either backend: the run is
    stopped and the file removed; the flood itself is harmless and stays."""
    script = textwrap.dedent(
        f"""\
        import os, time
        os.mkdir("flood")
        for i in range(40000):
            open(f"flood/n{{i}}", "w").close()
        for i in range(40000):
            os.rename(f"flood/n{{i}}", f"n{{i}}")
        print("{CONTROL}", flush=True)
        with open(".nvim.lua", "w") as f:
            f.write('os.execute("touch {world.home}/PWNED-nvim")')
        time.sleep(5)
        print("survived", flush=True)
        """
    )
    (world.project / "flood.py").write_text(script)
    r = sbx.run("python3 flood.py", timeout=120)
    assert CONTROL in r.output and (world.project / "n39999").exists(), r.output
    assert "survived" not in r.output, r.output
    assert not (world.project / ".nvim.lua").exists()


def drive(loop: asyncio.AbstractEventLoop, cond, timeout: float = 30.0) -> None:
    async def wait() -> None:
        while not cond():
            await asyncio.sleep(0.02)

    loop.run_until_complete(asyncio.wait_for(wait(), timeout))


@pytest.mark.parametrize("prepare", [False, True])
@pytest.mark.parametrize("backend", selected_backends())
def test_host_calls_answer_while_a_run_holds_a_lease(world, tmp_path, backend, prepare):
    """Class 7 and the freeze: a background run holds a write lease on .git/config (any open of
    it by another process would wait 45 s). The host's RPCs answer at once meanwhile, a second run
    starts and ends, and its post-run check treats the lease as tampering: the holder is stopped
    and the file put back. With sandboxes prepared ahead (the default) and without."""
    from run_bash.config import parse_config

    backend_or_skip(backend, parse_config({"sandbox": {"backend": backend}}))
    (world.project / "lease.py").write_text(LEASE)
    events: list[tuple[str, dict]] = []
    loop = asyncio.new_event_loop()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    svc = Service(loop, lambda n, p: events.append((n, p)), environ=world.env, state_dir=str(state))
    svc.setup({"sandbox": {"backend": backend, "prepare": prepare}})
    try:
        cwd = str(world.project)
        holder = svc.run({"cmd": "python3 lease.py .git/config 40", "cwd": cwd, "bg_after": 1})
        drive(loop, lambda: any(n == "result" and p["id"] == holder["id"] for n, p in events))
        first = next(p for n, p in events if n == "result" and p["id"] == holder["id"])
        assert first["status"] == "running", first
        seen = [first["output"]]
        drive(
            loop,
            lambda: "LEASED" in "".join(seen) or seen.append(svc.output(holder["id"])["output"]),
        )

        for call in (
            lambda: svc.sessions(),
            lambda: svc.output(holder["id"]),
            lambda: svc.run({"cmd": f"echo {CONTROL}", "cwd": cwd}),
        ):
            t0 = time.monotonic()
            out = call()
            # Far below the 45 s an open of the leased file would wait.
            assert time.monotonic() - t0 < 5, out
        second = out["id"]
        drive(loop, lambda: any(n == "result" and p["id"] == second for n, p in events), 60)
        res = next(p for n, p in events if n == "result" and p["id"] == second)
        assert res["status"] == "exited" and CONTROL in res["output"], res
        assert any(".git/config" in n for n in res["notices"]), res["notices"]
        # The holder was stopped well before its 40 s were up.
        drive(loop, lambda: any(n == "exited" and p["id"] == holder["id"] for n, p in events), 30)
        ended = next(p for n, p in events if n == "exited" and p["id"] == holder["id"])
        assert ended["status"] != "running"
        assert "LEASE-KEPT" not in svc.output(holder["id"], {"tail": 20})["output"]
    finally:
        loop.run_until_complete(svc.mgr.shutdown())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
    assert b"fsmonitor" not in (world.project / ".git/config").read_bytes()


def test_poison_a_second_run_never_trusts_what_the_first_planted(sbx, world):
    """Run A (background) holds a lease on .git/config and plants files the host runs; run B
    starts meanwhile and ends. B must not take A's plants for the trusted state: after both,
    nothing of A is left and the outside commit runs nothing."""
    (world.project / "lease.py").write_text(LEASE)
    plant = (
        f"{hook(world, 'poison')} > .git/hooks/post-commit; chmod +x .git/hooks/post-commit; "
        f"echo 'touch {world.home}/PWNED-envrc' > .envrc; "
        f"{fsmonitor_cfg(world, 'poison')} >> .git/config"
    )
    a = sbx.start(
        f"python3 lease.py .git/config 30 & sleep 0.5; {plant}; wait", bg_after=1, timeout=60
    )
    sbx.first_result(a)
    b = sbx.run(f"echo {CONTROL} > b.txt && cat b.txt")
    assert CONTROL in b.output, b
    sbx.wait(a)
    assert not (world.project / ".git/hooks/post-commit").exists()
    assert not (world.project / ".envrc").exists()
    assert b"fsmonitor" not in (world.project / ".git/config").read_bytes()
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert pwned(world) == []


# -- as a normal user ----------------------------------------------------------------------------

USER = "rbtest"


def as_user_available() -> str | None:
    """Why the normal-user tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root to switch to the test user"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no user {USER}"
    if not shutil.which("runuser") or not os.path.exists("/usr/bin/python3"):
        return "runuser or /usr/bin/python3 missing"
    site = ROOT / ".venv/lib/python3.11/site-packages"
    if not site.is_dir() or sys.version_info[:2] != (3, 11):
        return "the venv is not Python 3.11 (the system python the user runs)"
    return None


DRIVER = textwrap.dedent(
    """\
    import json, os, shutil, subprocess, sys, tempfile
    from pathlib import Path
    from tests.security.conftest import make_world, Runner
    backend, scenario = sys.argv[1], sys.argv[2]
    root = Path(tempfile.mkdtemp(prefix="rb-user-", dir="/tmp"))
    out = {}
    try:
        world = make_world(root)
        code = sys.stdin.read()
        try:
            rb = Runner(backend, world)  # every scenario's runner, as this user
        except BaseException as e:
            out["skip"] = f"{backend} unavailable for {os.getuid()}: {e}"
        else:
            exec(compile(code, "scenario", "exec"))
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(root)])
        shutil.rmtree(root, ignore_errors=True)
    print("RESULT " + json.dumps(out))
    """
)


def run_as_user(backend: str, scenario: str) -> dict:
    why = as_user_available()
    if why:
        pytest.skip(why)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": pwd.getpwnam(USER).pw_dir,
        "PYTHONPATH": f"{ROOT / '.venv/lib/python3.11/site-packages'}:{ROOT / 'python'}:{ROOT}",
        "LANG": "C.UTF-8",
    }
    r = subprocess.run(
        [
            shutil.which("runuser") or "runuser",
            "-u",
            USER,
            "--",
            "/usr/bin/python3",
            "-c",
            DRIVER,
            backend,
            "x",
        ],
        input=textwrap.dedent(scenario),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd="/tmp",
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(lines[-1][7:])
    if out.get("skip"):
        pytest.skip(out["skip"])
    return out


LOCKOUT = """
from tests.security.test_hostread import git, pwned, hook, fsmonitor_cfg
from tests.security.conftest import backend_or_skip
import stat
p = world.project
before = {
    "config": (p / ".git/config").read_text(),
    "hooks": sorted(x.name for x in (p / ".git/hooks").iterdir()),
    "git_mode": stat.S_IMODE(os.stat(p / ".git").st_mode),
    "hooks_mode": stat.S_IMODE(os.stat(p / ".git/hooks").st_mode),
}
attack = (
    f"echo ok > ok.txt && echo CONTROL-OK; {hook(world, 'lock')} > .git/hooks/post-commit; "
    f"chmod +x .git/hooks/post-commit; {fsmonitor_cfg(world, 'lock')} >> .git/config; "
    "echo evil > .envrc; chmod 0500 .git/hooks .git; sleep 3; echo survived"
)
r = rb.run(attack)
out["output"] = r.output
out["notices"] = list(r.notices)
out["config_same"] = (p / ".git/config").read_text() == before["config"]
out["hooks_same"] = sorted(x.name for x in (p / ".git/hooks").iterdir()) == before["hooks"]
out["modes_same"] = (
    stat.S_IMODE(os.stat(p / ".git").st_mode) == before["git_mode"]
    and stat.S_IMODE(os.stat(p / ".git/hooks").st_mode) == before["hooks_mode"]
)
out["envrc"] = os.path.lexists(p / ".envrc")
git(world, "status")
git(world, "commit", "-q", "--allow-empty", "-m", "x")
out["pwned"] = pwned(world)
rb.close()
"""


@pytest.mark.parametrize("backend", selected_backends())
def test_lockout_chmod_0500_as_a_normal_user(backend):
    """As a normal user a run makes .git and .git/hooks unwritable after tampering: the restore
    happens as the owner all the same, the modes come back, and a notice says "restored" only
    for what was checked to be restored."""
    out = run_as_user(backend, LOCKOUT)
    assert "CONTROL-OK" in out["output"], out
    assert out["config_same"] and out["hooks_same"] and out["modes_same"], out
    assert not out["envrc"], out
    assert out["pwned"] == [], out
    for n in out["notices"]:
        assert "could not" not in n, out


BLIND = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
p = world.project
# 1. Another program of the user holds every inotify instance before the host has one: the run
#    does not start, and says why.
held = []
while True:
    fd = libc.inotify_init1(0o2000000)
    if fd < 0:
        break
    held.append(fd)
out["held"] = len(held)
try:
    rb.run("echo never-ran")
    out["refused"] = ""
except Exception as e:
    out["refused"] = str(e)
for fd in held:
    os.close(fd)
# 2. The control: with instances free the same run starts.
out["control"] = rb.run("echo CONTROL-OK").output
# 3. Now a background run exhausts the instances itself; the next run is still guarded live.
bg = rb.start(
    "python3 -c 'import ctypes,time; l=ctypes.CDLL(None); "
    "fds=[l.inotify_init1(0) for _ in range(4096)]; print(\\"EXHAUSTED\\", sum(f>=0 for f in fds), flush=True); time.sleep(30)'",
    bg_after=1, timeout=60,
)
out["bg"] = rb.wait_output(bg, "EXHAUSTED", timeout=60)
r = rb.run("echo evil >> .git/config; echo evil > .envrc; sleep 5; echo survived")
out["next_output"] = r.output
out["next_notices"] = list(r.notices)
out["envrc"] = os.path.lexists(p / ".envrc")
out["config_clean"] = "evil" not in (p / ".git/config").read_text()
rb.kill(bg)
rb.close()
"""


@pytest.mark.parametrize("backend", selected_backends())
def test_blind_inotify_exhausted_as_a_normal_user(backend):
    out = run_as_user(backend, BLIND)
    assert out["held"] > 0, out
    assert "cannot watch" in out["refused"] and "max_user_instances" in out["refused"], out
    assert "CONTROL-OK" in out["control"], out
    assert "EXHAUSTED" in out["bg"], out
    # Not "checked after the run": the tampering run was stopped while it ran.
    assert "survived" not in out["next_output"], out
    assert not out["envrc"] and out["config_clean"], out
