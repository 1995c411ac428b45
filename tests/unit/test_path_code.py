"""The PATH guard's building blocks for what a program on PATH loads with it (``code_unit``,
``interpreter``, the ``node_modules`` unit of a PATH entry) and for its other names (the
hard-link census and search), without a sandbox."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from run_bash.paths import Tops
from run_bash.sandbox import pathguard, pathlinks, pathstate
from run_bash.sandbox.gitask import HostReadError
from run_bash.sandbox.hostread import Discovery
from run_bash.sandbox.pathguard import (
    PathDir,
    code_unit,
    link_targets,
    path_dirs,
)
from run_bash.sandbox.pathlinks import hard_links, may_write
from run_bash.sandbox.pathstate import judge
from run_bash.sandbox.places import Places
from run_bash.sandbox.programs import interpreter


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
    t = write(proj / "pkg/src/deep/run", "#!/usr/bin/env ruby\n")
    assert unit_of(t, proj).path == str(proj / "pkg")


def test_without_a_manifest_its_directory_or_the_one_holding_bin(proj):
    assert unit_of(write(proj / "tools/mytool", "#!/usr/bin/env ruby\n"), proj).path == str(
        proj / "tools"
    )
    u = unit_of(write(proj / "pkg/bin/tool", "#!/usr/bin/env ruby\n"), proj)
    assert u.path == str(proj / "pkg")
    # Not a JavaScript program: a node_modules that is not there is no concern of it; one that
    # is, is.
    assert u.names == ()
    (proj / "node_modules").mkdir()
    assert unit_of(proj / "pkg/bin/tool", proj).dirs == (str(proj / "node_modules"),)


@pytest.mark.parametrize(
    "head", ["#!/bin/sh\n", "#!/usr/bin/env bash\n", "#!/bin/zsh -f\n", "\x7fELF\x02\x01\x01"]
)
def test_a_shell_script_or_compiled_program_is_its_directory(proj, head):
    # A dotfiles repository's bin/ (no manifest): bin, not the repository, even with a manifest
    # above it; the node_modules above are no concern of it.
    write(proj / "package.json", "{}\n")
    (proj / "node_modules").mkdir()
    u = unit_of(write(proj / "dots/bin/tool", head), proj)
    assert (u.path, u.dirs, u.names) == (str(proj / "dots/bin"), (), ())
    assert unit_of(write(proj / "scripts/run.sh", "echo\n"), proj).path == str(proj / "scripts")


def test_a_node_modules_link_above_the_unit_is_kept_as_a_link(proj, tmp_path):
    (tmp_path / "shared").mkdir()
    (proj / "node_modules").symlink_to(tmp_path / "shared")
    u = unit_of(write(proj / "tools/x", "#!/usr/bin/env ruby\n"), proj)
    assert u.dirs == () and u.names == (str(proj / "node_modules"),)


def test_a_manifest_above_the_grant_does_not_count(tmp_path):
    write(tmp_path / "package.json")
    grant = tmp_path / "proj"
    assert unit_of(write(grant / "x.js"), grant).path == str(grant)


def test_a_program_in_a_nested_node_modules_keeps_those_above(proj):
    """A workspace package's own node_modules: the root's, where packages are hoisted, too."""
    (proj / "node_modules").mkdir()
    t = write(proj / "packages/web/node_modules/x/bin/x.js")
    u = unit_of(t, proj)
    assert u.path == str(proj / "packages/web/node_modules")
    assert u.dirs == (str(proj / "node_modules"),)
    assert u.names == (str(proj / "packages/node_modules"),)
    assert pathguard.modules_above(u.path, Places([str(proj)])) == (u.dirs, u.names)


def test_the_unit_of_a_directory_a_link_leads_to(proj):
    write(proj / "packages/lib/package.json")
    assert code_unit(str(proj / "packages/lib"), Tops([str(proj)]), True).path == str(
        proj / "packages/lib"
    )
    (proj / "shared/sub").mkdir(parents=True)
    u = code_unit(str(proj / "shared/sub"), Tops([str(proj)]), True)
    assert u.path == str(proj / "shared/sub")


# -- links in the kept units --------------------------------------------------------------------


@pytest.fixture
def listed(monkeypatch):
    monkeypatch.setattr(pathguard, "_LISTED", {})


def test_a_workspace_link_keeps_the_package_it_leads_to(proj, listed):
    nm = proj / "node_modules"
    write(proj / "packages/lib/package.json")
    write(proj / "packages/lib/index.js")
    (nm / "@my").mkdir(parents=True)
    (nm / "@my/lib").symlink_to("../../packages/lib")
    (nm / "inside").symlink_to("@my")  # within the unit: nothing more to keep
    kept = pathguard.unit_links([(str(nm), "/lb/eslint")], Places([str(proj)]), [str(proj)])
    assert kept.dirs == (str(proj / "packages/lib"),)
    assert str(proj / "packages/node_modules") in kept.names
    why = {p: w for p, w, _program in kept.why}
    assert why[str(proj / "packages/lib")].startswith(
        f"/lb/eslint is on your PATH and loads {nm}/@my/lib"
    )


def test_links_of_the_package_a_link_leads_to_are_followed(proj, tmp_path, listed):
    (proj / "tools").mkdir()
    (proj / "tools/helper.py").symlink_to("../lib/helper.py")
    write(proj / "lib/helper.py")
    (proj / "lib/more.py").symlink_to("../more/more.py")
    write(proj / "more/more.py")
    (proj / "tools/gone.py").symlink_to("../nowhere/gone.py")
    (proj / "tools/out").symlink_to(tmp_path)  # outside every grant: nothing to keep
    kept = pathguard.unit_links(
        [(str(proj / "tools"), "/lb/mytool")], Places([str(proj)]), [str(proj)]
    )
    assert set(kept.dirs) == {str(proj / "lib"), str(proj / "more")}
    assert set(kept.files) == {str(proj / "lib/helper.py"), str(proj / "more/more.py")}
    assert kept.names == (str(proj / "nowhere/gone.py"),)  # may not appear


def test_a_link_in_a_unit_to_the_project_is_refused(proj, listed):
    (proj / "tools").mkdir()
    (proj / "tools/all").symlink_to("..")
    with pytest.raises(HostReadError, match="holds the project") as e:
        pathguard.unit_links(
            [(str(proj / "tools"), "/lb/mytool")], Places([str(proj)]), [str(proj)]
        )
    assert "/lb/mytool" in str(e.value) and "sandbox.rules.path_writable" in str(e.value)
    # Exempt: where it leads.
    kept = pathguard.unit_links(
        [(str(proj / "tools"), "/lb/mytool")], Places([str(proj)]), [str(proj)], [str(proj)]
    )
    assert kept.dirs == ()


def test_unit_listings_are_kept_per_state(proj, listed, monkeypatch):
    nm = proj / "node_modules"
    (nm / "@s").mkdir(parents=True)
    for i in range(3):
        (nm / f"p{i}").mkdir()
    scans: list[str] = []
    real_scandir = os.scandir

    def scandir(path):
        scans.append(str(path))
        return real_scandir(path)

    monkeypatch.setattr(pathguard.os, "scandir", scandir)
    for _ in range(3):
        assert pathguard.unit_links([(str(nm), "p")], Places([str(proj)]), [str(proj)]).dirs == ()
    assert scans.count(str(nm)) == 1 and scans.count(str(nm / "@s")) == 1
    write(proj / "packages/x/package.json")
    (nm / "@s/x").symlink_to("../../packages/x")
    kept = pathguard.unit_links([(str(nm), "p")], Places([str(proj)]), [str(proj)])
    assert kept.dirs == (str(proj / "packages/x"),) and scans.count(str(nm / "@s")) == 2


def test_too_many_entries_in_the_units_fail_closed(proj, listed, monkeypatch):
    for i in range(10):
        (proj / "tools" / f"d{i}").mkdir(parents=True)
    monkeypatch.setattr(pathguard, "MAX_UNIT_ENTRIES", 5)
    with pytest.raises(HostReadError, match="too many"):
        pathguard.unit_links([(str(proj / "tools"), "/lb/t")], Places([str(proj)]), [str(proj)])


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
    pd = linked(tmp_path, proj, "bin/cli.js", "#!/usr/bin/env node\n")
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
    before = pathstate.dir_state(pd.path)
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


# -- hard links ------------------------------------------------------------------------------------


@pytest.fixture
def fresh(monkeypatch):
    """Empty listings (and watches) of PATH directories and searches."""
    programs = pathlinks._Programs()
    monkeypatch.setattr(pathlinks, "_PROGRAMS", programs)
    monkeypatch.setattr(pathlinks, "_SEARCHED", {})
    yield programs
    for d in list(programs._dirs):
        programs._forget(d)
    if programs._ino is not None:
        programs._ino.close()


def counting(monkeypatch, name: str) -> list[object]:
    calls: list[object] = []
    module = pathlinks if hasattr(pathlinks, name) else pathguard
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_program_on_path_with_a_name_in_the_grant(tmp_path, proj, fresh):
    lb = tmp_path / "lb"
    tool = write(lb / "tool", "#!/bin/sh\n", 0o755)
    os.link(tool, proj / "copy")
    found = hard_links([str(lb)], [], Places([str(proj)]))
    assert [(h.name, h.program) for h in found] == [(str(proj / "copy"), str(tool))]


def test_names_on_path_account_for_each_other(tmp_path, proj, fresh, monkeypatch):
    lb = tmp_path / "lb"
    perl = write(lb / "perl", "#!/bin/sh\n", 0o755)
    os.link(perl, lb / "perl5.36.0")
    other = tmp_path / "other"
    (other / "bin").mkdir(parents=True)
    os.link(perl, other / "bin/perl")  # a third name, in another PATH directory
    searched = counting(monkeypatch, "_search")
    assert hard_links([str(lb), str(other / "bin")], [], Places([str(proj)])) == []
    assert searched == []


def test_a_name_outside_every_grant_is_searched_once(tmp_path, proj, fresh, monkeypatch):
    lb = tmp_path / "lb"
    tool = write(lb / "tool", "#!/bin/sh\n", 0o755)
    (tmp_path / "backup").mkdir()
    os.link(tool, tmp_path / "backup/tool")
    searched = counting(monkeypatch, "_search")
    for _ in range(3):
        assert hard_links([str(lb)], [], Places([str(proj)])) == []
    assert len(searched) == 1
    # A name made in the grant changes the file's ctime and link count: searched again.
    os.link(tool, proj / "again")
    found = hard_links([str(lb)], [], Places([str(proj)]))
    assert [h.name for h in found] == [str(proj / "again")] and len(searched) == 2


@pytest.mark.parametrize("watched", [True, False])
def test_a_directory_is_listed_once_per_state(tmp_path, proj, fresh, monkeypatch, watched):
    """Each PATH directory is listed once while its signature holds; its programs' link counts
    are read again only when inotify says one changed (or, unwatched, at every look). A name
    the user makes in the project for a program on PATH changes no PATH directory: its count
    says it."""
    if not watched:
        monkeypatch.setattr(pathlinks, "_watch_budget", lambda: 0)
    lb = tmp_path / "lb"
    for i in range(5):
        write(lb / f"t{i}", "#!/bin/sh\n", 0o755)
    (lb / "link").symlink_to("/usr/bin/true")
    listed = counting(monkeypatch, "_Listing")
    stats: list[str] = []
    real_lstat = os.lstat

    def lstat(path, *args, **kwargs):
        stats.append(str(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(pathguard.os, "lstat", lstat)
    assert hard_links([str(lb)], [], Places([str(proj)])) == []
    stats.clear()
    assert hard_links([str(lb)], [], Places([str(proj)])) == []
    assert len(listed) == 1
    assert len([p for p in stats if p.startswith(f"{lb}/t")]) == (0 if watched else 5)
    sig = pathlinks._dir_sig(str(lb))
    os.link(lb / "t3", proj / "t3")
    assert pathlinks._dir_sig(str(lb)) == sig
    found = hard_links([str(lb)], [], Places([str(proj)]))
    assert [h.name for h in found] == [str(proj / "t3")]
    assert len(listed) == 1
    # A new program in the directory: listed again.
    write(lb / "t9", "#!/bin/sh\n", 0o755)
    os.link(lb / "t9", proj / "t9")
    found = hard_links([str(lb)], [], Places([str(proj)]))
    assert sorted(h.name for h in found) == [str(proj / "t3"), str(proj / "t9")]
    assert len(listed) == 2


def test_each_set_of_directories_keeps_its_own_sum(tmp_path, proj, fresh):
    """A policy asks about two sets of PATH directories (its own, and those its links lead to):
    asked in turn, each set's sum of the files is made once while no file changed, not again at
    every turn. Control: a name made in the grant for a program moves the sums, and is found."""
    lb, other = tmp_path / "lb", tmp_path / "other"
    for i in range(3):
        write(lb / f"t{i}", "#!/bin/sh\n", 0o755)
        write(other / f"o{i}", "#!/bin/sh\n", 0o755)
    one, two = [str(lb)], [str(lb), str(other)]
    places = Places([str(proj)])
    for _ in range(2):  # (listing the second set moves the first set's sum once)
        assert hard_links(one, [], places) == [] and hard_links(two, [], places) == []
    sums = {k: v[1] for k, v in fresh.counted.items()}
    assert len(sums) == 2
    for _ in range(3):
        assert hard_links(one, [], places) == [] and hard_links(two, [], places) == []
    assert all(fresh.counted[k][1] is v for k, v in sums.items())  # the same sums, kept
    os.link(other / "o1", proj / "o1")
    assert [h.name for h in hard_links(two, [], places)] == [str(proj / "o1")]
    assert hard_links(one, [], places) == []
    assert all(fresh.counted[k][1] is not v for k, v in sums.items())  # summed again


def test_the_end_of_a_path_link_with_another_name(tmp_path, proj, fresh):
    end = write(proj / "tools/mytool", "#!/bin/sh\n", 0o755)
    os.link(end, proj / "other")
    found = hard_links([], [str(end)], Places([str(proj)]))
    assert [(h.name, h.program) for h in found] == [(str(proj / "other"), str(end))]


def test_a_search_that_must_stop_fails_closed(tmp_path, proj, fresh, monkeypatch):
    lb = tmp_path / "lb"
    tool = write(lb / "tool", "#!/bin/sh\n", 0o755)
    (tmp_path / "backup").mkdir()
    os.link(tool, tmp_path / "backup/tool")
    for i in range(20):
        write(proj / f"d{i}/f")
    monkeypatch.setattr(pathlinks, "MAX_LINK_SEARCH", 10)
    with pytest.raises(HostReadError, match="hard links") as e:
        hard_links([str(lb)], [], Places([str(proj)]))
    assert str(tool) in str(e.value) and "sandbox.rules.path_writable" in str(e.value)


def test_a_search_stops_once_every_name_is_found(tmp_path, proj, fresh, monkeypatch):
    lb = tmp_path / "lb"
    tool = write(lb / "tool", "#!/bin/sh\n", 0o755)
    os.link(tool, proj / "a")
    for i in range(50):
        write(proj / f"zz/{i}")
    monkeypatch.setattr(pathlinks, "MAX_LINK_SEARCH", 20)
    # The top of the grant is listed first: the name is found before the rest is walked.
    assert [h.name for h in hard_links([str(lb)], [], Places([str(proj)]))] == [str(proj / "a")]


def test_a_name_in_another_filesystem_is_not_looked_for(tmp_path, proj, fresh, monkeypatch):
    lb = tmp_path / "lb"
    tool = write(lb / "tool", "#!/bin/sh\n", 0o755)
    os.link(tool, tmp_path / "elsewhere")
    real_stat = os.stat

    def other_dev(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        if str(path) == str(proj):
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev + 1, *tuple(st)[3:]))
        return st

    monkeypatch.setattr(pathguard.os, "stat", other_dev)
    searched = counting(monkeypatch, "_search")
    assert hard_links([str(lb)], [], Places([str(proj)])) == []
    assert searched == []


def test_may_write():
    me = os.geteuid()
    other = me + 1
    mode = stat.S_IFREG | 0o755

    def st(uid: int, m: int) -> os.stat_result:
        return os.stat_result((m, 1, 1, 1, uid, 0, 0, 0, 0, 0))

    assert may_write(st(me, stat.S_IFREG | 0o555))  # the owner may give itself the bit
    assert may_write(st(other, mode | 0o002)) and may_write(st(other, mode | 0o020))
    assert may_write(st(other, mode)) == (me == 0)


def test_where_a_unit_link_leads_is_asked_again_only_when_what_it_read_changed(
    proj, listed, monkeypatch
):
    monkeypatch.setattr(pathguard, "_LEAD", {})
    monkeypatch.setattr(pathguard.fsdeps, "SETTLED_NS", 0)
    nm = proj / "node_modules"
    (nm / "@my").mkdir(parents=True)
    (proj / "packages/lib/src").mkdir(parents=True)
    (nm / "@my/lib").symlink_to("../../packages/lib/src")
    chains = counting(monkeypatch, "link_chain")

    def kept() -> tuple[str, ...]:
        return pathguard.unit_links([(str(nm), "p")], Places([str(proj)]), [str(proj)]).dirs

    assert kept() == (str(proj / "packages/lib/src"),)
    assert kept() == (str(proj / "packages/lib/src"),) and len(chains) == 1
    # A manifest above it makes the package the unit: seen, the directory it lies in changed.
    write(proj / "packages/lib/package.json")
    assert kept() == (str(proj / "packages/lib"),) and len(chains) == 2
