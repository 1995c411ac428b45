"""Search paths other than PATH (``searchvars.py``) in the host-read set: how each variable's
entries are read, their directories kept as PATH's are, the files they name kept as files, the
entries that hold the project told of."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from run_bash.sandbox import searchvars
from run_bash.sandbox.hostread import Discovery, appeared
from run_bash.sandbox.searchvars import DIRS, EITHER, FILES


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    p = tmp_path / "home/proj"
    p.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(p)], check=True)
    return p


def discover(proj: Path, free: tuple[str, ...] = (), **env: str):
    home = proj.parent
    d = Discovery()
    full = {"HOME": str(home), "PATH": "/usr/bin:/bin", **env}
    hr = d.discover(str(proj), writable=[str(proj)], env=full, home=str(home), path_writable=free)
    return d, hr


def got(env: dict[str, str]) -> list[tuple[str, str, str]]:
    return [(e.var.name, e.path, e.kind) for e in searchvars.entries(env)]


def test_each_tools_rule_for_its_entries():
    # Python and the dynamic loader: an empty entry is the working directory; `;` separates
    # LD_LIBRARY_PATH's too; a `$` token is the directory above it.
    assert got({"PYTHONPATH": ":src:/a"}) == [
        ("PYTHONPATH", "", DIRS),
        ("PYTHONPATH", "src", DIRS),
        ("PYTHONPATH", "/a", DIRS),
    ]
    assert got({"LD_LIBRARY_PATH": "/x;/y::/p/$LIB/z"}) == [
        ("LD_LIBRARY_PATH", "/x", DIRS),
        ("LD_LIBRARY_PATH", "/y", DIRS),
        ("LD_LIBRARY_PATH", "", DIRS),
        ("LD_LIBRARY_PATH", "/p", DIRS),
    ]
    # Node and Perl drop an empty entry.
    assert got({"NODE_PATH": ":n", "PERL5LIB": "::/p"}) == [
        ("NODE_PATH", "n", DIRS),
        ("PERL5LIB", "/p", DIRS),
    ]
    # Lua: the directory before the first `?`; `;;` is the default path; no `?`: one file.
    assert got({"LUA_PATH_5_4": "/l/?.lua;/l2/?/init.lua;;./?.lua;/f.lua"}) == [
        ("LUA_PATH_5_4", "/l", DIRS),
        ("LUA_PATH_5_4", "/l2", DIRS),
        ("LUA_PATH_5_4", ".", DIRS),
        ("LUA_PATH_5_4", "/f.lua", FILES),
    ]
    # Files: LD_PRELOAD's names without a slash are found through the search path.
    assert got({"LD_PRELOAD": "libx.so /p/y.so:/p/z.so", "PYTHONSTARTUP": ".rc.py"}) == [
        ("PYTHONSTARTUP", ".rc.py", FILES),
        ("LD_PRELOAD", "/p/y.so", FILES),
        ("LD_PRELOAD", "/p/z.so", FILES),
    ]
    assert got({"CLASSPATH": "a.jar:lib/*", "JULIA_LOAD_PATH": "@:@stdlib:/j"}) == [
        ("CLASSPATH", "a.jar", EITHER),
        ("CLASSPATH", "lib", DIRS),
        ("JULIA_LOAD_PATH", "/j", DIRS),
    ]


def test_directories_are_kept_as_path_ones(proj: Path):
    for d in ("src", "build/lib", "lua", "web/src", "free"):
        (proj / d).mkdir(parents=True)
    (proj / ".venv/lib/site-packages").mkdir(parents=True)
    (proj / ".venv/pyvenv.cfg").write_text("")
    _d, hr = discover(
        proj,
        free=("free",),
        PYTHONPATH=f"src:{proj}/free",
        LD_LIBRARY_PATH=f"{proj}/build/lib:{proj}/missing",
        LUA_PATH=f"{proj}/lua/?.lua;;",
        NODE_PATH=f"{proj}/.venv/lib/site-packages",
    )
    by = {pd.path: pd for pd in hr.path_dirs}
    for d in ("src", "build/lib", "lua", "web/src"):
        assert str(proj / d) in hr.sealed, d
    assert by[str(proj / "src")].var == "PYTHONPATH"
    assert by[str(proj / "build/lib")].var == "LD_LIBRARY_PATH"
    assert by[str(proj / "src")].later == ()
    assert str(proj / "missing") in hr.members  # may not appear
    assert str(proj / "free") not in hr.sealed  # sandbox.rules.path_writable
    # The unit is pathguard's: a directory with a pyvenv.cfg above it keeps its venv.
    assert str(proj / ".venv/lib/site-packages") in hr.sealed
    assert "LD_LIBRARY_PATH" in hr.reasons[str(proj / "build/lib")]
    assert hr.warnings == ()


def test_files_are_kept_as_files(proj: Path):
    (proj / ".pythonrc.py").write_text("")
    (proj / "web").mkdir()
    (proj / "web/.pythonrc.py").write_text("")
    _d, hr = discover(
        proj, PYTHONSTARTUP=".pythonrc.py", LD_PRELOAD=f"libc.so.6 {proj}/pre.so", BASH_ENV="/etc/x"
    )
    assert str(proj / ".pythonrc.py") in hr.sealed
    assert str(proj / "web/.pythonrc.py") in hr.sealed  # relative: where Python starts
    assert str(proj / "pre.so") in hr.members  # not there yet: may not appear
    assert "LD_PRELOAD" in hr.reasons[str(proj / "pre.so")]


def test_an_entry_holding_the_project_is_told_of(proj: Path):
    # `export PYTHONPATH=$PYTHONPATH:/x` with the variable unset: the working directory first.
    _d, hr = discover(proj, PYTHONPATH=":/nowhere", LD_LIBRARY_PATH=str(proj))
    assert str(proj / "sitecustomize.py") in hr.members
    assert str(proj / "usercustomize") in hr.members
    assert str(proj) not in hr.sealed
    assert any("PYTHONPATH has an entry that means the project's top" in w for w in hr.warnings)
    assert any(
        "LD_LIBRARY_PATH has an entry that means the project's top" in w for w in hr.warnings
    )
    # A warning never names a scanned tree (that would read as its walk cut short).
    assert not any(root in w for w in hr.warnings for root in hr.scan)


def test_what_appeared_in_a_new_subdirectory(proj: Path):
    d, hr = discover(proj, PYTHONPATH="src", PYTHONSTARTUP=".pythonrc.py")
    named = [n for root in hr.scan for n in d.trees.find_named(root, frozenset(hr.sealed))[1]]
    assert appeared(hr, named) == []
    (proj / "web/src").mkdir(parents=True)
    (proj / "api").mkdir()
    (proj / "api/.pythonrc.py").write_text("")
    named = [n for root in hr.scan for n in d.trees.find_named(root, frozenset(hr.sealed))[1]]
    found = dict(appeared(hr, named))
    assert str(proj / "web/src") in found
    assert "PYTHONPATH" in (found[str(proj / "web/src")] or "")
    assert "PYTHONSTARTUP" in (found[str(proj / "api/.pythonrc.py")] or "")
