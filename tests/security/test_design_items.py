"""One or more tests per item of design section 7 (1-10), for every confining backend.

Each test asserts the outside effect (a file unchanged, a listener that saw nothing, a secret that is
not in the output), not only an exit code.
"""

from __future__ import annotations

import os
import re
import stat
import uuid
from pathlib import Path

import pytest

from tests.security.conftest import SECRET, listening_tcp, listening_unix

# -- 1. Unix sockets under shared dirs (Neovim's RPC socket, tmux, ssh-agent) ---------------------


def connect_unix(path: str) -> str:
    return (
        "python3 - <<'EOF'\nimport socket\ns=socket.socket(socket.AF_UNIX)\n"
        f"try:\n    s.connect({path!r}); print('CONNECTED')\n"
        "except OSError as e:\n    print('refused', e.errno)\nEOF"
    )


def test_1_nvim_socket_in_shared_tmp_is_unreachable(sbx):
    path = f"/tmp/rb-nvim-{uuid.uuid4().hex[:8]}.sock"
    with listening_unix(path) as seen:
        r = sbx.run(connect_unix(path) + f"; ls /tmp/ | grep -c {Path(path).name}")
    assert "CONNECTED" not in r.output
    assert seen == []


def test_1_socket_in_runtime_dir_is_unreachable(sbx, world):
    rt = world.home.parent / "runtime"
    rt.mkdir(mode=0o700)
    path = str(rt / "nvim.1.0")
    with listening_unix(path) as seen:
        r = sbx.run(connect_unix(path))
    assert "CONNECTED" not in r.output
    assert seen == []


def test_1_tmp_is_private(sbx):
    marker = f"/tmp/rb-shared-{uuid.uuid4().hex[:8]}"
    Path(marker).write_text("host")
    try:
        r = sbx.run(f"cat {marker}; echo inside > {marker}; echo rc=$?; echo ok > $TMPDIR/f")
        assert "host" not in r.output
        assert Path(marker).read_text() == "host"
    finally:
        os.unlink(marker)


# -- 2. Files that run later outside the sandbox -------------------------------------------------

PROTECTED_ATTACKS = {
    "append_git_config": "printf '[core]\\n\\tfsmonitor = \"touch /tmp/pwned\"\\n' >> .git/config",
    "hook_overwrite": "echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
    "hook_new": "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/post-checkout",
    "git_config_cmd": "git config core.fsmonitor 'touch /tmp/pwned'",
    "envrc_new": "echo 'touch /tmp/pwned' > .envrc",
    "nvim_lua_new": "echo 'os.execute(\"touch /tmp/pwned\")' > .nvim.lua",
    "exrc_new": "echo '!touch /tmp/pwned' > .exrc",
    "lazy_lua_new": "echo 'return {}' > .lazy.lua",
    "gitmodules_new": "printf '[submodule \"x\"]\\n' > .gitmodules",
    "rename_into": "echo evil > x && mv x .envrc",
    "hardlink_config": "ln .git/config hl && echo evil >> hl",
    "symlink_config": "ln -s .git/config sl && echo evil >> sl",
    "rename_git_dir": "mv .git .g && echo evil >> .g/config && mv .g .git",
    "replace_git_dir": "mv .git .g && mkdir .git && echo evil > .git/config",
    "git_file_redirect": "mv .git .g && echo 'gitdir: .g' > .git",
    "cd_relative": "cd .git && echo evil >> config",
    "rm_hooks": "rm -rf .git/hooks",
    "python_dirfd": "python3 -c \"import os;d=os.open('.git',os.O_RDONLY);"
    "f=os.open('config',os.O_WRONLY|os.O_APPEND,dir_fd=d);os.write(f,b'evil')\"",
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


@pytest.mark.parametrize("attack", sorted(PROTECTED_ATTACKS))
def test_2_protected_files_cannot_be_changed(sbx, world, attack):
    before = snapshot(world.project)
    ino = os.stat(world.project / ".git").st_ino
    r = sbx.run(PROTECTED_ATTACKS[attack] + "; echo done")
    after = snapshot(world.project)
    assert after == before, r
    assert os.stat(world.project / ".git").st_ino == ino
    assert not Path("/tmp/pwned").exists()
    if sbx.name == "bubblewrap" and attack not in ("rename_into",) and attack.endswith("_new"):
        pass  # new files: the guard stops the run (see doc); nothing to add
    # The original repository still works outside.
    assert (world.project / ".git/HEAD").is_file()


def test_2_protected_in_background_session(sbx, world):
    """A long-running command (as in a background session) is stopped when it tampers."""
    before = snapshot(world.project)
    launched, r, tracker = sbx.start(
        "sleep 0.5; echo evil >> .git/config; echo evil > .envrc; sleep 30; echo survived"
    )
    res = sbx.finish(launched, r, tracker, timeout=15)
    assert snapshot(world.project) == before
    assert "survived" not in res.output


def test_2_restore_is_reported_by_sandlock(sbx, world):
    if sbx.name != "sandlock":
        pytest.skip("bubblewrap mounts .git/config read-only: nothing to restore")
    r = sbx.run("echo evil >> .git/config; sleep 5")
    assert any(".git/config" in n for n in r.notices), r.notices
    assert b"evil" not in (world.project / ".git/config").read_bytes()


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
        "echo evil >> ~/.config/nvim/init.lua; echo evil > ~/.local/share/nvim/site/x.lua; echo end"
    )
    r = sbx.run(cmd)
    assert (world.home / ".cache/nvim/luac/x").read_text() == "cache\n"
    assert (world.home / ".config/nvim/init.lua").read_text() == "-- user config\n"
    assert (world.home / ".local/share/nvim/site/x.lua").read_text() == "-- data\n"
    assert "end" in r.output


def test_3_nvim_dirs_stay_read_only_under_a_broad_writable_rule(sbx, world):
    # The original plugin's defaults made $XDG_CACHE_HOME writable; run_bash narrows it.
    rb = sbx.with_config(sandbox={"rules": {"fs_writable": [".", "$XDG_CACHE_HOME"]}})
    r = rb.run("echo evil > ~/.cache/nvim/luac/x; echo ok > ~/.cache/pip/keep; echo end")
    assert (world.home / ".cache/nvim/luac/x").read_text() == "cache\n"
    assert (world.home / ".cache/pip/keep").read_text() == "ok\n"
    assert "end" in r.output


def test_3_named_caches_are_writable(sbx, world):
    r = sbx.run("echo cached > ~/.cache/pip/keep && echo ok")
    assert "ok" in r.output
    assert (world.home / ".cache/pip/keep").read_text() == "cached\n"


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
    rb = sbx.with_config(sandbox={"env": {"pass": ["OPENAI_API_KEY", "GITHUB_*"]}})
    r = rb.run("env")
    assert SECRET not in r.output


# -- 5. /proc/1/environ ---------------------------------------------------------------------------


def test_5_pid1_environ_has_no_secrets(sbx):
    r = sbx.run("cat /proc/1/environ | tr '\\0' '\\n'; cat /proc/$PPID/environ | tr '\\0' '\\n'")
    assert SECRET not in r.output
    assert "NVIM=" not in r.output


# -- 6. Capabilities and system secrets -----------------------------------------------------------


def test_6_no_capabilities(sbx):
    r = sbx.run("grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status")
    caps = re.findall(r"Cap\w+:\s+([0-9a-f]+)", r.output)
    assert len(caps) == 4
    assert all(int(c, 16) == 0 for c in caps), r.output


def test_6_mknod_and_mount_fail(sbx):
    r = sbx.run(
        "mknod $TMPDIR/mem c 1 1; echo mknod=$?; "
        "mount -t tmpfs none $TMPDIR 2>&1; echo mount=$?; umount ~/.ssh 2>&1; cat ~/.ssh/id_rsa"
    )
    assert "mknod=0" not in r.output
    assert "mount=0" not in r.output
    assert SECRET not in r.output


def test_6_system_secrets_unreadable(sbx):
    r = sbx.run("cat /etc/shadow /etc/gshadow /etc/sudoers 2>&1 | head -5; ls /etc/ssh 2>&1")
    for line in r.output.splitlines():
        assert not re.match(r"^root:[^:]*:\d+:", line), r.output


# -- 7. Inherited file descriptors -----------------------------------------------------------------


def test_7_inherited_fds_do_not_reach_the_command(sbx, world):
    secret_file = world.home / "fd-secret"
    secret_file.write_text(SECRET + "-fd")
    fd = os.open(secret_file, os.O_RDONLY)
    os.set_inheritable(fd, True)
    high = os.dup2(fd, 77, inheritable=True)
    try:
        r = sbx.run(
            f"cat <&{fd}; cat <&77; cat /proc/self/fd/{fd} /proc/self/fd/77; ls /proc/self/fd"
        )
    finally:
        os.close(fd)
        os.close(high)
    assert SECRET not in r.output
    fds = [int(x) for x in r.output.split() if x.isdigit()]
    assert fds and max(fds) <= 3  # 0, 1, 2 and the fd `ls` opens for reading the directory


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
    r = rb.run("head -c 5000000 /dev/zero > big; ls -l big | awk '{print $5}'")
    size = (world.project / "big").stat().st_size
    assert size <= 1024 * 1024, r.output


def test_9_process_limit(sbx):
    if sbx.name == "bubblewrap" and os.geteuid() == 0:
        pytest.skip("RLIMIT_NPROC is never enforced for uid 0 (documented)")
    rb = sbx.with_config(sandbox={"limits": {"max_processes": 16}})
    # Python's fork does not retry on EAGAIN the way bash does (with a growing back-off).
    r = rb.run(
        'python3 -c "\nimport os, time\nn = 0\nfor i in range(60):\n    try:\n'
        "        pid = os.fork()\n    except OSError:\n        continue\n    if pid == 0:\n"
        '        time.sleep(20)\n        os._exit(0)\n    n += 1\nprint(n)\n"',
        timeout=40,
    )
    count = int(r.output.strip().splitlines()[-1]) if r.output.strip() else 0
    assert count <= 16, r.output


def test_9_memory_limit(sbx):
    """sandlock counts the run's memory; bubblewrap limits each process (RLIMIT_DATA)."""
    rb = sbx.with_config(sandbox={"limits": {"max_memory": "200M"}})
    r = rb.run("python3 -c \"b=bytearray(600*1024*1024); print('ALLOCATED', len(b))\"")
    assert "ALLOCATED" not in r.output


# -- 10. Network -----------------------------------------------------------------------------------


def tcp_client(port: int, host: str = "127.0.0.1") -> str:
    return (
        "python3 - <<'EOF'\nimport socket\n"
        f"try:\n    s=socket.create_connection(({host!r},{port}),timeout=3); s.send(b'hello');"
        " print('CONNECTED')\n"
        "except OSError as e:\n    print('refused', e)\nEOF"
    )


def test_10_other_local_service_unreachable(sbx):
    with listening_tcp() as (port, seen):
        r = sbx.run(tcp_client(port) + "; " + tcp_client(port, "localhost"))
        r2 = sbx.run(tcp_client(port, "0.0.0.0"))
    assert "CONNECTED" not in r.output + r2.output
    assert seen == []


def test_10_allow_local_ports_opens_one_port_sandlock(sbx):
    with listening_tcp() as (port, seen):
        rb = sbx.with_config(sandbox={"network": {"allow_local_ports": [port]}})
        r = rb.run(tcp_client(port))
    if sbx.name == "sandlock":
        assert "CONNECTED" in r.output
        assert seen
    else:  # bubblewrap: own network namespace unless network.allow is set (documented)
        assert "CONNECTED" not in r.output


def test_10_no_outside_network(sbx):
    r = sbx.run(tcp_client(80, "1.1.1.1") + "; " + tcp_client(53, "8.8.8.8"))
    assert "CONNECTED" not in r.output


def test_10_loopback_server_and_client_in_one_command(sbx):
    r = sbx.run(
        "python3 -u -m http.server 0 --bind 127.0.0.1 > $TMPDIR/log 2>&1 & "
        "for i in $(seq 50); do p=$(grep -o 'port [0-9]*' $TMPDIR/log | cut -d' ' -f2); "
        '[ -n "$p" ] && break; sleep 0.1; done; '
        "curl -s -o /dev/null -w 'code=%{http_code}\\n' http://127.0.0.1:$p/; kill %1"
    )
    assert "code=200" in r.output, r.output


def test_10_background_server_reachable_from_later_command(sbx, world):
    port = 20000 + os.getpid() % 20000
    launched, rfd, tracker = sbx.start(f"exec python3 -u -m http.server {port} --bind 127.0.0.1")
    try:
        import time

        deadline = time.monotonic() + 10
        from run_bash.sandbox.policy import own_listen_ports

        if sbx.name == "bubblewrap":
            time.sleep(1.5)  # its loopback is its own: the host cannot see the socket
        else:
            while time.monotonic() < deadline and port not in own_listen_ports():
                time.sleep(0.05)
            assert port in own_listen_ports()
        r = sbx.run(f"curl -s -m 5 -o /dev/null -w 'code=%{{http_code}}\\n' localhost:{port}/")
    finally:
        launched.terminate(15)
        sbx.finish(launched, rfd, tracker, timeout=10)
    # sandlock: loopback is shared with the host, other services' ports are denied; bubblewrap:
    # every run joins run_bash's own network namespace.
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
