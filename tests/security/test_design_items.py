"""One or more tests per item of design section 7 (1-10), for every confining backend.

Each test asserts the outside effect (a file unchanged, a listener that saw nothing, a secret that is
not in the output), not only an exit code, and has a positive control: the same command without the
forbidden part (aimed at a path, port or file it may use) succeeds in the same test.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import uuid
from pathlib import Path

import pytest

from run_bash.sandbox.base import CONFINING_BACKENDS
from tests.security.conftest import CONTROL, SECRET, Runner, listening_tcp, listening_unix

# -- 1. Unix sockets under shared dirs (Neovim's RPC socket, tmux, ssh-agent) ---------------------


def connect_unix(path: str, name: str = "CONNECTED") -> str:
    return (
        "python3 - <<'EOF'\nimport socket\ns=socket.socket(socket.AF_UNIX)\n"
        f"try:\n    s.connect({path!r}); print({name!r})\n"
        "except OSError as e:\n    print('refused', e.errno)\nEOF"
    )


def control_socket(world):
    """A listening socket in the project (the command may use it): the positive control."""
    return listening_unix(str(world.project / "ctl.sock"))


def test_1_nvim_socket_in_shared_tmp_is_unreachable(sbx, world):
    path = f"/tmp/rb-nvim-{uuid.uuid4().hex[:8]}.sock"
    with listening_unix(path) as seen, control_socket(world) as ctl_seen:
        r = sbx.run(
            connect_unix(path) + "\n" + connect_unix(str(world.project / "ctl.sock"), CONTROL)
        )
    assert "CONNECTED" not in r.output
    assert seen == []
    assert CONTROL in r.output and ctl_seen, r.output


def test_1_socket_in_runtime_dir_is_unreachable(sbx, world):
    rt = world.home.parent / "runtime"
    rt.mkdir(mode=0o700)
    path = str(rt / "nvim.1.0")
    with listening_unix(path) as seen, control_socket(world) as ctl_seen:
        r = sbx.run(
            connect_unix(path) + "\n" + connect_unix(str(world.project / "ctl.sock"), CONTROL)
        )
    assert "CONNECTED" not in r.output
    assert seen == []
    assert CONTROL in r.output and ctl_seen, r.output


def test_1_tmp_is_private(sbx):
    marker = f"/tmp/rb-shared-{uuid.uuid4().hex[:8]}"
    Path(marker).write_text("host")
    try:
        r = sbx.run(
            f"cat {marker}; echo inside > {marker}; echo rc=$?; "
            f"echo {CONTROL} > $TMPDIR/f && cat $TMPDIR/f"
        )
        assert "host" not in r.output
        assert Path(marker).read_text() == "host"
        assert CONTROL in r.output, r.output  # the private temp dir works
    finally:
        os.unlink(marker)


# -- 2. Files that run later outside the sandbox -------------------------------------------------

# attack -> (the attack, the same operation on a path the command may change). The control runs
# first in the same command and must print CONTROL.
PROTECTED_ATTACKS = {
    "append_git_config": (
        "printf '[core]\\n\\tfsmonitor = \"{pwn}\"\\n' >> .git/config",
        "printf '[core]\\n' >> .git/description",
    ),
    "hook_overwrite": (
        "printf '#!/bin/sh\\n{pwn}\\n' > .git/hooks/pre-commit",
        "echo 'x' > .git/info/pre-commit",
    ),
    "hook_new": (
        "printf '#!/bin/sh\\n{pwn}\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/*",
        "printf '#!/bin/sh\\n' > .git/info/post-checkout",
    ),
    "hook_added_to_existing_dir": (
        "printf '#!/bin/sh\\n{pwn}\\n' > .git/hooks/commit-msg; chmod +x .git/hooks/commit-msg",
        "printf '#!/bin/sh\\n' > .git/info/commit-msg; chmod +x .git/info/commit-msg",
    ),
    "rename_over_config": (
        "cp .git/config c2 && printf '[core]\\n\\tfsmonitor = \"{pwn}\"\\n' >> c2 && "
        "mv -f c2 .git/config",
        "cp .git/description d2 && echo ok >> d2 && mv -f d2 .git/description",
    ),
    "unlink_config": ("rm -f .git/config", "cp README r2 && rm -f r2"),
    "mv_git_and_new_config": (
        "mv .git .git2 && mkdir .git && cp -r .git2/. .git/ && "
        "git config -f .git/config core.fsmonitor '{pwn}'",
        "mkdir g && mv g g2 && mkdir g && cp -r g2/. g/ && git config -f g/config core.x y",
    ),
    "git_config_cmd": (
        "git config core.fsmonitor '{pwn}'",
        "git config -f notes.cfg core.fsmonitor x",
    ),
    "envrc_new": ("echo '{pwn}' > .envrc", "echo x > envrc.txt"),
    "nvim_lua_new": ("echo 'os.execute(\"{pwn}\")' > .nvim.lua", "echo x > nvim.lua"),
    "exrc_new": ("echo '!{pwn}' > .exrc", "echo x > exrc.txt"),
    "lazy_lua_new": ("echo 'return {}' > .lazy.lua", "echo 'return {}' > lazy.lua"),
    "gitmodules_new": ("printf '[submodule \"x\"]\\n' > .gitmodules", "printf 'x\\n' > modules"),
    "rename_into": ("echo evil > x && mv x .envrc", "echo ok > y && mv y envrc.txt"),
    "hardlink_config": (
        "ln .git/config hl && echo evil >> hl",
        # No hard link can be made in a run (``seccomp.LINKS``): one of a project file fails
        # with EXDEV too, and the command goes on.
        "{ ln README hl2 2>&1 | grep -q cross-device; } && echo ok >> README",
    ),
    "symlink_config": (
        "ln -s .git/config sl && echo evil >> sl",
        "ln -s .git/description sl2 && echo ok >> sl2",
    ),
    "rename_git_dir": (
        "mv .git .g && echo evil >> .g/config && mv .g .git",
        "mkdir d && mv d .d && echo ok >> .d/config && mv .d d",
    ),
    "replace_git_dir": (
        "mv .git .g && mkdir .git && echo evil > .git/config",
        "mkdir e && mv e .e && mkdir e && echo ok > e/config",
    ),
    "git_file_redirect": (
        "mv .git .g && echo 'gitdir: .g' > .git",
        "mkdir f && mv f .f && echo 'gitdir: .f' > f",
    ),
    "cd_relative": ("cd .git && echo evil >> config", "(cd .git && echo ok >> description)"),
    "rm_hooks": ("rm -rf .git/hooks", "mkdir -p .git/info/x/y && rm -rf .git/info/x"),
    "python_dirfd": (
        "python3 -c \"import os;d=os.open('.git',os.O_RDONLY);"
        "f=os.open('config',os.O_WRONLY|os.O_APPEND,dir_fd=d);os.write(f,b'evil')\"",
        "python3 -c \"import os;d=os.open('.git',os.O_RDONLY);"
        "f=os.open('description',os.O_WRONLY|os.O_APPEND,dir_fd=d);os.write(f,b'ok')\"",
    ),
}


def snapshot(project: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for rel in (".git/config", ".envrc", ".nvim.lua", ".exrc", ".lazy.lua", ".gitmodules", ".git"):
        p = project / rel
        out[rel] = p.read_bytes() if p.is_file() else (b"<dir>" if p.is_dir() else None)
    hooks = project / ".git/hooks"
    for h in sorted(hooks.iterdir()) if hooks.is_dir() else []:
        out[f"hooks/{h.name}"] = h.read_bytes()
    return out


def outside_git(world) -> str:
    """What the user's git does next in the project, outside the sandbox (fsmonitor, hooks)."""
    env = {**world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    out = ""
    for args in (
        ["status", "--short"],
        ["commit", "--allow-empty", "-qm", "outside"],
        ["checkout", "-q", "-b", f"outside-{uuid.uuid4().hex[:6]}"],
    ):
        r = subprocess.run(["git", *args], cwd=world.project, env=env, capture_output=True)
        out += r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    return out


@pytest.mark.parametrize("attack", sorted(PROTECTED_ATTACKS))
def test_2_protected_files_cannot_be_changed(sbx, world, attack):
    pwned = world.home.parent / f"pwned-{uuid.uuid4().hex[:8]}"
    before = snapshot(world.project)
    description = (world.project / ".git/description").read_bytes()
    ino = os.stat(world.project / ".git").st_ino
    evil, control = (x.replace("{pwn}", f"touch {pwned}") for x in PROTECTED_ATTACKS[attack])
    r = sbx.run(f"{control} && echo {CONTROL}; {evil}; echo done")
    assert CONTROL in r.output, r.output  # the same operation on an unprotected path works
    after = snapshot(world.project)
    assert after == before, r
    assert os.stat(world.project / ".git").st_ino == ino
    # The user's git outside runs nothing the command planted, and still works.
    git = outside_git(world)
    assert not pwned.exists(), git
    assert (world.project / ".git/HEAD").is_file()
    assert (
        "outside"
        in subprocess.run(
            ["git", "log", "-1", "--format=%s"], cwd=world.project, capture_output=True, text=True
        ).stdout
    )
    if "description" in control:
        assert (world.project / ".git/description").read_bytes() != description


# The attacks whose payload the user's git itself would run (fsmonitor, hooks).
GIT_PAYLOAD_ATTACKS = [
    "append_git_config",
    "git_config_cmd",
    "hook_added_to_existing_dir",
    "hook_new",
    "hook_overwrite",
    "mv_git_and_new_config",
    "rename_over_config",
]


@pytest.mark.parametrize("attack", GIT_PAYLOAD_ATTACKS)
def test_2_attacks_plant_a_payload_the_outside_git_runs_without_a_sandbox(world, attack):
    """The control of the test above: without a sandbox each git attack does plant code that the
    user's next git command runs (so "nothing ran" above means the sandbox stopped it)."""
    pwned = world.home.parent / "pwned"
    runner = Runner("none", world)
    try:
        evil = PROTECTED_ATTACKS[attack][0].replace("{pwn}", f"touch {pwned}")
        runner.run(evil)
    finally:
        runner.close()
    outside_git(world)
    assert pwned.exists()


def test_2_protected_in_background_session(sbx, world):
    """A long-running background session is stopped when it tampers; until then it ran (the
    control) and its unprotected writes stay."""
    before = snapshot(world.project)
    s = sbx.start(
        f"echo ok > notes.txt && echo {CONTROL}; sleep 0.5; echo evil >> .git/config; "
        "echo evil > .envrc; sleep 30; echo survived",
        timeout=15,
        bg_after=0.2,
    )
    first = sbx.first_result(s)
    assert first.status == "running" and CONTROL in first.output, first
    res = sbx.wait(s)
    assert snapshot(world.project) == before
    assert "survived" not in res.output
    assert (world.project / "notes.txt").read_text() == "ok\n"


# Routes that create a protected name that did not exist (no bind can cover it) without `open`:
# sandlock's deny check does not see mkdir, symlink or mknod. The guard stops the run and removes it.
NEW_NAME_ROUTES = {
    "symlink": ("ln -s /bin/true .envrc", ".envrc"),
    "mkdir": ("mkdir .nvim.lua", ".nvim.lua"),
    "fifo": ("mkfifo .exrc", ".exrc"),
    "hook_dir": ("mkdir -p .lazy.lua/x", ".lazy.lua"),
}


@pytest.mark.parametrize("route", sorted(NEW_NAME_ROUTES))
def test_2_new_protected_name_is_removed_and_reported(sbx, world, route):
    control = sbx.run(f"echo ok >> .git/description && echo {CONTROL}")
    assert CONTROL in control.output and control.notices == (), control  # reports nothing
    before = snapshot(world.project)
    cmd, name = NEW_NAME_ROUTES[route]
    r = sbx.run(f"{cmd}; sleep 5; echo survived")
    assert snapshot(world.project) == before
    assert "survived" not in r.output, r.output  # stopped at once
    said = f"protected file {name} was created inside the sandbox; removed"
    assert any(said in n for n in r.notices), r.notices


def test_2_protected_in_subdirectory_project(sbx, world):
    sub = world.project / "pkg"
    sub.mkdir()
    before = snapshot(world.project)
    sbx.run("echo evil >> ../.git/config; echo evil > ../.git/hooks/pre-commit", cwd=sub)
    assert snapshot(world.project) == before
    r = sbx.run("echo x > f && git add f && git commit -qm sub; echo rc=$?", cwd=sub)
    assert "rc=0" in r.output, r.output  # git works from a subdirectory


# -- 3. Neovim's cache, data and config are never writable ----------------------------------------


def test_3_nvim_dirs_not_writable(sbx, world):
    cmd = (
        "mkdir -p ~/.cache/nvim/luac; echo evil > ~/.cache/nvim/luac/x; "
        "echo evil >> ~/.config/nvim/init.lua; echo evil > ~/.local/share/nvim/site/x.lua; "
        f"echo ok > ~/.npm/_cacache/keep && echo {CONTROL}"
    )
    r = sbx.with_cache().run(cmd)
    assert (world.home / ".cache/nvim/luac/x").read_text() == "cache\n"
    assert (world.home / ".config/nvim/init.lua").read_text() == "-- user config\n"
    assert (world.home / ".local/share/nvim/site/x.lua").read_text() == "-- data\n"
    # Control: a cache granted writable next to them is writable.
    assert CONTROL in r.output and (world.home / ".npm/_cacache/keep").read_text() == "ok\n"


def test_3_nvim_dirs_stay_read_only_under_a_broad_writable_rule(sbx, world):
    # The original plugin's defaults made $XDG_CACHE_HOME writable; run_bash narrows it.
    rb = sbx.with_config(sandbox={"rules": {"fs_writable": [".", "$XDG_CACHE_HOME"]}})
    r = rb.run("echo evil > ~/.cache/nvim/luac/x; echo ok > ~/.cache/pip/keep; echo end")
    assert (world.home / ".cache/nvim/luac/x").read_text() == "cache\n"
    assert (world.home / ".cache/pip/keep").read_text() == "ok\n"
    assert "end" in r.output


def test_3_npm_cache_is_readable_not_writable(sbx, world):
    """npm finds a cached packument by its URL through an index that is not verified, and takes
    it as fresh by the response headers stored with it: an index entry a run wrote would make the
    host's next `npm install <name>` install what the run chose. So no run writes it by default;
    the control: granted with ``fs_writable``, the same write goes through."""
    index = world.home / ".npm/_cacache/index-v5/ab/cd/x"
    attack = (
        "mkdir -p ~/.npm/_cacache/index-v5/ab/cd && echo planted > ~/.npm/_cacache/index-v5/ab/cd/x"
    )
    r = sbx.run(f"ls ~/.npm/_cacache && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and "keep" in r.output and "end" in r.output, r.output
    assert not index.exists()
    sbx.with_cache().run(attack)
    assert index.read_text() == "planted\n"


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_3_npm_gets_a_cache_of_its_own_in_the_run(sbx, world):
    """With `~/.npm` read-only npm would fail every install (EROFS): each run gives it a cache in
    its own temp dir, which npm takes and can write, and which the host never reads. The
    control: `~/.npm` itself is still not written."""
    r = sbx.run(
        'c=$(npm config get cache) && echo "cache=$c" && case "$c" in "$TMPDIR"/*) echo inside;; '
        'esac && mkdir -p "$c/_cacache/tmp" && echo ok > "$c/_cacache/tmp/x" && cat "$c/_cacache/tmp/x"'
        "; echo planted > ~/.npm/_cacache/mine; echo end"
    )
    assert "inside" in r.output and "\nok\n" in r.output and "end" in r.output, r.output
    assert not (world.home / ".npm/_cacache/mine").exists()


# -- 4. Environment -------------------------------------------------------------------------------


def test_4_environment_is_an_allowlist(sbx):
    r = sbx.run("env")
    names = {line.split("=", 1)[0] for line in r.output.splitlines() if "=" in line}
    for bad in (
        "OPENAI_API_KEY",
        "GITHUB_TOKEN",
        "NVIM",
        "SSH_AUTH_SOCK",
        "DBUS_SESSION_BUS_ADDRESS",
    ):
        assert bad not in names
    assert SECRET not in r.output
    assert {"PATH", "HOME", "TMPDIR", "RUN_BASH_SESSION"} <= names


def test_4_secret_names_dropped_even_when_passed(sbx):
    rb = sbx.with_config(sandbox={"env": {"pass": ["OPENAI_API_KEY", "GITHUB_*", "RB_VISIBLE"]}})
    r = rb.run("env")
    assert SECRET not in r.output
    assert "RB_VISIBLE=visible-value" in r.output  # control: a harmless name passes


# -- 5. /proc/1/environ ---------------------------------------------------------------------------


def test_5_pid1_environ_has_no_secrets(sbx):
    r = sbx.run(
        "cat /proc/1/environ | tr '\\0' '\\n'; cat /proc/$PPID/environ | tr '\\0' '\\n'; "
        "cat /proc/self/environ | tr '\\0' '\\n' | grep -c RUN_BASH_SESSION="
    )
    assert SECRET not in r.output
    assert "NVIM=" not in r.output
    assert r.output.endswith("1\n"), r.output  # control: the same read of its own environment


# -- 6. Capabilities and system secrets -----------------------------------------------------------


def test_6_no_capabilities(sbx):
    r = sbx.run("grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status")
    caps = re.findall(r"Cap\w+:\s+([0-9a-f]+)", r.output)
    assert len(caps) == 4
    assert all(int(c, 16) == 0 for c in caps), r.output


def test_6_mknod_and_mount_fail(sbx):
    r = sbx.run(
        "mknod $TMPDIR/mem c 1 1; echo mknod=$?; "
        "mount -t tmpfs none $TMPDIR 2>&1; echo mount=$?; umount ~/.ssh 2>&1; cat ~/.ssh/id_rsa; "
        "mknod $TMPDIR/fifo p; echo fifo=$?"
    )
    assert "mknod=0" not in r.output
    assert "mount=0" not in r.output
    assert SECRET not in r.output
    assert "fifo=0" in r.output, r.output  # control: mknod of what needs no capability works


def test_6_system_secrets_unreadable(sbx):
    r = sbx.run(
        "cat /etc/shadow /etc/gshadow /etc/sudoers 2>&1 | head -5; ls /etc/ssh 2>&1; "
        "grep '^root:' /etc/passwd"
    )
    for line in r.output.splitlines():
        assert not re.match(r"^root:[^:]*:\d+:\d*:\d*:", line), r.output
    assert re.search(r"^root:x:0:0:", r.output, re.M), r.output  # control: /etc/passwd reads


# -- 7. Inherited file descriptors -----------------------------------------------------------------


def test_7_inherited_fds_do_not_reach_the_command(sbx, world):
    secret_file = world.home / "fd-secret"
    secret_file.write_text(SECRET + "-fd")
    fd = os.open(secret_file, os.O_RDONLY)
    os.set_inheritable(fd, True)
    high = os.dup2(fd, 77, inheritable=True)
    try:
        r = sbx.run(
            f"cat <&{fd}; cat <&77; cat /proc/self/fd/{fd} /proc/self/fd/77; ls /proc/self/fd; "
            "exec 5<README && cat <&5"
        )
    finally:
        os.close(fd)
        os.close(high)
    assert SECRET not in r.output
    fds = [int(x) for x in r.output.split() if x.isdigit()]
    assert fds and max(fds) <= 3  # 0, 1, 2 and the fd `ls` opens for reading the directory
    assert r.output.endswith("hello\n"), r.output  # control: reading an fd it opened works


# -- 8. The host's stdout is never the command's ----------------------------------------------------


def test_8_host_stdio_not_inherited_and_restored(sbx):
    r_host, w_host = os.pipe()
    saved = [os.dup(1), os.dup(2)]
    before = [os.fstat(1).st_ino, os.fstat(2).st_ino]
    try:
        os.dup2(w_host, 1)
        os.dup2(w_host, 2)
        ident = [os.fstat(1).st_ino, os.fstat(2).st_ino]
        res = sbx.run("echo MARK-OUT; echo MARK-ERR >&2; readlink /proc/self/fd/0")
        after = [os.fstat(1).st_ino, os.fstat(2).st_ino]
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in saved:
            os.close(f)
        os.close(w_host)
    os.set_blocking(r_host, False)
    try:
        leaked = os.read(r_host, 65536)
    except BlockingIOError:
        leaked = b""
    os.close(r_host)
    assert b"MARK" not in leaked
    assert "MARK-OUT" in res.output and "MARK-ERR" in res.output
    assert "/dev/null" in res.output
    assert after == ident
    assert [os.fstat(1).st_ino, os.fstat(2).st_ino] == before


# -- 9. Resource limits ----------------------------------------------------------------------------


def test_9_file_size_limit(sbx, world):
    rb = sbx.with_config(sandbox={"limits": {"max_file_size": "1M"}})
    r = rb.run("head -c 500000 /dev/zero > small; head -c 5000000 /dev/zero > big")
    size = (world.project / "big").stat().st_size
    assert size <= 1024 * 1024, r.output
    assert (world.project / "small").stat().st_size == 500000  # control: under the limit


def test_9_process_limit(sbx):
    backend = sbx.mgr.backend(sbx.name)
    if sbx.name == "bubblewrap" and os.geteuid() == 0 and backend.pid_namespace() != "capped":
        pytest.skip("without a per-run pid_max (Linux < 6.14) root has no process cap (documented)")
    rb = sbx.with_config(sandbox={"limits": {"max_processes": 16}})
    # Python's fork does not retry on EAGAIN the way bash does (with a growing back-off).
    r = rb.run(
        'python3 -c "\nimport os, time\nn = 0\nfor i in range(60):\n    try:\n'
        "        pid = os.fork()\n    except OSError:\n        continue\n    if pid == 0:\n"
        '        time.sleep(20)\n        os._exit(0)\n    n += 1\nprint(n)\n"',
        timeout=40,
    )
    count = int(r.output.strip().splitlines()[-1])
    assert count <= 16, r.output
    assert count >= 8, r.output  # control: forking works up to the limit


def test_9_memory_limit(sbx):
    """sandlock counts the run's memory; bubblewrap limits each process (RLIMIT_DATA)."""
    rb = sbx.with_config(sandbox={"limits": {"max_memory": "200M"}})
    r = rb.run(
        f"python3 -c \"b=bytearray(20*1024*1024); print('{CONTROL}', len(b))\"; "
        "python3 -c \"b=bytearray(600*1024*1024); print('ALLOCATED', len(b))\""
    )
    assert "ALLOCATED" not in r.output
    assert CONTROL in r.output, r.output  # control: an allocation under the limit works


# -- 10. Network -----------------------------------------------------------------------------------


def tcp_client(port: int | str, host: str = "127.0.0.1", name: str = "CONNECTED") -> str:
    return (
        "python3 - <<'EOF'\nimport socket\n"
        f"try:\n    s=socket.create_connection(({host!r},{port}),timeout=3); s.send(b'hello');"
        f" print({name!r})\n"
        "except OSError as e:\n    print('refused', e)\nEOF"
    )


# The positive control of the network tests: the same client reaches a listener the command
# started itself on loopback.
LOOPBACK_CONTROL = (
    "python3 - <<'EOF'\nimport socket\nl=socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n"
    "s=socket.create_connection(('127.0.0.1', l.getsockname()[1]), timeout=3); s.send(b'hello')\n"
    f"print({CONTROL!r})\nEOF"
)


def test_10_other_local_service_unreachable(sbx):
    with listening_tcp() as (port, seen):
        r = sbx.run("\n".join([tcp_client(port), tcp_client(port, "localhost"), LOOPBACK_CONTROL]))
        r2 = sbx.run(tcp_client(port, "0.0.0.0"))
    assert "CONNECTED" not in r.output + r2.output
    assert seen == []
    assert CONTROL in r.output, r.output


def test_10_allow_local_ports_opens_one_port_sandlock(sbx):
    with listening_tcp() as (port, seen):
        rb = sbx.with_config(sandbox={"network": {"allow_local_ports": [port]}})
        r = rb.run(tcp_client(port) + "\n" + LOOPBACK_CONTROL)
    if sbx.name == "sandlock":
        assert "CONNECTED" in r.output
        assert seen
    else:  # bubblewrap: own network namespace unless network.allow is set (documented)
        assert "CONNECTED" not in r.output
        assert CONTROL in r.output, r.output


def test_10_no_outside_network(sbx):
    r = sbx.run("\n".join([tcp_client(80, "1.1.1.1"), tcp_client(53, "8.8.8.8"), LOOPBACK_CONTROL]))
    assert "CONNECTED" not in r.output
    assert CONTROL in r.output, r.output


def test_10_loopback_server_and_client_in_one_command(sbx):
    r = sbx.run(
        "python3 -u -m http.server 0 --bind 127.0.0.1 > $TMPDIR/log 2>&1 & "
        "for i in $(seq 50); do p=$(grep -o 'port [0-9]*' $TMPDIR/log | cut -d' ' -f2); "
        '[ -n "$p" ] && break; sleep 0.1; done; '
        "curl -s -o /dev/null -w 'code=%{http_code}\\n' http://127.0.0.1:$p/; kill %1"
    )
    assert "code=200" in r.output, r.output


def test_10_background_server_reachable_from_later_command(sbx, world):
    # One port per backend: the backends share run_bash's network namespace, where the previous
    # server's connections may still hold theirs (TIME_WAIT).
    port = 20000 + os.getpid() % 10000 + 10000 * CONFINING_BACKENDS.index(sbx.name)
    # A background session, as the agent starts a server; it says when it listens.
    s = sbx.start(
        'python3 -u -c "import http.server as h, socketserver as s\n'
        f"srv = s.TCPServer(('127.0.0.1', {port}), h.SimpleHTTPRequestHandler)\n"
        "print('LISTENING', flush=True); srv.serve_forever()\"",
        bg_after=0.1,
        timeout=60,
    )
    try:
        sbx.wait_output(s, "LISTENING")
        r = sbx.run(f"curl -s -m 5 -o /dev/null -w 'code=%{{http_code}}\\n' localhost:{port}/")
    finally:
        sbx.kill(s)
    # Every run of either backend joins run_bash's own network namespace.
    assert "code=200" in r.output, r.output


def test_10_policy_blocks_foreign_ports_but_not_own(world):
    from run_bash.config import parse_config
    from run_bash.sandbox.policy import build_policy

    with listening_tcp() as (port, _seen):
        p = build_policy(parse_config({}), str(world.project), env=world.env, own_ports=[])
        assert port in p.blocked_local_ports
        p2 = build_policy(parse_config({}), str(world.project), env=world.env, own_ports=[port])
        assert port not in p2.blocked_local_ports


def test_secrets_mode_unchanged(world):
    # The fixtures themselves: secrets exist and are readable outside (so a pass is meaningful).
    assert (world.home / ".ssh/id_rsa").read_text().startswith(SECRET)
    assert stat.S_IMODE((world.home / ".ssh").stat().st_mode) == 0o700
