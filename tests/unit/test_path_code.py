"""The PATH guard's building blocks for what a program on PATH loads with it (``code_unit``,
``interpreter``, the ``node_modules`` unit of a PATH entry), without a sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from run_bash.paths import Tops
from run_bash.sandbox import pathguard
from run_bash.sandbox.gitask import HostReadError
from run_bash.sandbox.hostread import Discovery
from run_bash.sandbox.pathguard import (
    PathDir,
    code_unit,
    interpreter,
    judge,
    link_targets,
    path_dirs,
)
from run_bash.sandbox.places import Places


def write(path: Path, text: str = "x\n", mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def unit_of(target: Path, grant: Path) -> pathguard.CodeUnit:
    return code_unit(str(target), Tops([str(grant)]))


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    return p


# -- interpreter -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("#!/usr/bin/python3\n", "python3"),
        ("#! /usr/bin/python3.11 -E\n", "python3.11"),
        ("#!/usr/bin/env python3\n", "python3"),
        ("#!/usr/bin/env -S python3 -u\n", "python3"),
        ("#!/usr/bin/env -Spython3 -u\n", "python3"),
        ("#!/usr/bin/env -u HOME -i PYTHONPATH=x python\n", "python"),
        ("#!/usr/bin/env --split-string=node --x\n", "node"),
        ("#!/usr/bin/env node\n", "node"),
        ("#!/bin/sh\n", "sh"),
        ("#!/usr/bin/env\n", None),
        ("#!\n", None),
        ("print('no line')\n", None),
    ],
)
def test_interpreter(tmp_path, line, name):
    assert interpreter(str(write(tmp_path / "p", line + "x" * 1000))) == name


def test_interpreter_never_waits_nor_follows(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert interpreter(str(fifo)) is None
    (tmp_path / "link").symlink_to(write(tmp_path / "p", "#!/usr/bin/python3\n"))
    assert interpreter(str(tmp_path / "link")) is None
    assert interpreter(str(tmp_path / "missing")) is None


# -- code_unit ---------------------------------------------------------------------------------------


def test_a_python_program_is_its_directory(proj):
    by_name = write(proj / "tools/mytool.py", "import helper\n")
    assert unit_of(by_name, proj).path == str(proj / "tools")
    by_line = write(proj / "scripts/bin/mytool", "#!/usr/bin/env -S python3 -u\n")
    write(proj / "scripts/pyproject.toml")
    u = unit_of(by_line, proj)
    # Neither the manifest above nor `bin`: Python puts only the script's directory first.
    assert u.path == str(proj / "scripts/bin") and u.dirs == () and u.names == ()
    assert "Python" in u.why


def test_a_program_in_node_modules_is_the_outermost_one(proj):
    t = write(proj / "node_modules/a/node_modules/b/bin/x.js", "#!/usr/bin/env python3\n")
    assert unit_of(t, proj).path == str(proj / "node_modules")


def test_node_modules_above_the_grant_do_not_count(tmp_path):
    grant = tmp_path / "node_modules/proj"
    t = write(grant / "tools/x.py")
    assert unit_of(t, grant).path == str(grant / "tools")


def test_a_program_in_a_venv_is_the_venv(proj):
    write(proj / ".venv/pyvenv.cfg", "home = /usr/bin\n")
    t = write(proj / ".venv/lib/python3.11/site-packages/pkg/cli.py")
    assert unit_of(t, proj).path == str(proj / ".venv")


def test_a_package_is_found_by_its_manifest(proj):
    write(proj / "tools/cli/package.json", "{}\n")
    t = write(proj / "tools/cli/bin/cli.js", "#!/usr/bin/env node\n")
    (proj / "node_modules").mkdir()
    u = unit_of(t, proj)
    assert u.path == str(proj / "tools/cli") and "package.json" in u.why
    # Node resolves bare requires upward: the node_modules there is kept, the one that is not
    # there yet may not appear (it would shadow the one further up).
    assert u.dirs == (str(proj / "node_modules"),)
    assert u.names == (str(proj / "tools/node_modules"),)


@pytest.mark.parametrize("manifest", pathguard.MANIFESTS)
def test_every_manifest_makes_a_package(proj, manifest):
    write(proj / "pkg" / manifest)
    t = write(proj / "pkg/src/deep/run", "#!/bin/sh\n")
    assert unit_of(t, proj).path == str(proj / "pkg")


def test_without_a_manifest_its_directory_or_the_one_holding_bin(proj):
    assert unit_of(write(proj / "tools/mytool", "#!/bin/sh\n"), proj).path == str(proj / "tools")
    u = unit_of(write(proj / "pkg/bin/tool", "#!/bin/sh\n"), proj)
    assert u.path == str(proj / "pkg")
    # A shell program: a node_modules that is not there is no concern of it; one that is, is.
    assert u.names == ()
    (proj / "node_modules").mkdir()
    assert unit_of(proj / "pkg/bin/tool", proj).dirs == (str(proj / "node_modules"),)


def test_a_node_modules_link_above_the_unit_is_kept_as_a_link(proj, tmp_path):
    (tmp_path / "shared").mkdir()
    (proj / "node_modules").symlink_to(tmp_path / "shared")
    u = unit_of(write(proj / "tools/x", "#!/bin/sh\n"), proj)
    assert u.dirs == () and u.names == (str(proj / "node_modules"),)


def test_a_manifest_above_the_grant_does_not_count(tmp_path):
    write(tmp_path / "package.json")
    grant = tmp_path / "proj"
    assert unit_of(write(grant / "x.js"), grant).path == str(grant)


# -- link_targets with units -------------------------------------------------------------------------


def linked(tmp_path: Path, proj: Path, rel: str, text: str = "#!/bin/sh\n") -> PathDir:
    lb = tmp_path / "lb"
    lb.mkdir(exist_ok=True)
    target = write(proj / rel, text, 0o755)
    (lb / "tool").symlink_to(target)
    return PathDir(str(lb), (), str(lb), True, outside=True)


def test_link_targets_keep_each_programs_unit(tmp_path, proj):
    pd = linked(tmp_path, proj, "tools/cli/bin/cli.js", "#!/usr/bin/env node\n")
    write(proj / "tools/cli/package.json")
    kept = link_targets(pd, Places([str(proj)]), roots=[str(proj)])
    assert kept.files == (str(proj / "tools/cli/bin/cli.js"),)
    assert kept.dirs == (str(proj / "tools/cli"),)
    assert set(kept.names) == {str(proj / "tools/node_modules"), str(proj / "node_modules")}
    why = {p: w for p, w, _program in kept.why}
    assert why[str(proj / "tools/cli")].startswith(f"{pd.path}/tool is on your PATH")
    # Without roots (the quick look of read_only_dirs), no unit.
    assert link_targets(pd, Places([str(proj)])).dirs == ()


def test_a_unit_that_holds_the_project_is_refused(tmp_path, proj):
    write(proj / "package.json")
    pd = linked(tmp_path, proj, "bin/cli.js")
    with pytest.raises(HostReadError) as e:
        link_targets(pd, Places([str(proj)]), roots=[str(proj)])
    msg = str(e.value)
    assert f"{pd.path}/tool" in msg and "package.json" in msg and "holds the project" in msg
    assert "sandbox.rules.path_writable" in msg and "\n" not in msg
    # Exempt: the program, its PATH directory or the project.
    for free in (f"{pd.path}/tool", str(proj)):
        kept = link_targets(
            PathDir(pd.path, (), pd.unit, True, True, (free,)),
            Places([str(proj)]),
            roots=[str(proj)],
        )
        assert kept.dirs == () and kept.files == ()


def test_the_exempt_link_is_not_judged(tmp_path, proj):
    pd = linked(tmp_path, proj, "bin/cli.js")
    before = pathguard.dir_state(pd.path)
    (proj / "bin/cli.js").write_text("#!/bin/sh\necho changed\n")
    writable = Places([str(proj)])
    assert judge(pd, before, "tool", writable) is not None
    free = PathDir(pd.path, (), pd.unit, True, True, (str(proj),))
    assert judge(free, before, "tool", writable) is None


def test_node_modules_bin_on_path_is_the_node_modules(proj):
    (proj / "node_modules/.bin").mkdir(parents=True)
    (proj / "web/node_modules/x/node_modules/.bin").mkdir(parents=True)
    pds = path_dirs(
        f"node_modules/.bin:{proj}/web/node_modules/x/node_modules/.bin", [str(proj)], [str(proj)]
    )
    assert [(p.path, p.unit, p.sealed) for p in pds] == [
        (str(proj / "node_modules/.bin"), str(proj / "node_modules"), True),
        (
            str(proj / "web/node_modules/x/node_modules/.bin"),
            str(proj / "web/node_modules"),
            True,
        ),
    ]


def test_discovery_seals_the_units(tmp_path):
    home = tmp_path / "home"
    proj = home / "proj"
    lb = home / ".local/bin"
    lb.mkdir(parents=True)
    write(proj / "tools/mytool.py", "import helper\n", 0o755)
    (lb / "mytool").symlink_to(proj / "tools/mytool.py")
    write(proj / "tools/cli/package.json")
    write(proj / "tools/cli/bin/cli.js", "#!/usr/bin/env node\n", 0o755)
    (lb / "cli").symlink_to(proj / "tools/cli/bin/cli.js")
    (proj / "node_modules").mkdir()
    env = {"HOME": str(home), "PATH": f"{lb}:/usr/bin:/bin"}
    hr = Discovery().discover(str(proj), writable=[str(proj)], env=env, home=str(home))
    for d in ("tools", "tools/cli", "node_modules"):
        assert str(proj / d) in hr.sealed, d
        assert "is on your PATH and runs" in hr.reasons[str(proj / d)]
    assert str(proj / "tools/node_modules") in hr.members
    assert str(lb) in [pd.path for pd in hr.path_dirs]
