"""#20 class 2: a new repository is judged wherever a run can write, not only in its project.

Writable caches and other grants, a repository reached through a symlink in the project, and git
directories made inside a trusted repository's own (``.git/modules/<name>``, which ``git
submodule update`` takes up again). Through ``SessionManager`` under every confining backend;
the outside ``git`` is the judge, and the same attack without a sandbox is the control.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from tests.security.conftest import CONTROL
from tests.security.test_hostread import (
    add_submodule,
    fsmonitor_cfg,
    git,
    hook,
    pwned,
    unconfined_fires,
)


def repo_with_payload(where: str, world, tag: str) -> str:
    """Shell that makes a repository with a work tree at ``where`` whose config runs a payload."""
    return f"git init -q {where} && {fsmonitor_cfg(world, tag)} >> {where}/.git/config"


def test_a_repository_in_a_writable_cache(sbx, world):
    cache = world.home / ".npm/_cacache"
    attack = repo_with_payload("~/.npm/_cacache/tmp/git-clone1", world, "cache")
    r = sbx.with_cache().run(f"echo x > ~/.npm/_cacache/ok && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and (cache / "ok").exists(), r.output
    assert not os.path.lexists(cache / "tmp/git-clone1/.git")
    assert any("git-clone1" in n and "core.fsmonitor" in n for n in r.notices), r.notices
    git(world, "status", cwd=cache / "tmp/git-clone1")
    assert pwned(world) == []
    shutil.rmtree(cache / "tmp")
    unconfined_fires(sbx, world, attack, ["status"], git_cwd=cache / "tmp/git-clone1")


def test_a_writable_grant_made_into_a_repository(sbx, world):
    """The cache directory itself turned into a git directory: its HEAD goes, the cache stays."""
    cache = world.home / ".npm/_cacache"
    attack = (
        "cd ~/.npm/_cacache && mkdir -p objects refs && echo 'ref: refs/heads/main' > HEAD && "
        "printf '[core]\\n\\tbare = false\\n\\tworktree = .\\n' > config && "
        f"{fsmonitor_cfg(world, 'grant')} >> config"
    )
    r = sbx.with_cache().run(f"{attack}; echo {CONTROL}")
    assert CONTROL in r.output, r.output
    assert cache.is_dir() and (cache / "keep").exists()
    assert not (cache / "HEAD").exists(), r.notices
    git(world, "--git-dir", str(cache), "status", cwd=cache)
    assert pwned(world) == []
    sbx.unconfined().run(attack)
    git(world, "--git-dir", str(cache), "status", cwd=cache)
    assert pwned(world), "the attack does not work even without a sandbox: the test proves nothing"


def test_a_repository_reached_through_a_symlink_in_the_project(sbx, world):
    cache = world.home / ".npm/_cacache"
    attack = (
        f"{repo_with_payload('~/.npm/_cacache/tools', world, 'link')} && "
        "ln -s ~/.npm/_cacache/tools tools"
    )
    r = sbx.with_cache().run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    git(world, "status", cwd=world.project / "tools")
    assert pwned(world) == [], r.notices
    assert not os.path.lexists(cache / "tools/.git")
    os.unlink(world.project / "tools")
    shutil.rmtree(cache / "tools")
    unconfined_fires(sbx, world, attack, ["status"], git_cwd=world.project / "tools")


def test_a_module_git_dir_that_submodule_update_would_take_up(sbx, world):
    """A submodule the user has not initialized: a git directory planted under its name in
    .git/modules is what `git submodule update --init` would check out and run git in."""
    add_submodule(world)
    git(world, "submodule", "deinit", "-q", "-f", "mods/sm", check=True)
    shutil.rmtree(world.project / ".git/modules/mods/sm")
    attack = (
        "git init -q --bare .git/modules/mods/sm && "
        "git -C .git/modules/mods/sm config core.bare false && "
        "git -C .git/modules/mods/sm config core.worktree ../../../../mods/sm && "
        f"git -C .git/modules/mods/sm config core.fsmonitor 'touch {world.home}/PWNED-module; false'"
    )
    r = sbx.run(f"echo ok >> .git/description && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert not (world.project / ".git/modules/mods/sm").exists(), r.notices
    assert any("modules/mods/sm" in n and "not inert" in n for n in r.notices), r.notices
    out = git(world, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    git(world, "status", cwd=world.project / "mods/sm")
    assert pwned(world) == [], out
    git(world, "submodule", "deinit", "-q", "-f", "mods/sm", check=True)
    shutil.rmtree(world.project / ".git/modules/mods/sm")
    for f in world.home.glob("PWNED*"):
        f.unlink()
    sbx.unconfined().run(attack)
    git(world, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    git(world, "status", cwd=world.project / "mods/sm")
    assert pwned(world), "the planted module git dir was not taken up: the test proves nothing"


def test_an_inert_repository_in_a_cache_stays(sbx, world):
    """The positive side: a repository with only inert keys (what `git clone` leaves) stays."""
    r = sbx.with_cache().run(
        "git init -q ~/.npm/_cacache/tmp/plain && "
        "git -C ~/.npm/_cacache/tmp/plain remote add origin https://example.invalid/x && "
        f"echo {CONTROL}"
    )
    assert CONTROL in r.output and r.notices == (), (r.output, r.notices)
    assert (world.home / ".npm/_cacache/tmp/plain/.git/HEAD").is_file()


def test_a_module_git_dir_inside_a_new_repository(sbx, world):
    """A new repository is inert, but its own `.git/modules/m` is not: `git submodule update
    --init` there takes it up. Its nested git dirs are judged as those of a kept one."""
    sub = world.project / "sub"
    attack = (
        "git init -q smsrc && git -C smsrc commit -q --allow-empty -m s && "
        "git init -q sub && cd sub && "
        "git -c protocol.file.allow=always submodule add -q ../smsrc m && git commit -qm sm && "
        "git submodule deinit -q -f m && "
        f"git -C .git/modules/m config core.fsmonitor 'touch {world.home}/PWNED-nested; false'"
    )
    r = sbx.run(f"echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert (sub / ".git/HEAD").is_file(), r.notices
    assert not os.path.lexists(sub / ".git/modules/m"), r.notices
    assert any("sub/.git/modules/m" in n and "core.fsmonitor" in n for n in r.notices), r.notices
    update = ["-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init"]
    git(world, *update, cwd=sub)
    git(world, "status", cwd=sub / "m")
    assert pwned(world) == []
    shutil.rmtree(sub)
    shutil.rmtree(world.project / "smsrc")
    sbx.unconfined().run(attack)
    git(world, *update, cwd=sub)
    git(world, "status", cwd=sub / "m")
    assert pwned(world), "the module git dir was not taken up: the test proves nothing"


def test_a_new_repository_with_hooks_where_the_users_config_puts_them(sbx, world):
    """The user's global `core.hooksPath = .githooks` is taken in every work tree: a new
    repository with hooks there is not inert, one without them stays."""
    with open(world.home / ".gitconfig", "a") as f:
        f.write("[core]\n\thooksPath = .githooks\n")
    sub = world.project / "sub"
    attack = (
        f"git init -q sub && mkdir sub/.githooks && {hook(world, 'global')} > "
        "sub/.githooks/pre-commit && chmod +x sub/.githooks/pre-commit"
    )
    r = sbx.run(f"git init -q plain && mkdir plain/.githooks && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(sub / ".git")
    assert any("sub/.git" in n and ".githooks: pre-commit" in n for n in r.notices), r.notices
    assert (world.project / "plain/.git/HEAD").is_file(), r.notices
    git(world, "commit", "-q", "--allow-empty", "-m", "x", cwd=sub)
    assert pwned(world) == []
    shutil.rmtree(sub)
    unconfined_fires(sbx, world, attack, ["commit", "-q", "--allow-empty", "-m", "y"], git_cwd=sub)


def test_a_linked_worktree_with_the_default_hooks_path_stays(sbx, world):
    """The positive side: `git worktree add` in a project whose hooks are the kept
    `.git/hooks` leaves a worktree the user's git works in, running the user's own hook."""
    h = world.project / ".git/hooks/pre-commit"
    h.write_text(f"#!/bin/sh\ntouch {world.home}/hook-ran\n")
    h.chmod(0o755)
    r = sbx.run(f"git worktree add -q wt && echo x > wt/new.txt && echo {CONTROL}")
    assert CONTROL in r.output and r.notices == (), (r.output, r.notices)
    wt = world.project / "wt"
    assert (wt / ".git").is_file()
    git(world, "add", "new.txt", cwd=wt, check=True)
    git(world, "commit", "-qm", "x", cwd=wt, check=True)
    assert (world.home / "hook-ran").exists()
    assert pwned(world) == []


def test_what_goes_to_the_quarantine_is_left_inert(sbx, world):
    """A directory moved to the quarantine gets mode 000: a tool started in it (a shell prompt's
    git, direnv, mise) reads nothing the run put there until the user opens it to look. Nothing
    of it is lost: opened, it is all there."""
    r = sbx.run(f"echo {CONTROL}; {repo_with_payload('emb', world, 'q')}; echo end")
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(world.project / "emb/.git"), r.notices
    note = next(n for n in r.notices if "emb" in n and "moved to " in n)
    where = Path(note.split("moved to ")[1].split(";")[0].strip())
    assert stat.S_ISDIR(where.lstat().st_mode) and stat.S_IMODE(where.lstat().st_mode) == 0
    where.chmod(0o700)  # opened to look
    config = where / "config" if (where / "config").exists() else where / ".git" / "config"
    assert "fsmonitor" in config.read_text()
