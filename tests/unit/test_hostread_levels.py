"""Names kept at every level (``keptnames.EVERY_LEVEL_MEMBERS``, ``EVERY_LEVEL_DIRS``, relative PATH
entries): an existing one anywhere in the writable trees is kept like one at the top, and one made
later is what ``appeared`` names. Discovery only; the sandbox tests are in tests/security."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from run_bash.sandbox.hostread import Discovery, appeared
from run_bash.sandbox.keptnames import (
    EVERY_LEVEL_MEMBERS,
    WORK_TREE_MEMBERS,
    kept_by_name,
    relative_entries,
)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    p = home / "proj"
    p.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(p)], check=True)
    return p


def discover(proj: Path, path: str = "/usr/bin:/bin", free: tuple[str, ...] = ()):
    home = proj.parent
    env = {"HOME": str(home), "PATH": path}
    d = Discovery()
    hr = d.discover(str(proj), writable=[str(proj)], env=env, home=str(home), path_writable=free)
    return d, hr


def named_now(d: Discovery, hr) -> list[str]:
    return [n for root in hr.scan for n in d.trees.find_named(root, frozenset(hr.sealed))[1]]


def test_the_names_are_the_top_level_ones_and_name_their_tools():
    assert set(EVERY_LEVEL_MEMBERS) <= set(WORK_TREE_MEMBERS)
    for name in (
        ".pre-commit-config.yaml",
        ".pre-commit-config.yml",
        "lefthook.yml",
        ".lefthook-local.jsonc",
        ".config/lefthook.toml",
        ".overcommit.yml",
        "rust-toolchain.toml",
        ".cargo/config.toml",
        ".tool-versions",
        ".yarnrc.yml",
        ".envrc",
        ".lazy.lua",
    ):
        assert name in EVERY_LEVEL_MEMBERS, name
    assert [p for p, _ in kept_by_name("/p/src", ".cargo")] == [
        "/p/src/.cargo/config.toml",
        "/p/src/.cargo/config",
    ]
    assert kept_by_name("/p", ".yarn") == [("/p/.yarn/releases", True), ("/p/.yarn/plugins", True)]
    assert kept_by_name("/p", "README") == []


def test_relative_path_entries():
    path = "node_modules/.bin:/usr/bin::.:./bin:../tools/bin:..:~/bin:$X/bin:bin/"
    assert relative_entries(path) == ["node_modules/.bin", "bin", "tools/bin"]


def test_existing_nested_ones_are_kept_like_those_at_the_top(proj: Path):
    (proj / "src/.cargo").mkdir(parents=True)
    (proj / "src/.cargo/config.toml").write_text("[build]\n")
    (proj / "src/rust-toolchain.toml").write_text("[toolchain]\n")
    (proj / "a/b/c").mkdir(parents=True)
    (proj / "a/b/c/.pre-commit-config.yaml").write_text("repos: []\n")
    (proj / "web/.yarn/releases").mkdir(parents=True)
    (proj / "web/.lefthook/pre-commit").mkdir(parents=True)
    _d, hr = discover(proj)
    for rel in (
        "src/.cargo/config.toml",
        "src/.cargo/config",  # not there: may not appear
        "src/rust-toolchain.toml",
        "a/b/c/.pre-commit-config.yaml",
        "web/.yarn/plugins",
    ):
        assert str(proj / rel) in hr.members, rel
    assert str(proj / "web/.yarn/releases") in hr.sealed
    assert str(proj / "web/.lefthook") in hr.sealed
    # A directory without any of the names keeps nothing.
    assert not any(m.startswith(str(proj / "a/b/")) and "/c/" not in m for m in hr.members)


def test_relative_path_entries_are_taken_in_subdirectories(proj: Path):
    (proj / "web/node_modules/.bin").mkdir(parents=True)
    (proj / "api/node_modules").mkdir(parents=True)  # no .bin yet: it may not appear
    (proj / "docs/node_modules/.bin").mkdir(parents=True)
    _d, hr = discover(proj, "node_modules/.bin:/usr/bin", free=("docs/node_modules/.bin",))
    paths = {pd.path: pd for pd in hr.path_dirs}
    assert str(proj / "node_modules/.bin") in paths  # the top, as before
    assert paths[str(proj / "web/node_modules/.bin")].sealed
    # The unit of a node_modules/.bin is its node_modules (pathguard), there as at the top.
    assert str(proj / "web/node_modules") in hr.sealed
    assert str(proj / "api/node_modules") in hr.sealed
    assert str(proj / "docs/node_modules/.bin") not in paths  # path_writable, taken there too
    assert "/usr/bin" in paths[str(proj / "web/node_modules/.bin")].later


def test_what_appeared_after_the_set_was_made(proj: Path):
    (proj / "old").mkdir()
    (proj / "old/.envrc").write_text("")
    d, hr = discover(proj, "node_modules/.bin:.venv/bin:/usr/bin")
    assert appeared(hr, named_now(d, hr)) == []
    (proj / "src").mkdir()
    (proj / "src/rust-toolchain.toml").write_text("")
    (proj / "new/deep/.cargo").mkdir(parents=True)
    (proj / "new/deep/.cargo/config.toml").write_text("")
    (proj / "web/node_modules/.bin").mkdir(parents=True)
    (proj / "py/.venv/bin").mkdir(parents=True)
    (proj / "py/.venv/pyvenv.cfg").write_text("")
    (proj / "half/node_modules").mkdir(parents=True)  # no .bin: nothing runs from it
    (proj / "y/.yarn/cache").mkdir(parents=True)  # yarn's cache stays writable
    got = dict(appeared(hr, named_now(d, hr)))
    assert set(got) == {
        str(proj / "src/rust-toolchain.toml"),
        str(proj / "new/deep/.cargo/config.toml"),
        str(proj / "web/node_modules"),  # the unit of its .bin, as at the top
        str(proj / "py/.venv"),  # the whole venv, as at the top
    }
    assert got[str(proj / "src/rust-toolchain.toml")] is None
    assert "is on your PATH" in (got[str(proj / "web/node_modules")] or "")
    # The existing one changed is a member (compared as such), not something that appeared.
    (proj / "old/.envrc").write_text("changed")
    assert str(proj / "old/.envrc") not in dict(appeared(hr, named_now(d, hr)))
    assert os.path.exists(proj / "old/.envrc")
