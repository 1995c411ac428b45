"""#15 classes 1-5: nothing a sandboxed command writes may run or be read later outside it.

Each test plants something the host would later load, run or read, through the product's own
spawn path (``SessionManager``) under every confining backend, then does what the user's tools do
outside (``git status``, ``git commit``, a PATH lookup, a later run's grants) and asserts that
nothing of the attack ran or leaked. The positive controls: the same command's harmless part
worked, and the same attack run without the sandbox (the ``none`` backend) does make the outside
git run the payload, so the outside check can fail.
"""

from __future__ import annotations

import os
import random
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.security.conftest import CONTROL, SECRET, World


def git(world: World, *args: str, cwd: Path | None = None, check: bool = False) -> str:
    """git as the user runs it outside the sandbox."""
    env = {**world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    r = subprocess.run(
        ["git", *args],
        cwd=cwd or world.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    if check:
        assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


def pwned(world: World) -> list[str]:
    return sorted(p.name for p in world.home.glob("PWNED*"))


def payload(world: World, tag: str) -> str:
    return f"touch {world.home}/PWNED-{tag}"


def fsmonitor_cfg(world: World, tag: str) -> str:
    return f"printf '[core]\\n\\tfsmonitor = \"{payload(world, tag)}; false\"\\n'"


def hook(world: World, tag: str) -> str:
    return f"printf '#!/bin/sh\\n{payload(world, tag)}\\n'"


def drop_git_locks(*tops: Path) -> None:
    """Remove the locks git left in the repositories at ``tops``. A confined run may have been
    stopped by the guard in the middle of a git command (the stop follows the first event, from
    another thread: the shell goes on meanwhile), leaving them behind (the index's, a ref's), as
    a git killed by hand does; a git command of the test's own after it would fail."""
    for top in set(tops):
        for lock in (top / ".git").rglob("*.lock"):
            lock.unlink()


def unconfined_fires(
    sbx,
    world: World,
    attack: str,
    outside: list[str],
    cwd: Path | None = None,
    git_cwd: Path | None = None,
) -> None:
    """The control: the attack without the sandbox makes the outside git run the payload."""
    for f in world.home.glob("PWNED*"):
        f.unlink()
    drop_git_locks(world.project, cwd or world.project)
    r = sbx.unconfined().run(attack, cwd=cwd)
    said = git(world, *outside, cwd=git_cwd or cwd)
    assert pwned(world), (
        "the attack does not work even without a sandbox: the test proves nothing "
        f"(the run: exit {r.exit_code}, {r.error or ''} {r.output!r}; git {outside}: {said!r})"
    )


# -- class 1: every repository git on the host can reach -----------------------------------------


def evil_repo_in_cache(world: World, tag: str) -> str:
    """A repository with a payload in a place a run can write outside the project (a cache the
    user granted: ``Runner.with_cache``)."""
    return (
        "git init -q --bare ~/.npm/_cacache/evil.git && "
        f"{fsmonitor_cfg(world, tag)} >> ~/.npm/_cacache/evil.git/config"
    )


def test_commondir_pointing_elsewhere(sbx, world):
    attack = (
        f"{evil_repo_in_cache(world, 'commondir')}; echo ~/.npm/_cacache/evil.git > .git/commondir"
    )
    r = sbx.with_cache().run(f"echo ok >> .git/description && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert not (world.project / ".git/commondir").exists()
    git(world, "status")
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert pwned(world) == [], r
    unconfined_fires(sbx, world, attack, ["status"])


def test_embedded_repository_recorded_as_gitlink(sbx, world):
    attack = (
        f"git init -q sub && {fsmonitor_cfg(world, 'gitlink')} >> sub/.git/config && "
        "git -C sub commit -q --allow-empty -m s 2>/dev/null; git add sub && git commit -qm sub"
    )
    control = "git init -q plain && git -C plain commit -q --allow-empty -m p && git add plain"
    r = sbx.run(f"{control} && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    # The inert new repository stays; the one with a payload is moved out of the project.
    assert (world.project / "plain/.git/HEAD").is_file()
    assert not (world.project / "sub/.git").exists()
    assert any("sub/.git" in n and "core.fsmonitor" in n for n in r.notices), r.notices
    git(world, "status")
    git(world, "status", cwd=world.project / "sub")
    assert pwned(world) == []
    shutil.rmtree(world.project / "sub")
    unconfined_fires(sbx, world, attack, ["status"])


def test_existing_embedded_repository_config_cannot_change(sbx, world):
    emb = world.project / "emb"
    emb.mkdir()
    git(world, "init", "-q", cwd=emb, check=True)
    git(world, "commit", "-q", "--allow-empty", "-m", "e", cwd=emb, check=True)
    git(world, "add", "emb", check=True)
    git(world, "commit", "-qm", "emb", check=True)
    before = (emb / ".git/config").read_bytes()
    attack = f"{fsmonitor_cfg(world, 'emb')} >> emb/.git/config; {hook(world, 'emb')} > emb/.git/hooks/pre-commit"
    r = sbx.run(f"echo ok >> emb/.git/description && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert (emb / ".git/config").read_bytes() == before
    assert not (emb / ".git/hooks/pre-commit").exists()
    git(world, "status")
    assert pwned(world) == []


def add_submodule(world: World) -> Path:
    src = world.home / "smsrc"
    src.mkdir()
    git(world, "init", "-q", cwd=src, check=True)
    git(world, "commit", "-q", "--allow-empty", "-m", "s", cwd=src, check=True)
    git(
        world,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(src),
        "mods/sm",
        check=True,
    )
    git(world, "commit", "-qm", "submodule", check=True)
    return world.project / ".git/modules/mods/sm"


def test_submodule_git_dir_under_modules(sbx, world):
    gd = add_submodule(world)
    before = (gd / "config").read_bytes()
    attack = (
        f"{fsmonitor_cfg(world, 'module')} >> .git/modules/mods/sm/config; "
        f"{hook(world, 'module')} > .git/modules/mods/sm/hooks/post-commit; "
        "chmod +x .git/modules/mods/sm/hooks/post-commit"
    )
    r = sbx.run(
        f"echo ok >> .git/modules/mods/sm/description && echo {CONTROL}; {attack}; echo end"
    )
    assert CONTROL in r.output, r.output
    assert (gd / "config").read_bytes() == before
    assert not (gd / "hooks/post-commit").exists()
    git(world, "status")
    git(world, "commit", "-q", "--allow-empty", "-m", "x", cwd=world.project / "mods/sm")
    assert pwned(world) == []
    unconfined_fires(sbx, world, attack, ["status"])


def test_linked_worktree_admin_files(sbx, world):
    wt = world.home / "wt"
    git(world, "worktree", "add", "-q", str(wt), check=True)
    attack = f"{evil_repo_in_cache(world, 'worktree')}; echo ~/.npm/_cacache/evil.git > .git/worktrees/wt/commondir"
    before = (world.project / ".git/worktrees/wt/commondir").read_bytes()
    r = sbx.with_cache().run(f"echo ok >> .git/description && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert (world.project / ".git/worktrees/wt/commondir").read_bytes() == before
    git(world, "status", cwd=wt)
    assert pwned(world) == []
    unconfined_fires(sbx, world, attack, ["status"], git_cwd=wt)


def test_run_inside_a_linked_worktree(sbx, world):
    """From a linked worktree everyday git works (its common dir is granted), and the common
    dir's config and hooks stay as they were."""
    wt = world.home / "wt2"
    git(world, "worktree", "add", "-q", str(wt), check=True)
    attack = f"git config core.fsmonitor '{payload(world, 'wt')}'; {hook(world, 'wt')} > $(git rev-parse --git-common-dir)/hooks/post-commit"
    r = sbx.run(
        f"echo a > f && git add f && git commit -qm wt && echo {CONTROL}; {attack}; echo end",
        cwd=wt,
    )
    assert CONTROL in r.output, r.output
    assert "wt" in git(world, "log", "--oneline", "-1", cwd=wt)
    assert "fsmonitor" not in (world.project / ".git/config").read_text()
    git(world, "status")
    git(world, "commit", "-q", "--allow-empty", "-m", "x", cwd=wt)
    assert pwned(world) == []


def test_parent_dotfiles_repository_is_not_writable(sbx, world):
    """A project that is not a repository, inside a $HOME that is one: the policy never grants
    $HOME's git dir."""
    git(world, "init", "-q", cwd=world.home, check=True)
    notes = world.home / "notes"
    notes.mkdir()
    attack = (
        f"{fsmonitor_cfg(world, 'dotfiles')} >> ~/.git/config; mkdir -p ~/.git/hooks; "
        f"{hook(world, 'dotfiles')} > ~/.git/hooks/pre-commit; chmod +x ~/.git/hooks/pre-commit"
    )
    r = sbx.run(f"echo ok > note.txt && echo {CONTROL}; {attack}; echo end", cwd=notes)
    assert CONTROL in r.output and (notes / "note.txt").exists(), r.output
    assert "fsmonitor" not in (world.home / ".git/config").read_text()
    assert not (world.home / ".git/hooks/pre-commit").exists()
    git(world, "add", "notes", cwd=world.home)
    git(world, "commit", "-q", "-m", "notes", cwd=notes)
    assert pwned(world) == []
    unconfined_fires(sbx, world, attack, ["commit", "-q", "--allow-empty", "-m", "y"], cwd=notes)


HOOK_NAMES = (
    "pre-commit",
    "post-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-checkout",
    "pre-push",
    "reference-transaction",
    "post-index-change",
    "fsmonitor-watchman",
)


def test_random_hook_names_and_routes(sbx, world):
    """Property: whatever the name and however it is put there, nothing new appears in the hooks
    directory (random names, real hook names, files, links, directories, renames)."""
    rng = random.Random(1507)
    routes = [
        "{h} > .git/hooks/{n}",
        "{h} > t.$$ && mv t.$$ .git/hooks/{n}",
        "ln -s ../../x.sh .git/hooks/{n}",
        "mkdir .git/hooks/{n}",
        "{h} > x.sh && ln x.sh .git/hooks/{n}",
        "mkdir -p h2 && {h} > h2/{n} && mv .git/hooks .git/hooks.old && mv h2 .git/hooks",
    ]
    names = [*rng.sample(HOOK_NAMES, 4)] + [
        "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyz-._0123456789") for _ in range(rng.randint(1, 20))
        )
        for _ in range(3)
    ]
    before = sorted(p.name for p in (world.project / ".git/hooks").iterdir())
    for i, name in enumerate(names):
        route = routes[i % len(routes)].format(h=hook(world, f"hook{i}"), n=name)
        r = sbx.run(f"echo ok >> .git/description && echo {CONTROL}; {route}; echo end")
        assert CONTROL in r.output, r.output
        assert sorted(p.name for p in (world.project / ".git/hooks").iterdir()) == before, route
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    git(world, "checkout", "-q", "-b", "other")
    assert pwned(world) == []


def test_random_depth_of_new_embedded_repositories(sbx, world):
    """Property: a new repository with a payload is moved out wherever it is created; an inert
    one at the same depth stays."""
    rng = random.Random(1508)
    for depth in rng.sample(range(1, 9), 3):
        rel = "/".join(f"d{rng.randint(0, 99)}" for _ in range(depth))
        tag = f"depth{depth}"
        attack = (
            f"mkdir -p {rel}/bad {rel}/ok && git init -q {rel}/bad && git init -q {rel}/ok && "
            f"{fsmonitor_cfg(world, tag)} >> {rel}/bad/.git/config && git add {rel}/bad {rel}/ok"
        )
        r = sbx.run(f"{attack}; echo {CONTROL}")
        assert CONTROL in r.output, r.output
        assert not (world.project / rel / "bad/.git").exists(), (rel, r.notices)
        assert (world.project / rel / "ok/.git/HEAD").is_file()
        git(world, "status")
        git(world, "status", cwd=world.project / rel / "bad")
        assert pwned(world) == []


def test_new_repository_through_a_gitfile_or_symlink(sbx, world):
    """A `.git` file or symlink leading to a planted repository is moved out too."""
    attack = (
        f"git init -q --bare x.git && {fsmonitor_cfg(world, 'gitfile')} >> x.git/config && "
        "mkdir -p a b && echo 'gitdir: ../x.git' > a/.git && ln -s ../x.git b/.git"
    )
    r = sbx.run(f"{attack}; echo {CONTROL}")
    assert CONTROL in r.output, r.output
    for d in ("a", "b"):
        assert not os.path.lexists(world.project / d / ".git")
        git(world, "status", cwd=world.project / d)
    assert not (world.project / "x.git").exists()
    assert pwned(world) == []


def test_a_project_made_into_a_bare_repository(sbx, world):
    """Outside a repository git takes a directory holding HEAD, objects/ and refs/ for one: a run
    that turns a plain project into one (with a payload in its config) leaves no repository."""
    notes = world.home / "notes"
    notes.mkdir()
    attack = (
        "mkdir -p objects refs && echo 'ref: refs/heads/main' > HEAD && "
        "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = .\\n' > config && "
        f"{fsmonitor_cfg(world, 'bare')} >> config"
    )
    r = sbx.run(f"echo ok > note.txt && echo {CONTROL}; {attack}; echo end", cwd=notes)
    assert CONTROL in r.output, r.output
    git(world, "status", cwd=notes)
    assert pwned(world) == []
    assert any("new repository" in n for n in r.notices), r.notices
    shutil.rmtree(notes)
    notes.mkdir()
    unconfined_fires(sbx, world, attack, ["status"], cwd=notes)


# -- class 2: executables on the user's PATH ------------------------------------------------------


def on_path(sbx, world: World, *dirs: Path):
    world.env["PATH"] = ":".join([*map(str, dirs), world.env["PATH"]])
    return sbx.with_config()


def test_a_venv_on_path_may_not_appear(sbx, world):
    """A PATH entry inside the project that does not exist yet may not appear: the run that makes
    it is stopped, it is removed, and the notice names it and the option that allows it."""
    venv_bin = world.project / ".venv/bin"
    rb = on_path(sbx, world, venv_bin)
    attack = (
        f"mkdir -p .venv/bin && {hook(world, 'shim')} > .venv/bin/git && chmod +x .venv/bin/git"
    )
    r = rb.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; sleep 2; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert not os.path.lexists(world.project / ".venv")
    assert any(".venv" in n and "sandbox.rules.path_writable" in n for n in r.notices), r.notices
    found = shutil.which("git", path=world.env["PATH"])
    assert found and not found.startswith(str(venv_bin))
    subprocess.run(["git", "--version"], env=world.env, capture_output=True)
    assert pwned(world) == []
    # The control: without the sandbox the shim is there and runs for the user.
    rb.unconfined().run(attack)
    subprocess.run(["git", "--version"], env=world.env, capture_output=True)
    assert pwned(world), "the attack does not work even without a sandbox"


@pytest.mark.parametrize("entry", [".", ""])
def test_relative_path_entry_means_the_project(sbx, world, entry):
    """A PATH with `.` (or an empty entry) runs programs from the directory a command starts in:
    a program a run leaves in the project that shadows one found later is moved out."""
    world.env["PATH"] = f"{entry}:{world.env['PATH']}"
    rb = sbx.with_config()
    r = rb.run(f"echo {CONTROL}; {hook(world, 'dot')} > git; chmod +x git; sleep 2; echo survived")
    assert CONTROL in r.output, r.output
    assert not (world.project / "git").exists()
    subprocess.run(["git", "--version"], cwd=world.project, env=world.env, capture_output=True)
    assert pwned(world) == []


INSTALL = (
    "site=$(.venv/bin/python -c 'import sysconfig;print(sysconfig.get_paths()[\"purelib\"])') && "
    "echo 'X = 1' > $site/pkgmod.py && printf '#!/bin/sh\\necho tool\\n' > .venv/bin/pkgtool && "
    "chmod +x .venv/bin/pkgtool && echo '# upgraded' >> .venv/bin/activate && "
    ".venv/bin/python -c 'import pkgmod; print(\"imported\", pkgmod.X)' && .venv/bin/pkgtool"
)


def test_packages_install_into_the_project_venv(sbx, world):
    """A project venv that is not on the host's PATH stays writable: its programs change, new
    ones appear, modules are installed, without a notice."""
    subprocess.run(
        ["python3", "-m", "venv", "--without-pip", str(world.project / ".venv")], check=True
    )
    r = sbx.run(INSTALL)
    assert "imported 1" in r.output and "tool" in r.output, r.output
    assert (world.project / ".venv/bin/pkgtool").exists() and r.notices == (), r.notices


def test_a_venv_on_path_is_read_only_unless_allowed(sbx, world):
    """The same install into a venv whose bin is on the host's PATH fails (read-only inside the
    run), the result says which directory, why, and the option; with the option it works."""
    subprocess.run(
        ["python3", "-m", "venv", "--without-pip", str(world.project / ".venv")], check=True
    )
    before = sorted(p.name for p in (world.project / ".venv/bin").iterdir())
    rb = on_path(sbx, world, world.project / ".venv/bin")
    r = rb.run(f"echo ok > other.txt && echo {CONTROL}; {INSTALL}")
    assert CONTROL in r.output and "imported 1" not in r.output, r.output
    assert sorted(p.name for p in (world.project / ".venv/bin").iterdir()) == before
    assert "# upgraded" not in (world.project / ".venv/bin/activate").read_text()
    note = [n for n in r.notices if "sandbox.rules.path_writable" in n]
    assert note and note[0].startswith(".venv is read-only") and "PATH" in note[0], r.notices
    allowed = rb.with_config(sandbox={"rules": {"path_writable": [".venv"]}})
    r = allowed.run(INSTALL)
    assert "imported 1" in r.output and "tool" in r.output, r.output
    assert r.notices == (), r.notices


def test_shim_in_npm_bin_on_path(sbx, world):
    npm_bin = world.home / ".npm/bin"
    npm_bin.mkdir(parents=True)
    rb = on_path(sbx, world, npm_bin)
    attack = f"{hook(world, 'npm')} > ~/.npm/bin/git; chmod +x ~/.npm/bin/git"
    r = rb.run(f"echo ok > ok.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert not (npm_bin / "git").exists()
    subprocess.run(["git", "--version"], env=world.env, capture_output=True)
    assert pwned(world) == []


def test_random_path_layouts(sbx, world):
    """Property: with writable and read-only directories in any order on PATH, some existing and
    some not, nothing a run plants changes what a PATH lookup finds: an existing writable PATH
    directory is as it was, one that did not exist still does not."""
    rng = random.Random(1509)
    ro = world.home / "tools"
    ro.mkdir()
    programs = ["alpha", "beta", "gamma", "delta"]
    for name in programs[:2]:
        (ro / name).write_text(f"#!/bin/sh\necho real-{name}\n")
        (ro / name).chmod(0o755)
    base_path = world.env["PATH"]
    for layout in range(3):
        writable = [world.project / f"bin{layout}{i}" for i in range(rng.randint(1, 3))]
        for d in writable:
            if rng.random() < 0.5:
                d.mkdir()
                (d / "gamma").write_text("#!/bin/sh\necho mine\n")
                (d / "gamma").chmod(0o755)
                (d / "notes").write_text("not a program\n")
        order = [*writable, ro]
        rng.shuffle(order)
        world.env["PATH"] = ":".join([*map(str, order), base_path])
        rb = sbx.with_config()
        for d in writable:
            before = (
                sorted((p.name, p.read_bytes(), p.stat().st_mode) for p in d.iterdir())
                if d.exists()
                else None
            )
            names = [*rng.sample(programs, 2), "git", "notes", "gamma"]
            rng.shuffle(names)
            plant = "; ".join(
                f"printf '#!/bin/sh\\ntouch {world.home}/PWNED-{d.name}-{n}\\n' > {d.name}/{n} "
                f"; chmod +x {d.name}/{n}"
                for n in names
            )
            r = rb.run(f"echo {CONTROL}; mkdir -p {d.name}; {plant}")
            assert CONTROL in r.output, r.output
            after = (
                sorted((p.name, p.read_bytes(), p.stat().st_mode) for p in d.iterdir())
                if d.exists()
                else None
            )
            assert after == before, (str(d), [str(x) for x in order], r.notices)
        # Outside, every name that exists outside the writable directories runs the real one.
        for n in ["alpha", "beta", "git"]:
            found = shutil.which(n, path=world.env["PATH"])
            assert found and not any(found.startswith(str(d) + "/") for d in writable), found
            subprocess.run([found, "--version"], env=world.env, capture_output=True)
        assert pwned(world) == []
        for d in writable:
            shutil.rmtree(d, ignore_errors=True)


# -- class 3: grants are never built from what a run wrote ---------------------------------------


@pytest.mark.parametrize("plant", ["link_in_path_dir", "path_dir_is_a_link"])
def test_planted_symlink_is_never_followed(sbx, world, plant):
    private = world.home / "private"
    (private / "bin").mkdir(parents=True)
    (private / "bin/tool").write_text("#!/bin/sh\n")
    (private / "bin/tool").chmod(0o755)
    (private / "secret.txt").write_text(SECRET + "-private\n")
    rb = on_path(sbx, world, world.project / ".venv/bin")
    first = {
        "link_in_path_dir": "mkdir -p .venv/bin && ln -s ~/private/bin/tool .venv/bin/tool",
        "path_dir_is_a_link": "mkdir -p .venv && ln -s ~/private .venv/bin",
    }[plant]
    rb.run(first)
    r = rb.run("cat ~/private/secret.txt ~/private/bin/tool 2>&1; cat ~/.gitconfig")
    assert SECRET not in r.output, r.output
    assert "[user]" in r.output, r.output  # the control: a readable file in the same command


# -- class 4: shared caches ----------------------------------------------------------------------

UNVERIFIED = {
    ".cargo/git/checkouts/dep/abc/build.rs": "fn main() {}\n",
    ".cargo/registry/src/index/dep-1.0/build.rs": "fn main() {}\n",
    ".cargo/registry/cache/index/dep-1.0.crate": "crate\n",
    ".cache/go-build/ab/abcd-d": "object\n",
    ".cache/pip/wheels/w/pkg-1.0-py3-none-any.whl": "wheel\n",
    ".cache/pre-commit/repoabc/hook.py": "print('hook')\n",
    ".cache/uv/archive-v0/x/pkg/__init__.py": "\n",
    "go/pkg/mod/example.com/dep@v1/dep.go": "package dep\n",
    # npm's index: found by request URL, its entries trusted as fresh by their stored headers.
    ".npm/_cacache/index-v5/ab/cd/x": "key\n",
}


def test_unverified_caches_cannot_be_poisoned(sbx, world):
    for rel, text in UNVERIFIED.items():
        p = world.home / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    attack = "; ".join(f"echo 'evil' >> ~/{rel}" for rel in UNVERIFIED)
    r = sbx.run(
        f"cat ~/.cargo/git/checkouts/dep/abc/build.rs && cat ~/.npm/_cacache/index-v5/ab/cd/x && "
        f"echo x > ok.txt && echo {CONTROL}; {attack}; echo end"
    )
    assert CONTROL in r.output and "fn main" in r.output and "key" in r.output, r.output  # readable
    for rel, text in UNVERIFIED.items():
        assert (world.home / rel).read_text() == text, rel


# -- class 5: files CodeCompanion loads into the next chat ----------------------------------------

RULES_ATTACKS = {
    "tilde": "printf '# rules\\n@~/.ssh/id_rsa\\n' > CLAUDE.md",
    "env_var": "printf '# rules\\n@$HOME/.ssh/id_rsa\\n' > CLAUDE.md",
    "dotdot": "printf '# rules\\n@../.ssh/id_rsa\\n' > CLAUDE.md",
    "absolute_denied": "printf '@/etc/shadow\\n' > CLAUDE.md",
    "new_local_file": "printf '@~/.ssh/id_rsa\\n' > CLAUDE.local.md",
    "link_inside_pointing_out": "ln -s ~/.ssh/id_rsa k && printf '@k\\n' > CLAUDE.md",
    "rules_name_is_a_link": "ln -s ~/.ssh/id_rsa .cursorrules",
    "rules_dir_of_links": "mkdir -p .rules && ln -s ~/.ssh/id_rsa .rules/x.md",
    "fifo": "mkfifo .goosehints",
    "nested_name": "mkdir -p .github && printf '@~/.ssh/id_rsa\\n' > .github/copilot-instructions.md",
}


@pytest.mark.parametrize("attack", sorted(RULES_ATTACKS))
def test_rules_files_never_point_outside(sbx, world, attack):
    (world.project / "CLAUDE.md").write_text("# rules\nUse tabs.\n")
    (world.project / "notes.md").write_text("notes\n")
    control = "printf '# agents\\n@notes.md\\n' > AGENTS.md"
    r = sbx.run(f"{control} && echo {CONTROL}; {RULES_ATTACKS[attack]}; echo end")
    assert CONTROL in r.output, r.output
    assert (world.project / "AGENTS.md").read_text() == "# agents\n@notes.md\n"  # inside: kept
    assert (world.project / "CLAUDE.md").read_text() == "# rules\nUse tabs.\n"
    for name in ("CLAUDE.local.md", ".cursorrules", ".goosehints", ".rules", "k"):
        p = world.project / name
        assert not os.path.lexists(p) or (p.is_file() and not p.is_symlink()), name
    assert not os.path.lexists(world.project / ".github/copilot-instructions.md")
    assert r.notices, r  # reported to the user and the agent


def test_rules_include_target_replaced_by_a_link(sbx, world):
    """What a rules file includes, made a link out, stops the run as it is made (the names its
    references lead to are watched) and the link goes."""
    (world.project / "CLAUDE.md").write_text("@notes.md\n")
    (world.project / "notes.md").write_text("notes\n")
    r = sbx.run(f"echo {CONTROL}; rm notes.md && ln -s ~/.ssh/id_rsa notes.md; sleep 5; echo end")
    assert CONTROL in r.output and "end" not in r.output, r.output
    assert not (world.project / "notes.md").is_symlink()
    assert any("notes.md" in n for n in r.notices), r.notices


def test_users_own_rules_are_left_alone(sbx, world):
    """A rules file the user wrote with an include outside the project is theirs: a run that does
    not touch it leaves it as it is."""
    (world.project / "CLAUDE.md").write_text("@~/.claude/shared.md\n")
    r = sbx.run("echo ok > other.txt")
    assert (world.project / "CLAUDE.md").read_text() == "@~/.claude/shared.md\n"
    assert r.notices == (), r.notices


def test_a_fifo_rules_name_stops_the_run(sbx, world):
    """A FIFO where an agent reads its rules would hang the editor at the next chat: the run
    that makes one is stopped at once and the FIFO removed."""
    r = sbx.run(
        f"echo x > ok.txt && echo {CONTROL}; mkfifo -m 600 AGENTS.md; sleep 5; echo survived"
    )
    assert CONTROL in r.output
    assert not os.path.lexists(world.project / "AGENTS.md") or stat.S_ISREG(
        os.lstat(world.project / "AGENTS.md").st_mode
    )
    assert "survived" not in r.output, r.output  # the run that planted it was stopped
