"""The gate asks git whether a fetch prunes tags: with `fetch.prune` and `fetch.pruneTags` in
the user's configuration (the repository's, ~/.gitconfig, an include, `remote.NAME.pruneTags`,
the host's `GIT_CONFIG_COUNT`), a plain `git fetch`, `git pull`, `git fetch --all`, `git remote
update` deletes every local tag the remote lacks, and tags keep no reflog. The checker reads
only the line; git, asked before the line runs, reads the configuration. Each line that asks is
run too, to show it really loses a tag object; the same line runs without asking when the
configuration prunes no tags, and really keeps them."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from run_bash.service import Service

from .checker_util import clone_of_bare

REASON = "may delete local tags the remote does not have"
NOT_ASKED = {"GIT_CONFIG_NOSYSTEM": "1"}
AUTHOR = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def host(tmp_path: Path, **more: str) -> dict[str, str]:
    """The host's environment: a home of the test's own, no system configuration."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), **NOT_ASKED, **more}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    genv = {**(env or {"PATH": os.environ["PATH"], "GIT_CONFIG_GLOBAL": "/dev/null"}), **AUTHOR}
    genv.update(NOT_ASKED)
    return subprocess.run(
        ["git", *args], cwd=cwd, env=genv, check=True, capture_output=True, text=True
    ).stdout.strip()


def repo(tmp_path: Path) -> tuple[Path, str]:
    """A clone of `rem.git` (remote `origin`, also `other`) with `lonely`, an annotated tag
    neither remote has. Returns the clone and the tag object."""
    remote, p = clone_of_bare(tmp_path, git)
    git(p, "remote", "add", "other", str(remote))
    git(p, "push", "-q", "-u", "origin", "main")
    git(p, "tag", "-a", "-m", "only here", "lonely")
    return p, git(p, "rev-parse", "refs/tags/lonely")


def lost(p: Path, tag: str) -> bool:
    """`lonely` is gone, and nothing reaches its tag object any more."""
    gone = not git(p, "tag", "-l", "lonely")
    unreachable = git(p, "fsck", "--unreachable", "--no-progress")
    return gone and tag in unreachable


def run(cwd: Path, line: str, environ: dict[str, str]) -> None:
    subprocess.run(["bash", "-c", line], cwd=cwd, env={**environ, **AUTHOR}, capture_output=True)


async def service(tmp_path: Path, environ: dict[str, str]) -> Service:
    svc = Service(
        asyncio.get_running_loop(),
        lambda _n, _p: None,
        environ=environ,
        state_dir=str(tmp_path / "state"),
    )
    svc.setup({"sandbox": {"backend": "none"}})
    return svc


async def verdict(tmp_path: Path, line: str, cwd: Path, environ: dict[str, str]) -> dict:
    svc = await service(tmp_path, environ)
    try:
        return svc.check(line, {"cwd": str(cwd)})
    finally:
        await svc.mgr.shutdown()


def configure(p: Path, settings: dict[str, str]) -> None:
    for key, value in settings.items():
        git(p, "config", "--add", key, value)


PRUNES = {"fetch.prune": "true", "fetch.pruneTags": "true"}
LINES = [
    "git fetch",
    "git fetch origin",
    "git fetch -q --prune",
    "git pull -q",
    "git pull -q --rebase origin",
    "git fetch --all",
    "git fetch --multiple origin other",
    "git remote update",
    "git remote update -p origin",
    "git remote add -f new ../rem.git",
    "git fetch ../rem.git",
    "git stash -q && git pull -q --rebase && git stash pop -q",
    "git fetch -q 2>&1 | tail -3",
    "cd . && git status -s && git fetch && git log -1",
    # an option before the subcommand that changes nothing git reads, a plain wrapper
    "git --no-pager fetch",
    "git -P pull -q",
    "git --no-optional-locks fetch -p origin",
    "timeout 60 git fetch",
    "nice git pull -q",
]


@pytest.mark.parametrize("line", LINES)
async def test_the_repositorys_config_prunes_tags_so_it_asks(tmp_path, line):
    p, tag = repo(tmp_path)
    configure(p, PRUNES)
    environ = host(tmp_path)
    answer = await verdict(tmp_path, line, p, environ)
    assert answer["pause"] and answer["effect"] == "irreversible", answer
    assert REASON in str(answer["reason"]) and "fetch.pruneTags" in str(answer["reason"])
    run(p, line, environ)
    assert lost(p, tag), f"{line!r} should lose the tag (the reason's premise)"


@pytest.mark.parametrize("line", LINES)
async def test_without_tag_pruning_configured_it_runs(tmp_path, line):
    p, tag = repo(tmp_path)
    configure(p, {"fetch.prune": "true"})
    environ = host(tmp_path)
    answer = await verdict(tmp_path, line, p, environ)
    assert not answer["pause"], answer
    assert answer["hits"] == []
    run(p, line, environ)
    assert not lost(p, tag)


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        ({"fetch.pruneTags": "true"}, "git fetch"),  # pruning itself is off
        ({"fetch.pruneTags": "yes", "fetch.prune": "off"}, "git pull -q"),
        ({**PRUNES, "remote.origin.pruneTags": "false"}, "git fetch --no-prune"),
        ({**PRUNES}, "git fetch --no-prune-tags"),
        ({**PRUNES}, "git fetch origin main"),  # a refspec on the line: git prunes no tags
        ({**PRUNES}, "git pull -q origin main"),
        ({"remote.other.pruneTags": "true", "fetch.prune": "1"}, "git fetch -p origin"),
    ],
)
async def test_a_configuration_that_prunes_no_tags_for_the_line_runs(tmp_path, settings, line):
    p, tag = repo(tmp_path)
    configure(p, settings)
    environ = host(tmp_path)
    answer = await verdict(tmp_path, line, p, environ)
    assert not answer["pause"], answer
    run(p, line, environ)
    assert not lost(p, tag)


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        ({"fetch.pruneTags": "true"}, "git fetch -p"),  # the line prunes, the config adds tags
        ({"remote.origin.pruneTags": "on", "remote.origin.prune": "yes"}, "git fetch"),
        ({"remote.other.pruneTags": "true", "fetch.prune": "1"}, "git fetch -p other"),
        # a group fetches `other` too: the gate asks as about any remote
        (
            {"remote.other.pruneTags": "true", "fetch.prune": "1", "remotes.both": "origin other"},
            "git fetch both",
        ),
    ],
)
async def test_a_remotes_own_tag_pruning_asks(tmp_path, settings, line):
    p, tag = repo(tmp_path)
    configure(p, settings)
    environ = host(tmp_path)
    answer = await verdict(tmp_path, line, p, environ)
    assert answer["pause"], answer
    run(p, line, environ)
    assert lost(p, tag)


async def test_a_remote_not_named_is_any_remote(tmp_path):
    """git's default remote (the branch's, or `origin`) is not worked out: a remote that
    prunes tags keeps a line that names none asking."""
    p, _tag = repo(tmp_path)
    configure(p, {"remote.other.pruneTags": "true", "fetch.prune": "1"})
    assert (await verdict(tmp_path, "git fetch -p", p, host(tmp_path)))["pause"]
    assert not (await verdict(tmp_path, "git fetch -p origin", p, host(tmp_path)))["pause"]


async def test_the_users_global_config_and_includes_count(tmp_path):
    p, tag = repo(tmp_path)
    environ = host(tmp_path)
    home = Path(environ["HOME"])
    assert not (await verdict(tmp_path, "git fetch -p", p, environ))["pause"]
    (home / ".gitconfig").write_text("[include]\n\tpath = more.cfg\n")
    assert not (await verdict(tmp_path, "git fetch -p", p, environ))["pause"]
    (home / "more.cfg").write_text("[fetch]\n\tpruneTags = true\n")
    assert (await verdict(tmp_path, "git fetch -p", p, environ))["pause"]
    run(p, "git fetch -p", environ)
    assert lost(p, tag)


@pytest.mark.parametrize("where", ["XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"])
async def test_the_hosts_choice_of_global_config_counts(tmp_path, where):
    p, tag = repo(tmp_path)
    conf = tmp_path / "conf"
    (conf / "git").mkdir(parents=True)
    file = conf / "git" / "config" if where == "XDG_CONFIG_HOME" else tmp_path / "g.cfg"
    file.write_text("[fetch]\n\tprune = true\n\tpruneTags = true\n")
    environ = host(tmp_path, **{where: str(conf if where == "XDG_CONFIG_HOME" else file)})
    assert (await verdict(tmp_path, "git fetch", p, environ))["pause"]
    assert not (await verdict(tmp_path, "git fetch", p, host(tmp_path)))["pause"]
    run(p, "git fetch", environ)
    assert lost(p, tag)


async def test_the_hosts_config_variables_count(tmp_path):
    p, tag = repo(tmp_path)
    on = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "fetch.pruneTags"}
    environ = host(tmp_path, **on, GIT_CONFIG_VALUE_0="true")
    assert (await verdict(tmp_path, "git fetch -p", p, environ))["pause"]
    off = host(tmp_path, **on, GIT_CONFIG_VALUE_0="false")
    assert not (await verdict(tmp_path, "git fetch -p", p, off))["pause"]
    params = host(tmp_path, GIT_CONFIG_PARAMETERS="'fetch.prunetags'='true'")
    assert (await verdict(tmp_path, "git fetch -p", p, params))["pause"]
    run(p, "git fetch -p", environ)
    assert lost(p, tag)


async def test_the_repository_is_the_one_minus_C_or_cd_leads_to(tmp_path):
    p, tag = repo(tmp_path)
    environ = host(tmp_path)
    for line in ("git -C r fetch", "cd r && git fetch"):
        assert not (await verdict(tmp_path, line, tmp_path, environ))["pause"]
    configure(p, PRUNES)
    for line in ("git -C r fetch", "cd r && git fetch"):
        assert (await verdict(tmp_path, line, tmp_path, environ))["pause"]
    run(tmp_path, "git -C r fetch", environ)
    assert lost(p, tag)


@pytest.mark.parametrize(
    "line",
    [
        # the line itself may turn tag pruning on first
        "git config fetch.pruneTags true && git fetch -p",
        "git config fetch.prune true; git config fetch.pruneTags true; git pull -q",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=fetch.pruneTags GIT_CONFIG_VALUE_0=1 git fetch -p",
        "env HOME=../h git fetch -p",
        # or git reads what was not asked
        "git -c include.path=../../x.cfg fetch -p",
        "git --no-pager -c include.path=../../x.cfg fetch -p",
        "timeout 60 sh -c 'git config fetch.pruneTags true; git fetch -p'",
        "git --git-dir=../x/.git fetch -p",
        "git fetch -p $REMOTE",
        # or another command may change the configuration (or the branch `onbranch:` reads)
        "git checkout -q main && git pull -q",
        "git remote add up ../x && git fetch -p",
        "sh -c true && git fetch -p",
        "./git fetch -p",
        "git fetch -p | tee log",
    ],
)
async def test_a_line_that_may_change_what_git_reads_asks(tmp_path, line):
    p, _tag = repo(tmp_path)
    (tmp_path / "x.cfg").write_text("[fetch]\n\tpruneTags = true\n")
    environ = host(tmp_path)
    assert not (await verdict(tmp_path, "git fetch -p", p, environ))["pause"]  # the control
    answer = await verdict(tmp_path, line, p, environ)
    assert answer["pause"], answer


async def test_the_line_that_turns_tag_pruning_on_loses_the_tag(tmp_path):
    p, tag = repo(tmp_path)
    environ = host(tmp_path)
    line = "git config fetch.pruneTags true && git fetch -p"
    assert (await verdict(tmp_path, line, p, environ))["pause"]
    run(p, line, environ)
    assert lost(p, tag)


@pytest.mark.parametrize(
    "setup",
    ["not a repository", "a value git cannot read", "GIT_DIR", "another git on PATH"],
)
async def test_any_doubt_keeps_it_asking(tmp_path, setup):
    p, _tag = repo(tmp_path)
    environ = host(tmp_path)
    assert not (await verdict(tmp_path, "git fetch -p", p, environ))["pause"]  # the control
    cwd = p
    if setup == "not a repository":
        cwd = tmp_path / "plain"
        cwd.mkdir()
    elif setup == "a value git cannot read":
        configure(p, {"fetch.pruneTags": "maybe"})
    elif setup == "GIT_DIR":
        environ["GIT_DIR"] = str(p / ".git")
    else:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "git").write_text('#!/bin/sh\nexec /usr/bin/git "$@"\n')
        (bin_dir / "git").chmod(0o755)
        environ["PATH"] = f"{bin_dir}:{environ['PATH']}"
    answer = await verdict(tmp_path, "git fetch -p", cwd, environ)
    assert answer["pause"] and REASON in str(answer["reason"]), answer


async def test_another_run_in_the_repository_keeps_it_asking(tmp_path):
    """A run still going there may turn tag pruning on before this line runs."""
    p, _tag = repo(tmp_path)
    svc = await service(tmp_path, host(tmp_path))
    try:
        assert not svc.check("git fetch", {"cwd": str(p)})["pause"]
        s = svc.run({"cmd": "sleep 30", "cwd": str(p), "unsandboxed_ok": True})
        try:
            assert svc.check("git fetch", {"cwd": str(p)})["pause"]
        finally:
            svc.kill(s["id"])
    finally:
        await svc.mgr.shutdown()


async def test_another_program_of_the_line_keeps_it_asking(tmp_path):
    """`kill` is no reader of files: what else the line runs may change the configuration."""
    p, _tag = repo(tmp_path)
    answer = await verdict(tmp_path, "git fetch && kill 1", p, host(tmp_path))
    assert answer["pause"]
    assert sorted(h["rule"] for h in answer["hits"]) == ["git", "kill"]
