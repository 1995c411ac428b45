"""The "held in every test" list of design section 7: /proc of outside processes, ptrace, signals to
outside processes, TIOCSTI, symlink/hardlink/.. tricks on denied paths, escapes from kill.

Every negative check has a positive control in the same test: the same command aimed at something
it may touch (its own process, a readable file), or the same command without the sandbox, succeeds.
"""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests.conftest import wait_for
from tests.security.conftest import CONTROL, SECRET


@pytest.fixture
def outsider():
    """A process outside the sandbox carrying a secret in its environment."""
    env = {**os.environ, "OUTSIDE_SECRET": SECRET + "-outside"}
    p = subprocess.Popen(["sleep", "60"], env=env)
    yield p
    p.kill()
    p.wait()


def proc_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0]


def test_proc_of_outside_process(sbx, outsider):
    """Environment, memory and open files of an outside process stay out of reach (sandlock: the
    path of its cwd and its command line are visible; documented). The control reads the same
    files of the command's own process."""
    reads = (
        "cat /proc/{p}/environ; echo; echo fds-{n}=$(ls /proc/{p}/fd 2>/dev/null | wc -l); "
        "head -c 64 /proc/{p}/mem | wc -c; "
        "cat /proc/{p}/root/etc/hostname >/dev/null 2>&1 && echo ROOT-OPEN-{n}; "
    )
    r = sbx.run(
        reads.format(p=outsider.pid, n="outside")
        + f"cat /proc/{os.getpid()}/environ; "
        + reads.format(p="$$", n="own")
    )
    assert SECRET not in r.output
    assert "fds-outside=0" in r.output
    assert "ROOT-OPEN-outside" not in r.output
    # Control: the same reads of its own process work.
    assert "RUN_BASH_SESSION=" in r.output and "ROOT-OPEN-own" in r.output
    assert "fds-own=0" not in r.output


PTRACE = (
    'python3 -c "import ctypes;libc=ctypes.CDLL(None,use_errno=True);'
    "rc=libc.ptrace(16,{pid},0,0);print('ATTACHED' if rc==0 else 'denied')\""
)


def test_ptrace_outside_process(sbx, outsider):
    r = sbx.run(PTRACE.format(pid=outsider.pid))
    assert "denied" in r.output and "ATTACHED" not in r.output, r.output
    assert outsider.poll() is None
    assert proc_state(outsider.pid) != "t"  # a traced (stopped) process would show t
    # Control: without the sandbox the same command attaches (and detaches when it exits).
    control = sbx.unconfined().run(PTRACE.format(pid=outsider.pid))
    assert "ATTACHED" in control.output, control.output


def test_signal_outside_process(sbx, outsider):
    r = sbx.run(
        f"kill -9 {outsider.pid}; echo rc=$?; kill -STOP {outsider.pid}; echo rc2=$?; "
        "sleep 30 & kill -9 $!; echo own=$?"
    )
    assert "own=0" in r.output, r.output  # control: signalling its own process works
    assert "rc=0" not in r.output and "rc2=0" not in r.output, r.output
    assert outsider.poll() is None, r.output
    assert proc_state(outsider.pid) in "SR"


TIOCSTI = (
    "import fcntl, termios, os\n"
    "for path in ('/dev/tty', '/dev/console', '/dev/tty0'):\n"
    "    try:\n"
    "        fd = os.open(path, os.O_RDWR)\n"
    "    except OSError as e:\n"
    "        print('tried', path, 'open', e.errno); continue\n"
    "    try:\n"
    "        fcntl.ioctl(fd, termios.TIOCSTI, b'x'); print('INJECTED', path)\n"
    "    except OSError as e:\n"
    "        print('tried', path, 'ioctl', e.errno)\n"
    "for fd in (0, 1, 2):\n"
    "    try:\n"
    "        fcntl.ioctl(fd, termios.TIOCSTI, b'x'); print('INJECTED', fd)\n"
    "    except OSError as e:\n"
    "        print('tried', fd, 'ioctl', e.errno)\n"
)


def test_tiocsti(sbx):
    """No terminal input can be injected. The control is that every attempt was made and failed
    with its own error (the script itself ran); injecting into the test's real terminal without
    a sandbox is not something a test should do."""
    r = sbx.run(f"python3 - <<'EOF'\n{TIOCSTI}EOF")
    assert "INJECTED" not in r.output, r.output
    tried = [line for line in r.output.splitlines() if line.startswith("tried ")]
    assert len(tried) == 6, r.output


# Each trick reads `{d}/id_rsa` under HOME through some detour; {d} is `.ssh` (denied) and, as the
# control, `visible` (a readable directory holding a file of the same name). No hard link can be
# made in a run (``seccomp.LINKS``: EXDEV), so its control shows a link of a project file failing
# with that very error while the command goes on.
CONTROLS = {"hardlink": "ln ctl-file h-ctl 2>&1 | grep -q 'cross-device' && cat ctl-file"}
TRICKS = {
    "dotdot": "cat ~/.cache/../{d}/id_rsa ./../{d}/id_rsa",
    "symlink": "ln -s ~/{d}/id_rsa l-{d} && cat l-{d}; ln -s ~/{d} d-{d} && cat d-{d}/id_rsa",
    "hardlink": "ln ~/{d}/id_rsa h-{d} && cat h-{d}",
    "proc_root": "cat /proc/self/root$HOME/{d}/id_rsa /proc/1/root$HOME/{d}/id_rsa",
    "proc_cwd": "(cd ~ 2>/dev/null; cat /proc/self/cwd/{d}/id_rsa)",
    "copy": "cp -r ~/{d} ./stolen-{d}; cat stolen-{d}/id_rsa",
    "tar": "tar cf - -C ~ {d} 2>/dev/null | tar xOf - 2>/dev/null",
    "python_open": "python3 -c \"print(open('$HOME/{d}/id_rsa').read())\"",
    "find": "find ~/{d} -name 'id_rsa' -exec cat {{}} \\;",
    "grep": "grep -r -h -e S3CR3T -e VISIBLE ~/{d} 2>/dev/null | head",
    "dirfd": "python3 -c \"import os;d=os.open('$HOME',os.O_RDONLY|os.O_PATH);"
    "print(open(os.open('{d}/id_rsa',os.O_RDONLY,dir_fd=d)).read())\"",
}


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_tricks_on_denied_paths(sbx, world, trick):
    # HOME readable (a user rule), secrets denied by default: the deny must hold against tricks,
    # while the same trick on a readable directory works.
    visible = world.home / "visible"
    visible.mkdir()
    (visible / "id_rsa").write_text("VISIBLE-" + CONTROL + "\n")
    (world.project / "ctl-file").write_text(CONTROL + "\n")
    rb = sbx.with_config(sandbox={"rules": {"fs_readable": ["~"]}})
    control = CONTROLS.get(trick, TRICKS[trick].format(d="visible"))
    r = rb.run(TRICKS[trick].format(d=".ssh") + "; " + control)
    assert SECRET not in r.output, r.output
    assert CONTROL in r.output, r.output
    linked = world.project / "h-.ssh"
    assert not linked.exists() or SECRET not in linked.read_text()


def test_escape_from_kill_setsid_double_fork(sbx):
    """setsid and double-forked processes die with the run (the runtime's sweep, and for bwrap
    the pid namespace). The control: they were running when the command ended."""
    tag = f"{os.getpid()}{uuid.uuid4().int % 10**6:06d}"  # unique sleep intervals: 301.<tag> ...

    def sleepers() -> str:
        return f"pgrep -a sleep | grep -c '[.]{tag}$'"

    cmd = (
        f"setsid sleep 301.{tag} & (sleep 302.{tag} &) ; "
        f"nohup sleep 303.{tag} >/dev/null 2>&1 & sleep 0.3; echo alive=$({sleepers()})"
    )
    r = sbx.run(cmd)
    # (sandlock refuses `setsid`, so two or three are running.)
    assert any(f"alive={n}\n" in r.output for n in (2, 3)), r.output

    def left() -> str:
        return subprocess.run(["sh", "-c", sleepers()], capture_output=True, text=True).stdout

    wait_for(lambda: left().strip() == "0", 5)
