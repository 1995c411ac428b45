"""The "held in every test" list of design section 7: /proc of outside processes, ptrace, signals to
outside processes, TIOCSTI, symlink/hardlink/.. tricks on denied paths, escapes from kill."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.security.conftest import SECRET


@pytest.fixture
def outsider():
    """A process outside the sandbox carrying a secret in its environment."""
    env = {**os.environ, "OUTSIDE_SECRET": SECRET + "-outside"}
    p = subprocess.Popen(["sleep", "60"], env=env)
    yield p
    p.kill()
    p.wait()


def test_proc_of_outside_process(sbx, outsider):
    """Environment, memory and open files of an outside process stay out of reach (sandlock: the
    path of its cwd and its command line are visible; documented)."""
    pid = outsider.pid
    r = sbx.run(
        f"cat /proc/{pid}/environ; echo; echo fds=$(ls /proc/{pid}/fd 2>/dev/null | wc -l); "
        f"head -c 64 /proc/{pid}/mem | wc -c; cat /proc/{os.getpid()}/environ; "
        f"cat /proc/{pid}/root/etc/hostname >/dev/null 2>&1 && echo ROOT-OPEN"
    )
    assert SECRET not in r.output
    assert "fds=0" in r.output
    assert "ROOT-OPEN" not in r.output


def test_ptrace_outside_process(sbx, outsider):
    r = sbx.run(
        'python3 -c "import ctypes,sys;libc=ctypes.CDLL(None,use_errno=True);'
        f"rc=libc.ptrace(16,{outsider.pid},0,0);print('ATTACHED' if rc==0 else 'denied')\""
    )
    assert "ATTACHED" not in r.output
    assert outsider.poll() is None
    # A stopped (traced) process would show state T.
    with open(f"/proc/{outsider.pid}/stat") as f:
        assert f.read().split(") ")[1][0] != "t"


def test_signal_outside_process(sbx, outsider):
    r = sbx.run(f"kill -9 {outsider.pid}; echo rc=$?; kill -STOP {outsider.pid}; echo rc2=$?")
    time.sleep(0.1)
    assert outsider.poll() is None, r.output
    with open(f"/proc/{outsider.pid}/stat") as f:
        assert f.read().split(") ")[1][0] in "SR"


def test_tiocsti(sbx):
    code = (
        "import fcntl, termios, os\n"
        "for path in ('/dev/tty', '/dev/console', '/dev/tty0'):\n"
        "    try:\n"
        "        fd = os.open(path, os.O_RDWR)\n"
        "    except OSError as e:\n"
        "        print('open', path, e.errno); continue\n"
        "    try:\n"
        "        fcntl.ioctl(fd, termios.TIOCSTI, b'x'); print('INJECTED', path)\n"
        "    except OSError as e:\n"
        "        print('ioctl', path, e.errno)\n"
        "for fd in (0, 1, 2):\n"
        "    try:\n"
        "        fcntl.ioctl(fd, termios.TIOCSTI, b'x'); print('INJECTED', fd)\n"
        "    except OSError as e:\n"
        "        print('ioctl', fd, e.errno)\n"
    )
    r = sbx.run(f"python3 - <<'EOF'\n{code}EOF")
    assert "INJECTED" not in r.output, r.output


TRICKS = {
    "dotdot": "cat ~/.cache/../.ssh/id_rsa ./../.ssh/id_rsa",
    "symlink": "ln -s ~/.ssh/id_rsa l && cat l; ln -s ~/.ssh d && cat d/id_rsa",
    "hardlink": "ln ~/.ssh/id_rsa h && cat h",
    "proc_root": "cat /proc/self/root$HOME/.ssh/id_rsa /proc/1/root$HOME/.ssh/id_rsa",
    "proc_cwd": "cd ~ 2>/dev/null; cat /proc/self/cwd/.ssh/id_rsa",
    "copy": "cp -r ~/.ssh ./stolen; cat stolen/id_rsa",
    "tar": "tar cf - -C ~ .ssh .aws .netrc 2>/dev/null | tar tvf - ; tar xOf - < /dev/null",
    "python_open": "python3 -c \"print(open('$HOME/.aws/credentials').read())\"",
    "find": "find ~ -name 'id_rsa' -exec cat {} \\;",
    "grep": "grep -r S3CR3T ~ 2>/dev/null | head",
    "dirfd": "python3 -c \"import os;d=os.open('$HOME',os.O_RDONLY|os.O_PATH);"
    "print(open(os.open('.ssh/id_rsa',os.O_RDONLY,dir_fd=d)).read())\"",
}


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_tricks_on_denied_paths(sbx, world, trick):
    # HOME readable (a user rule), secrets denied by default: the deny must hold against tricks.
    rb = sbx.with_config(sandbox={"rules": {"fs_readable": ["~"]}})
    r = rb.run(TRICKS[trick])
    assert SECRET not in r.output, r.output
    assert not (world.project / "h").exists() or SECRET not in (world.project / "h").read_text()


def test_escape_from_kill_setsid_double_fork(sbx):
    """setsid and double-forked processes die with the run (the runtime's sweep, and for bwrap
    the pid namespace)."""
    marker = f"rb-escape-{os.getpid()}"
    cmd = (
        f"setsid sleep 301 {marker} & (sleep 302 {marker} &) ; "
        f"nohup sleep 303 {marker} >/dev/null 2>&1 & echo up"
    )
    r = sbx.run(cmd)
    assert "up" in r.output
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == [], left
