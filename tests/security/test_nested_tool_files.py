"""A tool's file a run leaves in a subdirectory does not make the tool run its program there.

rustup looks for ``rust-toolchain.toml`` (or ``rust-toolchain``) and cargo for
``.cargo/config.toml`` (or ``.cargo/config``) in the working directory and every directory above
it. So a ``src/rust-toolchain.toml`` whose ``path`` names a toolchain the run made, or a
``src/.cargo/config.toml`` whose ``build.rustc-wrapper`` is a program it wrote, runs that program
at the next ``cargo metadata --manifest-path ../Cargo.toml`` in ``src/``: what rust-analyzer (and
the editor's LSP client starting it for a file there) runs. These names are kept at every level of
the project, not only at its top: an existing one anywhere is read-only inside the run, and one a
run makes anywhere (in an existing directory or one it made) stops it and goes to the quarantine.

The judge is the user's cargo on the host (rustup's proxy, their ``RUSTUP_HOME``); the control is
the ``none`` backend, where the same run makes that ``cargo metadata`` run its program. The other
tools that look upward (mise and asdf's ``.tool-versions``, yarn's ``.yarnrc.yml``, direnv's
``.envrc``, lazy.nvim's ``.lazy.lua``) are not installed here: for them the file system is the
judge (a new one is removed with the notice, an existing one stays as it was), beside the same
run through ``none``, which leaves the file there.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.security.conftest import CONTROL, World

CARGO = shutil.which("cargo")
RUSTUP = shutil.which("rustup")
needs_cargo = pytest.mark.skipif(CARGO is None or RUSTUP is None, reason="rustup's cargo not found")
FIRED = "NESTED-TOOL-FILE-FIRED"
MANIFEST = '[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n'
# Ordinary work beside the attack: it must still succeed.
WORK = f"echo ok > other.txt && echo ok > src/other.txt && echo {CONTROL}"


def crate(world: World) -> None:
    """A crate at the top of the project with a ``src/`` (the user's, before any run)."""
    (world.project / "Cargo.toml").write_text(MANIFEST)
    (world.project / "src").mkdir(exist_ok=True)
    (world.project / "src/main.rs").write_text("fn main() {}\n")


def host_cargo(world: World, where: str) -> str:
    """``cargo metadata`` for the top crate, run in ``where`` as rust-analyzer runs it (the user's
    rustup and cargo homes); what it printed and what a wrapper logged."""
    real = os.path.expanduser("~")
    env = {
        **world.env,
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", os.path.join(real, ".rustup")),
        "CARGO_HOME": os.environ.get("CARGO_HOME", os.path.join(real, ".cargo")),
        "CARGO_TARGET_DIR": str(world.home.parent / "target"),
    }
    cwd = world.project / where
    manifest = os.path.relpath(world.project / "Cargo.toml", cwd)
    log = world.project / "fired.log"
    log.unlink(missing_ok=True)
    cargo = os.path.join(os.path.dirname(str(RUSTUP)), "cargo")
    done = subprocess.run(
        [
            cargo,
            "metadata",
            "--offline",
            "--format-version=1",
            f"--manifest-path={manifest}",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return (log.read_text() if log.exists() else "") + done.stdout + done.stderr


def toolchain_attack(world: World, where: str, wait: bool = False) -> str:
    """A toolchain in the project whose cargo prints FIRED, and ``<where>/rust-toolchain.toml``
    naming it (then, with ``wait``, 5 s for the guard to stop the run)."""
    tc = world.project / "tc"
    return (
        f"mkdir -p tc/bin {where} && printf '#!/bin/sh\\necho {FIRED}\\n' > tc/bin/cargo && "
        f"chmod +x tc/bin/cargo && {WORK}; "
        f"printf '[toolchain]\\npath = \"{tc}\"\\n' > {where}/rust-toolchain.toml"
        + ("; sleep 5; echo survived" if wait else "")
    )


def wrapper_attack(world: World, where: str, wait: bool = False) -> str:
    """A program in the project that logs FIRED, and ``<where>/.cargo/config.toml`` naming it as
    cargo's rustc wrapper."""
    log = world.project / "fired.log"
    return (
        f"printf '#!/bin/sh\\necho {FIRED} >> {log}\\nexec \"$@\"\\n' > w.sh && chmod +x w.sh && "
        f"mkdir -p {where}/.cargo && {WORK}; "
        f"printf '[build]\\nrustc-wrapper = \"{world.project}/w.sh\"\\n' > {where}/.cargo/config.toml"
        + ("; sleep 5; echo survived" if wait else "")
    )


ATTACKS = {"rust-toolchain.toml": toolchain_attack, ".cargo/config.toml": wrapper_attack}


def reset(world: World) -> None:
    """What the confined run left, gone, before the same run through ``none``."""
    for name in ("tc", "w.sh"):
        p = world.project / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


@needs_cargo
@pytest.mark.parametrize("name", sorted(ATTACKS))
@pytest.mark.parametrize("where", ["src", "crates/new"])
def test_a_new_one_in_a_subdirectory_is_removed(sbx, world, name, where):
    """In ``src/`` (there before the run) or in ``crates/new/`` (made by the run itself)."""
    crate(world)
    assert FIRED not in host_cargo(world, "src")
    r = sbx.run(ATTACKS[name](world, where, wait=True))
    assert CONTROL in r.output and (world.project / "src/other.txt").exists(), r.output
    assert "survived" not in r.output, (r.output, r.notices)
    assert not (world.project / where / name).exists(), r.notices
    shown = f"{where}/{name}"
    assert any(f"protected file {shown} was created" in n for n in r.notices), r.notices
    assert FIRED not in host_cargo(world, where)
    # Control: without the sandbox the same run makes the user's cargo run its program there.
    reset(world)
    sbx.unconfined().run(ATTACKS[name](world, where))
    assert FIRED in host_cargo(world, where)


@needs_cargo
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_existing_one_in_a_subdirectory_is_read_only(sbx, world, name):
    crate(world)
    mine = {
        "rust-toolchain.toml": '[toolchain]\nchannel = "stable"\n',
        ".cargo/config.toml": "[build]\njobs = 1\n",
    }[name]
    (world.project / "src" / name).parent.mkdir(parents=True, exist_ok=True)
    (world.project / "src" / name).write_text(mine)
    r = sbx.run(ATTACKS[name](world, "src"))
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert (world.project / "src/other.txt").read_text() == "ok\n"  # the rest stays writable
    assert (world.project / "src" / name).read_text() == mine
    assert FIRED not in host_cargo(world, "src")
    sbx.unconfined().run(ATTACKS[name](world, "src"))
    assert FIRED in host_cargo(world, "src")


# -- the tools not installed here: the file system is the judge ---------------------------------

OTHERS = {
    # mise and asdf: a `path:` version puts the run's bin first on PATH in that directory.
    ".tool-versions": "node path:{p}/ev",
    # yarn: runs yarnPath instead of itself there.
    ".yarnrc.yml": "yarnPath: ./y.cjs",
    ".yarnrc": 'yarn-path "./y.cjs"',
    # direnv: runs the nearest .envrc (once allowed).
    ".envrc": "touch {p}/PWNED",
    # lazy.nvim: runs the nearest .lazy.lua from Neovim's directory up; Neovim the exrc files.
    ".lazy.lua": 'os.execute("touch {p}/PWNED")',
    ".nvim.lua": 'os.execute("touch {p}/PWNED")',
    # Vim with 'exrc': the files of the directory it starts in.
    ".vimrc": 'call system("touch {p}/PWNED")',
    "_vimrc": 'call system("touch {p}/PWNED")',
    "_exrc": 'call system("touch {p}/PWNED")',
    ".gvimrc": 'call system("touch {p}/PWNED")',
    "_gvimrc": 'call system("touch {p}/PWNED")',
    # npm, npx and pnpm: the shell they run scripts with, code node loads first.
    ".npmrc": "script-shell={p}/ev.sh",
    # bun: scripts it loads before any other.
    "bunfig.toml": 'preload = ["./ev.ts"]',
    ".bunfig.toml": 'preload = ["./ev.ts"]',
    # Mercurial, Jujutsu, Sapling: hooks and helpers at their every command.
    ".hg/hgrc": "[hooks] pre-status = touch {p}/PWNED",
    ".jj/repo/config.toml": 'ui.pager = "touch {p}/PWNED"',
    ".sl/config": "[hooks] pre-status = touch {p}/PWNED",
}


def plant(world: World, where: str, name: str, wait: bool = False) -> str:
    text = OTHERS[name].format(p=world.project)
    return (
        f"mkdir -p {os.path.dirname(f'{where}/{name}')} && echo ok > other.txt && "
        f"echo ok > {where}/other.txt && "
        f"echo {CONTROL}; echo '{text}' > {where}/{name}"
        + ("; sleep 5; echo survived" if wait else "")
    )


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_tools_files_are_kept_at_every_level(sbx, world, name):
    (world.project / "web").mkdir()
    r = sbx.run(plant(world, "web", name, wait=True))
    assert CONTROL in r.output and (world.project / "web/other.txt").exists(), r.output
    assert "survived" not in r.output, (r.output, r.notices)
    assert not (world.project / "web" / name).exists()
    assert any(f"protected file web/{name} was created" in n for n in r.notices), r.notices
    # In a directory the run makes, two levels down.
    r = sbx.run(plant(world, "pkgs/a/b", name))
    assert CONTROL in r.output and (world.project / "pkgs/a/b/other.txt").exists(), r.output
    assert not (world.project / "pkgs/a/b" / name).exists()
    assert any(f"protected file pkgs/a/b/{name} was created" in n for n in r.notices), r.notices
    # Control: without the sandbox the file is left where the tool finds it.
    sbx.unconfined().run(plant(world, "web", name))
    assert (world.project / "web" / name).exists()


def test_an_existing_nested_yarn_release_and_setting_are_read_only(sbx, world):
    web = world.project / "web"
    (web / ".yarn/releases").mkdir(parents=True)
    (web / ".yarn/releases/yarn-4.cjs").write_text('console.log("4.0.0")\n')
    (web / ".yarnrc.yml").write_text("yarnPath: .yarn/releases/yarn-4.cjs\n")
    before = {p: (web / p).read_text() for p in (".yarnrc.yml", ".yarn/releases/yarn-4.cjs")}
    attack = (
        "echo 'console.log(1)' > web/.yarn/releases/yarn-4.cjs; "
        "echo 'yarnPath: ./y.cjs' > web/.yarnrc.yml; "
        "echo 'console.log(2)' > web/.yarn/releases/new.cjs"
    )
    r = sbx.run(
        f"mkdir -p web/.yarn/cache && echo ok > web/.yarn/cache/c && echo {CONTROL}; {attack}"
    )
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert (web / ".yarn/cache/c").exists()  # yarn's cache stays writable
    assert {p: (web / p).read_text() for p in before} == before
    assert not (web / ".yarn/releases/new.cjs").exists()
    sbx.unconfined().run(attack)
    assert (web / ".yarnrc.yml").read_text() != before[".yarnrc.yml"]


def test_a_kept_file_the_run_moves_elsewhere_is_no_way_around(sbx, world):
    """An existing ``web/.envrc`` renamed with its directory: the copy under the new name is new
    there, and goes; the original comes back."""
    (world.project / "web").mkdir()
    (world.project / "web/.envrc").write_text("export A=1\n")
    r = sbx.run(f"echo {CONTROL}; mv web web2 && echo 'touch PWNED' > web2/.envrc; echo end")
    assert CONTROL in r.output, r.output
    assert (world.project / "web/.envrc").read_text() == "export A=1\n", r.notices
    assert not (world.project / "web2/.envrc").exists(), r.notices
    assert not any(
        (world.project / d / ".envrc").exists()
        and "PWNED" in (world.project / d / ".envrc").read_text()
        for d in ("web", "web2")
    ), r.notices


@pytest.mark.parametrize("where", ["", "web/"])
def test_a_directory_kept_whole_is_not_swapped_through_its_parent(sbx, world, where):
    """``.yarn/releases`` is read-only whole, but ``.yarn`` above it is not: a run that renames
    ``.yarn`` and makes ``.yarn/releases`` again would choose the file the kept ``yarnPath``
    names. The kept directory must stay the one it was: the run is stopped, and what it made
    under that name goes to the quarantine."""
    base = world.project / where
    (base / ".yarn/releases").mkdir(parents=True)
    release = base / ".yarn/releases/yarn-4.cjs"
    release.write_text('console.log("4.0.0")\n')
    (base / ".yarnrc.yml").write_text("yarnPath: .yarn/releases/yarn-4.cjs\n")
    attack = (
        f"mv {where}.yarn {where}.yarn.old && mkdir -p {where}.yarn/releases && "
        f"echo 'console.log(\"{FIRED}\")' > {where}.yarn/releases/yarn-4.cjs"
    )
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; sleep 5; echo survived")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert "survived" not in r.output, (r.output, r.notices)
    assert not release.exists() or FIRED not in release.read_text(), r.notices
    assert any(
        f"{where}.yarn/releases, kept read-only whole, was moved away" in n for n in r.notices
    ), r.notices
    # Control: without the sandbox the kept yarnPath now names the run's file.
    for p in (base / ".yarn", base / ".yarn.old"):
        if p.exists():
            shutil.rmtree(p)
    (base / ".yarn/releases").mkdir(parents=True)
    release.write_text('console.log("4.0.0")\n')
    sbx.unconfined().run(attack)
    assert FIRED in release.read_text()
