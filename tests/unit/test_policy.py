"""The effective policy: defaults, rule replacement, denied/protected paths, network, limits, env."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.paths import is_under
from run_bash.sandbox.policy import build_env, build_policy, is_blocked_name, path_entries_tree


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    for d in (
        ".ssh",
        ".cache/pip",
        ".cache/nvim",
        ".npm/_cacache",
        ".config/nvim",
        ".config/git",
        ".local/bin",
        ".pyenv/shims",
        ".pyenv/versions/3/bin",
        "proj",
    ):
        (h / d).mkdir(parents=True)
    (h / ".gitconfig").write_text("")
    (h / ".aws").mkdir()
    return h


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), "PATH": f"{home}/.pyenv/shims:/usr/bin:/bin", **extra}


def pol(home: Path, raw: dict | None = None, cwd: Path | None = None, **kw):
    return build_policy(
        parse_config(raw or {}),
        str(cwd or home / "proj"),
        env=env_for(home),
        scan_ports=False,
        **kw,
    )


def test_default_grants(home):
    p = pol(home)
    assert str(home / "proj") in p.writable
    # Shared caches whose entries are used without a hash check: readable, not writable. npm's
    # content is hashed, but its index (by URL, with the response's own freshness) is not.
    assert str(home / ".cache/pip") in p.readable and str(home / ".cache/pip") not in p.writable
    assert not any(str(home / ".npm") in w for w in p.writable)
    assert any(str(home / ".npm/_cacache").startswith(r) for r in p.readable)
    assert str(home / ".gitconfig") in p.readable
    assert str(home / ".config/git") in p.readable
    assert str(home / ".local/bin") in p.readable
    assert "/usr" in p.readable
    # PATH entries and the tool tree they belong to
    assert str(home / ".pyenv") in p.readable
    # never shared dirs, never HOME, never nvim dirs writable
    for bad in (
        "/tmp",
        "/var/tmp",
        "/dev/shm",
        "/run",
        str(home),
        str(home / ".cache"),
        str(home / ".cache/nvim"),
        str(home / ".config/nvim"),
    ):
        assert not any(is_under(bad, w) for w in p.writable), bad
    assert str(home) not in p.readable


def test_denied_defaults_kept_even_when_missing(home):
    p = pol(home)
    for rel in (
        ".ssh",
        ".gnupg",
        ".aws",
        ".config/gh",
        ".netrc",
        ".git-credentials",
        ".docker/config.json",
        ".kube",
        ".local/share/keyrings",
    ):
        assert str(home / rel) in p.denied
    assert "/etc/shadow" in p.denied and "/etc/gshadow" in p.denied
    assert "/etc/sudoers" in p.denied


def test_user_lists_replace_defaults(home):
    (home / "extra").mkdir()
    p = pol(
        home,
        {
            "sandbox": {
                "rules": {"fs_writable": [".", "~/extra", "~/missing"], "fs_denied": ["~/.aws"]}
            }
        },
    )
    assert str(home / "extra") in p.writable
    assert str(home / ".cache/pip") not in p.writable
    assert str(home / "missing") not in p.writable
    assert str(home / ".aws") in p.denied
    assert str(home / ".ssh") not in p.denied
    assert "/etc/shadow" in p.denied  # system secrets stay denied whatever the rules say


def test_shared_dir_in_user_rules_warns(home):
    p = pol(home, {"sandbox": {"rules": {"fs_writable": [".", "~"]}}})
    assert any("Unix sockets" in w for w in p.warnings)


def test_nvim_dirs_read_only_under_broad_writable(home):
    p = pol(home, {"sandbox": {"rules": {"fs_writable": [".", "$XDG_CACHE_HOME"]}}})
    assert str(home / ".cache") in p.writable
    assert str(home / ".cache/nvim") in p.read_only


def test_readable_under_denied_is_dropped(home):
    p = pol(home, {"sandbox": {"rules": {"fs_readable": ["~/.ssh", "~/.local/bin"]}}})
    assert str(home / ".ssh") not in p.readable
    assert str(home / ".local/bin") in p.readable


def git_init(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True)


def test_protected_paths_in_a_git_project(home):
    proj = home / "proj"
    git_init(proj)
    p = pol(home)
    for rel in (
        ".git/config",
        ".git/hooks",
        ".gitmodules",
        ".nvim.lua",
        ".exrc",
        ".envrc",
        ".lazy.lua",
        "rust-toolchain",
        "rust-toolchain.toml",
        ".tool-versions",
        ".cargo/config.toml",
        ".cargo/config",
        ".yarnrc.yml",
        ".yarnrc",
        ".yarn/releases",
        ".yarn/plugins",
        ".claude",
        ".gemini",
        ".mcp.json",
    ):
        assert str(proj / rel) in p.protected
    assert str(proj / ".git") in p.git_dirs


def test_protected_paths_without_git(home):
    p = pol(home)
    proj = home / "proj"
    assert str(proj / ".envrc") in p.protected
    assert str(proj / ".git/config") not in p.protected
    # A repository created here (or in any other writable grant) is not kept from being created:
    # the guard checks after the run that a new one is inert (tests/security/test_new_repos.py).
    assert p.host_read is not None and p.host_read.scan == (str(proj),)
    granted = pol(home, {"sandbox": {"rules": {"fs_writable": [".", "~/.npm/_cacache"]}}})
    assert granted.host_read is not None
    assert granted.host_read.scan == (str(proj), str(home / ".npm/_cacache"))


def test_subdirectory_of_a_repository(home):
    proj = home / "proj"
    git_init(proj)
    sub = proj / "pkg"
    sub.mkdir()
    p = pol(home, cwd=sub)
    assert str(sub) in p.writable
    assert str(proj / ".git") in p.writable  # so git commit works from the subdirectory
    assert str(proj / ".git/config") in p.protected
    assert str(proj / ".git/hooks") in p.protected
    assert str(proj / ".envrc") not in p.protected  # not writable from here anyway


def test_network_and_limits(home):
    p = pol(
        home,
        {
            "sandbox": {
                "network": {"allow": ["pypi.org:443"], "allow_local_ports": [5432]},
                "limits": {"max_memory": "1G", "max_file_size": 1000, "max_processes": 7},
            }
        },
        own_ports=[8000],
    )
    assert p.network_allow == ["pypi.org:443"]
    assert p.allow_local_ports == [5432]
    assert p.own_ports == [8000]
    assert p.limits.max_memory == 1 << 30
    assert p.limits.max_file_size == 1000
    assert p.limits.max_processes == 7


def test_blocked_local_ports_exclude_own_and_allowed(home):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        cfg = parse_config({})
        p = build_policy(cfg, str(home / "proj"), env=env_for(home), own_ports=[])
        assert port in p.blocked_local_ports
        p = build_policy(cfg, str(home / "proj"), env=env_for(home), own_ports=[port])
        assert port not in p.blocked_local_ports
        cfg = parse_config({"sandbox": {"network": {"allow_local_ports": [port]}}})
        p = build_policy(cfg, str(home / "proj"), env=env_for(home), own_ports=[])
        assert port not in p.blocked_local_ports
    finally:
        s.close()


def test_to_json_is_plain_data(home):
    data = pol(home).to_json()
    json.dumps(data)
    assert set(data) >= {"paths", "network", "limits", "warnings"}
    assert data["paths"]["private_tmp"] is True


def test_path_entries_tree_follows_symlinks_in_home(home, tmp_path):
    tool = home / ".local/share/tool/bin"
    tool.mkdir(parents=True)
    (tool / "t").write_text("")
    os.symlink(tool / "t", home / ".local/bin/t")
    out = path_entries_tree(f"{home}/.local/bin:{home}/.pyenv/shims", str(home))
    assert str(home / ".local/share/tool") in out
    assert str(home / ".pyenv") in out
    assert str(home / ".local") not in out


def test_build_env_allowlist_and_drops():
    base = {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "OPENAI_API_KEY": "x",
        "NVIM": "/s",
        "MY_VAR": "1",
        "MY_TOKEN": "t",
        "SSH_AUTH_SOCK": "/a",
    }
    cfg = parse_config({"sandbox": {"env": {"pass": ["MY_*", "NVIM"], "set": {"A": "b"}}}})
    env, dropped = build_env(cfg, tmpdir="/t", session_id="s1", base_env=base)
    assert env["PATH"] == "/bin" and env["LC_ALL"] == "C" and env["MY_VAR"] == "1"
    assert env["A"] == "b" and env["TMPDIR"] == "/t" and env["RUN_BASH_SESSION"] == "s1"
    for bad in ("OPENAI_API_KEY", "NVIM", "MY_TOKEN", "SSH_AUTH_SOCK"):
        assert bad not in env
    assert dropped == ["MY_TOKEN", "NVIM"]
    assert env["TERM"] == "dumb" and env["GIT_TERMINAL_PROMPT"] == "0"


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "ANTHROPIC_API_KEY",
        "DBUS_SESSION_BUS_ADDRESS",
        "TMUX",
        "MY_PASSWORD",
        "NPM_TOKEN",
    ],
)
def test_blocked_names(name):
    assert is_blocked_name(name)


@pytest.mark.parametrize("name", ["PATH", "LANG", "CARGO_HOME", "GOPATH", "VIRTUAL_ENV"])
def test_ordinary_names(name):
    assert not is_blocked_name(name)


def test_npm_gets_a_cache_in_the_runs_temp_dir_unless_the_user_names_one():
    from run_bash.sandbox.policy import build_env, point_temp

    env, _ = build_env(parse_config({}), tmpdir="/r/tmp", session_id="s", base_env={})
    assert env["npm_config_cache"] == "/r/tmp/npm-cache"
    assert point_temp(dict(env), "/tmp")["npm_config_cache"] == "/tmp/npm-cache"
    cfg = parse_config({"sandbox": {"env": {"set": {"NPM_CONFIG_CACHE": "/mine"}}}})
    env, _ = build_env(cfg, tmpdir="/r/tmp", session_id="s", base_env={})
    assert "npm_config_cache" not in env and env["NPM_CONFIG_CACHE"] == "/mine"
    assert point_temp(dict(env), "/tmp")["NPM_CONFIG_CACHE"] == "/mine"
