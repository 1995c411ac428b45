"""The host-read set and the guard's building blocks, without a sandbox: what git is asked and
what it says, the rules that judge what a run left (inert config, shadowing, includes), and the
guard's comparisons, which must never block and never do more work than what they keep."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from run_bash.errors import UsageError
from run_bash.sandbox.agentrules import include_candidates, rules_problems
from run_bash.sandbox.gitask import config_keys, judge_config, key_pattern
from run_bash.sandbox.hostread import Discovery, read_nonblocking
from run_bash.sandbox.members import ABSENT, Repairer, capture, matches
from run_bash.sandbox.pathguard import PathDir
from run_bash.sandbox.pathstate import shadowed
from run_bash.sandbox.policy import trusted_realpath
from run_bash.service import parse_codecompanion


def git(*args: str, cwd: Path, home: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    (h / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.invalid\n")
    return h


def discover(cwd: Path, home: Path, writable: list[Path] | None = None):
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    return Discovery().discover(
        str(cwd), writable=[str(w) for w in (writable or [cwd])], env=env, home=str(home)
    )


# -- discovery ------------------------------------------------------------------------------------


def test_everything_git_reads_of_a_repository_is_a_member(home):
    proj = home / "proj"
    proj.mkdir()
    git("init", "-q", cwd=proj, home=home)
    git("config", "include.path", "../shared.cfg", cwd=proj, home=home)
    (proj / "shared.cfg").write_text("[core]\n")
    hr = discover(proj, home)
    for rel in (".git/config", ".git/hooks", ".git/commondir", ".git/info/attributes",
                ".git/objects/info/alternates", ".gitmodules", ".nvim.lua", ".envrc", "shared.cfg"):  # fmt: skip
        assert str(proj / rel) in hr.members, rel
    assert hr.git_dirs == (str(proj / ".git"),)
    assert hr.grant == ()


def test_core_hooks_path_is_the_hooks_member(home):
    proj = home / "proj"
    proj.mkdir()
    git("init", "-q", cwd=proj, home=home)
    git("config", "core.hooksPath", ".husky/_", cwd=proj, home=home)
    hr = discover(proj, home)
    assert str(proj / ".husky/_") in hr.members


def test_subdirectory_and_linked_worktree_grant_the_git_dirs(home):
    proj = home / "proj"
    (proj / "pkg").mkdir(parents=True)
    git("init", "-q", cwd=proj, home=home)
    git("commit", "-q", "--allow-empty", "-m", "i", cwd=proj, home=home)
    hr = discover(proj / "pkg", home)
    assert hr.grant == (str(proj / ".git"),)
    assert str(proj / ".git/config") in hr.members
    git("worktree", "add", "-q", str(home / "wt"), cwd=proj, home=home)
    hr = discover(home / "wt", home)
    assert set(hr.grant) == {str(proj / ".git/worktrees/wt"), str(proj / ".git")}
    assert str(proj / ".git/worktrees/wt/commondir") in hr.members


@pytest.mark.parametrize("top", ["home", "root_parent"])
def test_a_repository_whose_work_tree_is_home_or_above_is_never_granted(home, top):
    repo = home if top == "home" else home.parent
    git("init", "-q", cwd=repo, home=home)
    notes = home / "notes"
    notes.mkdir()
    hr = discover(notes, home)
    assert hr.grant == ()
    assert not [m for m in hr.members if m.startswith(str(repo / ".git"))]
    assert hr.roots == (str(notes),)


def test_embedded_bare_and_submodule_repositories_are_found(home):
    proj = home / "proj"
    proj.mkdir()
    git("init", "-q", cwd=proj, home=home)
    for d in ("a/b/emb", "fixtures"):
        (proj / d).mkdir(parents=True)
    git("init", "-q", cwd=proj / "a/b/emb", home=home)
    git("init", "-q", "--bare", "x.git", cwd=proj / "fixtures", home=home)
    hr = discover(proj, home)
    assert str(proj / "a/b/emb/.git") in hr.git_dirs
    assert str(proj / "fixtures/x.git") in hr.git_dirs
    assert str(proj / "a/b/emb/.git/config") in hr.members
    assert str(proj / "fixtures/x.git/hooks") in hr.members


def test_a_git_that_blocks_fails_the_discovery_instead_of_hanging(home, monkeypatch):
    proj = home / "proj"
    proj.mkdir()
    git("init", "-q", cwd=proj, home=home)
    git("config", "include.path", "../fifo.cfg", cwd=proj, home=home)
    os.mkfifo(proj / "fifo.cfg")
    monkeypatch.setattr("run_bash.sandbox.gitask.GIT_TIMEOUT_S", 1.0)
    from run_bash.sandbox.hostread import HostReadError

    with pytest.raises(HostReadError, match="did not answer"):
        discover(proj, home)


def test_path_dirs_inside_writable_grants(home):
    proj = home / "proj"
    (proj / ".venv/bin").mkdir(parents=True)
    env_path = f"{proj}/.venv/bin:/usr/bin:{home}/.local/bin"
    hr = Discovery().discover(
        str(proj), writable=[str(proj)], env={"HOME": str(home), "PATH": env_path}, home=str(home)
    )
    assert [p.path for p in hr.path_dirs] == [str(proj / ".venv/bin")]
    assert hr.path_dirs[0].later == ("/usr/bin", f"{home}/.local/bin")


# -- the rules ------------------------------------------------------------------------------------

FRESH = textwrap.dedent(
    """\
    [core]
    \trepositoryformatversion = 0
    \tfilemode = true
    \tbare = false
    \tlogallrefupdates = true
    [remote "origin"]
    \turl = https://example.invalid/x.git
    \tfetch = +refs/heads/*:refs/remotes/origin/*
    [branch "main"]
    \tremote = origin
    \tmerge = refs/heads/main
    """
)


@pytest.mark.parametrize(
    ("text", "inert"),
    [
        (FRESH, True),
        ("", True),
        ("# only a comment\n", True),
        ('[core]\n\tfsmonitor = "touch x"\n', False),
        ("[core] fsmonitor = x\n", False),
        ("[core]\n\thooksPath = .h\n", False),
        ("[include]\n\tpath = ../x\n", False),
        ('[includeIf "gitdir:/"]\n\tpath = x\n', False),
        ('[filter "lfs"]\n\tclean = evil\n', False),
        ('[diff "x"]\n\ttextconv = evil\n', False),
        ('[remote "o"]\n\tuploadpack = evil\n', False),
        ("[core]\n\tsshCommand = evil\n", False),
        ("[alias]\n\tst = !evil\n", False),
        ("[submodule.x]\n\tupdate = !evil\n", False),  # the old [section.subsection] spelling
        ("[core]\n\teditor = a \\\n fsmonitor = evil\n", False),  # a value continued: not a key
        ("fsmonitor = x\n", False),  # a key before any section
        ("[core\n", False),  # git cannot parse it: not inert
        ("[CORE]\n\tFsMonitor = x\n", False),  # names are case-insensitive
        ("[core]\r\n\tfsmonitor = x\r\n", False),  # CRLF
        ("[core]\n\tbare = false ; \\\n\tfsmonitor = x\n", False),  # a comment ends a value
        ("[ include ]\n\tpath = x\n", False),  # spacing git accepts
        ("[remote]\n\turl = x\n", False),  # remote.url has no subsection: not remote.*.url
        ("[core]\n\tbare\n", True),  # a key without a value
    ],
)
def test_inert_config(tmp_path, text, inert):
    cfg = tmp_path / "config"
    cfg.write_text(text)
    why = judge_config(str(cfg))
    assert (why is None) is inert, why


def test_config_keys_names_subsections_as_a_wildcard(tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text(FRESH)
    assert [key_pattern(k) for k in config_keys(str(cfg))] == [
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.logallrefupdates",
        "remote.*.url",
        "remote.*.fetch",
        "branch.*.remote",
        "branch.*.merge",
    ]


def test_shadowing(tmp_path):
    mine, later = tmp_path / "mine", tmp_path / "later"
    mine.mkdir()
    later.mkdir()
    (later / "git").write_text("#!/bin/sh\n")
    (later / "git").chmod(0o755)
    pd = PathDir(str(mine), (str(later),), str(mine), True)
    (mine / "git").write_text("#!/bin/sh\n")
    assert shadowed(pd, "git") is None  # not executable: not run instead
    (mine / "git").chmod(0o755)
    assert shadowed(pd, "git") == str(later / "git")
    (mine / "git").unlink()
    (mine / "git").symlink_to(later / "git")
    assert shadowed(pd, "git") is None  # the very program PATH finds anyway
    (mine / "tool").write_text("#!/bin/sh\n")
    (mine / "tool").chmod(0o755)
    assert shadowed(pd, "tool") is None  # nothing later to shadow


def test_include_candidates_resolve_like_codecompanion(tmp_path):
    env = {"HOME": "/h", "X": "/x"}
    rules = str(tmp_path / "docs/CLAUDE.md")
    cwd = str(tmp_path)

    def cands(ref: str) -> list[str]:
        return include_candidates(ref.encode(), rules, [cwd], env, "/h")

    assert "/h/.ssh/id_rsa" in cands("~/.ssh/id_rsa")
    assert "/hfoo/x" in cands("~foo/x")  # vim.fs.normalize: "~" is $HOME, whatever follows
    assert "/x/k" in cands("$X/k")
    assert "/etc/shadow" in cands("/etc/shadow")
    assert f"{cwd}/etc/shadow" in cands("/etc/shadow")  # tried under the working directory first
    assert str(tmp_path / "b") in cands("docs/../b")
    assert f"{cwd}/../b" in cands("a/../../b")  # `..` that leaves a relative path stays
    assert f"{cwd}/$UNSET/k" in cands("$UNSET/k")  # an unset variable stays as written


# -- the guard's comparisons and repairs -----------------------------------------------------------


def test_read_nonblocking_never_waits(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_nonblocking(str(fifo), 100) is None
    leased = tmp_path / "leased"
    leased.write_text("x")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,os,sys,time;fd=os.open(sys.argv[1],os.O_RDONLY);"
            "fcntl.fcntl(fd,1024,fcntl.F_WRLCK);print('held',flush=True);time.sleep(30)",
            str(leased),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert read_nonblocking(str(leased), 100) is None  # EWOULDBLOCK, not a 45 s wait
    finally:
        holder.kill()
        holder.wait()
    link = tmp_path / "link"
    link.symlink_to(leased)
    assert read_nonblocking(str(link), 100) is None
    assert read_nonblocking(str(leased), 0) is None  # longer than the limit
    assert read_nonblocking(str(leased), 100) == b"x"


def test_comparing_a_directory_reads_no_more_than_it_keeps(tmp_path, monkeypatch):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\n")
    trusted = capture(str(hooks))
    for i in range(5000):
        (hooks / f"h{i}").touch()
    seen = 0
    real = os.scandir

    class Counting:
        def __init__(self, path):
            self.it = real(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.it.close()

        def __iter__(self):
            nonlocal seen
            for entry in self.it:
                seen += 1
                yield entry

    monkeypatch.setattr(os, "scandir", Counting)
    assert not matches(str(hooks), trusted)
    assert seen <= 2  # the one entry it had, and one more


def test_restore_is_said_only_when_it_was_checked(tmp_path):
    rep = Repairer(str(tmp_path / "q"))
    f = tmp_path / "config"
    f.write_text("good\n")
    trusted = capture(str(f))
    f.write_text("evil\n")
    ok, done = rep.restore(str(f), trusted, "t")
    assert ok and done.startswith("restored") and f.read_text() == "good\n"
    quarantined = done.split(" is in ")[1]
    assert Path(quarantined).read_text() == "evil\n"  # moved, not deleted
    ok, done = rep.restore(str(f), ("other", 0o010000, 0o644), "t")
    assert not ok and done.startswith("could not be restored")


def test_restore_as_the_owner_of_a_locked_directory(tmp_path):
    d = tmp_path / "hooks"
    d.mkdir()
    trusted = capture(str(d / "pre-commit"))
    (d / "pre-commit").write_text("evil\n")
    d.chmod(0o500)
    ok, done = Repairer(str(tmp_path / "q")).restore(str(d / "pre-commit"), trusted, "t")
    assert ok, done
    assert not (d / "pre-commit").exists() and done.startswith("removed")
    assert (d.stat().st_mode & 0o777) == 0o500  # the directory's mode is left as found


def test_restore_makes_again_the_directories_a_run_moved_away(tmp_path):
    """A kept ``src/.cargo/config.toml`` whose ``src`` a run renamed: it is written back where
    it was, the directories on the way made again."""
    src = tmp_path / "src"
    (src / ".cargo").mkdir(parents=True)
    (src / ".cargo/config.toml").write_text("[build]\n")
    trusted = capture(str(src / ".cargo/config.toml"))
    absent = capture(str(src / "rust-toolchain.toml"))
    src.rename(tmp_path / "app")
    rep = Repairer(str(tmp_path / "q"))
    ok, done = rep.restore(str(src / ".cargo/config.toml"), trusted, "t")
    assert ok and done == "restored", done
    assert (src / ".cargo/config.toml").read_text() == "[build]\n"
    assert (tmp_path / "app/.cargo/config.toml").exists()  # the moved one is not touched here
    # A name that must stay absent makes no directory for itself.
    ok, _done = rep.restore(str(tmp_path / "gone/rust-toolchain.toml"), absent, "t")
    assert not ok and not (tmp_path / "gone").exists()


def test_trusted_realpath_never_follows_links_in_writable_places(tmp_path):
    (tmp_path / "private").mkdir()
    proj = tmp_path / "proj"
    (proj / ".venv").mkdir(parents=True)
    (proj / ".venv/bin").symlink_to(tmp_path / "private")
    assert trusted_realpath(str(proj / ".venv/bin"), [str(proj)]) is None
    assert trusted_realpath(str(proj / ".venv/bin"), []) == str(tmp_path / "private")


def test_rules_problems(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    hr = Discovery().discover(
        str(proj), writable=[str(proj)], env={"HOME": str(tmp_path)}, home=str(tmp_path)
    )
    rules = proj / "CLAUDE.md"
    assert rules_problems(hr, str(rules)) == []  # absent: fine
    rules.write_text("@inside.md\n```\n@app.route\n```\n")
    assert rules_problems(hr, str(rules)) == []
    rules.write_text("@~/.ssh/id_rsa\n")
    assert rules_problems(hr, str(rules))[0][0] == "content"
    rules.unlink()
    os.mkfifo(rules)
    assert rules_problems(hr, str(rules))[0][0] == "type"
    assert capture(str(tmp_path / "missing")) == ABSENT


@pytest.mark.parametrize(
    "raw",
    [
        [],
        {"rules": "CLAUDE.md"},
        {"rules": [{"path": 3}]},
        {"rules": [{"path": "a", "parser": 1}]},
        {"project_config": [1]},
        {"other": []},
    ],
)
def test_codecompanion_files_are_checked_for_type(raw):
    with pytest.raises(UsageError):
        parse_codecompanion(raw)


def test_codecompanion_files_parse():
    rules, names = parse_codecompanion(
        {
            "rules": [{"path": "CLAUDE.md", "parser": "claude"}, {"path": "AGENTS.md"}],
            "project_config": [".codecompanion.lua"],
        }
    )
    assert [(r.path, r.parser) for r in rules] == [("CLAUDE.md", "claude"), ("AGENTS.md", None)]
    assert names == (".codecompanion.lua",)
    assert parse_codecompanion(None) == ((), ())


def test_a_repair_that_fails_refuses_the_next_run_until_put_right(tmp_path):
    """A member the guard cannot write back (here a FIFO, which it does not recreate) stays
    pending: the next run of the project is refused, and starts again once it is put right."""
    from run_bash.errors import SpawnError
    from run_bash.sandbox.guard import Keeper

    proj = tmp_path / "proj"
    proj.mkdir()
    os.mkfifo(proj / ".envrc")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    keeper = Keeper(str(tmp_path / "q"))
    hr = keeper.discovery.discover(str(proj), writable=[str(proj)], env=env, home=str(tmp_path))
    try:
        keeper.prepare("a", hr)
        (proj / ".envrc").unlink()
        (proj / ".envrc").write_text("evil\n")
        notes = keeper.finish("a")
        assert any(".envrc" in n and "could not be restored" in n for n in notes), notes
        assert not (proj / ".envrc").exists()  # what the run wrote was moved away all the same
        with pytest.raises(SpawnError, match="fix it by hand"):
            keeper.prepare("b", hr)
        os.mkfifo(proj / ".envrc")
        keeper.prepare("c", hr)  # put right: runs start again
        assert keeper.finish("c") == []
    finally:
        keeper.shutdown()


def test_a_run_that_makes_the_project_too_large_to_walk_blocks_the_next(tmp_path, monkeypatch):
    """Directories past the walk's limit could hide a planted repository: when a run takes the
    project past it, that is reported and the next run is refused until they are gone."""
    from run_bash.errors import SpawnError
    from run_bash.sandbox.guard import Keeper

    monkeypatch.setattr("run_bash.sandbox.treescan.MAX_SCAN_DIRS", 50)
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    keeper = Keeper(str(tmp_path / "q"))
    try:
        hr = keeper.discovery.discover(str(proj), writable=[str(proj)], env=env, home=str(tmp_path))
        keeper.prepare("a", hr)
        for i in range(60):
            (proj / f"d{i}").mkdir()
        assert any("no longer be checked" in n for n in keeper.finish("a"))
        with pytest.raises(SpawnError, match="remove what it created"):
            keeper.prepare("b", hr)
        for i in range(60):
            (proj / f"d{i}").rmdir()
        keeper.prepare("c", hr)
        assert keeper.finish("c") == []
    finally:
        keeper.shutdown()


# -- this round's building blocks -------------------------------------------------------------------


def test_a_settled_member_is_compared_by_its_signature(tmp_path, monkeypatch):
    """A file captured after it settled is not read again while its stat signature holds; a
    write moves the signature, and a fresh file is always read (two writes in one tick)."""
    from run_bash.sandbox import members

    f = tmp_path / "config"
    f.write_text("[core]\n")
    fresh = capture(str(f))
    assert fresh[5] is None  # just written: read every time
    f.write_text("[xxxx]\n")  # same size, same second
    assert not matches(str(f), fresh)
    monkeypatch.setattr(members, "SETTLED_NS", 0)
    settled = capture(str(f))
    assert settled[5] is not None
    monkeypatch.setattr(members, "read_nonblocking", lambda *a: pytest.fail("read again"))
    assert matches(str(f), settled)
    assert capture(str(f), prev=settled) is settled
    monkeypatch.undo()
    f.write_text("[yyyy]\n")
    assert not matches(str(f), settled)


def test_path_state_judgement(tmp_path):
    from run_bash.sandbox.pathstate import dir_state, judge
    from run_bash.sandbox.places import Places

    mine, later = tmp_path / "mine", tmp_path / "later"
    mine.mkdir()
    later.mkdir()
    for d, name in ((later, "git"), (mine, "tool"), (tmp_path, "target")):
        (d / name).write_text("#!/bin/sh\n")
        (d / name).chmod(0o755)
    (mine / "notes").write_text("#!/bin/sh\n")
    (mine / "link").symlink_to(tmp_path / "target")
    pd = PathDir(str(mine), (str(later),), str(mine), True)
    writable = Places([str(tmp_path)])
    before = dir_state(str(mine))
    assert all(judge(pd, before, n, writable) is None for n in before or {})
    (mine / "new").write_text("#!/bin/sh\n")
    (mine / "new").chmod(0o755)
    assert judge(pd, before, "new", writable) is None  # shadows nothing
    (mine / "git").write_text("#!/bin/sh\n")
    (mine / "git").chmod(0o755)
    assert "instead of" in judge(pd, before, "git", writable).why
    (mine / "notes").chmod(0o755)  # an execute bit added
    assert judge(pd, before, "notes", writable) is not None
    (mine / "tool").write_text("#!/bin/sh\necho changed\n")
    assert judge(pd, before, "tool", writable) is not None
    (tmp_path / "target").write_text("#!/bin/sh\necho changed\n")  # the target's content
    assert judge(pd, before, "link", writable) is not None
    (mine / "link").unlink()
    (mine / "link").symlink_to(later / "git")
    c = judge(pd, before, "link", writable)
    assert c is not None and c.link == str(tmp_path / "target")  # put back as it was


def test_a_worktree_style_git_dir_is_found_and_sealed_dirs_are_not_walked(tmp_path):
    from run_bash.sandbox.treescan import TreeScan, looks_like_git_dir

    assert looks_like_git_dir(["HEAD", "commondir"])
    assert looks_like_git_dir(["HEAD", "objects", "refs"])
    assert not looks_like_git_dir(["HEAD", "objects"])
    wt = tmp_path / "a/wt"
    wt.mkdir(parents=True)
    (wt / "HEAD").write_text("ref: refs/heads/x\n")
    (wt / "commondir").write_text("../../repo.git\n")
    venv = tmp_path / "venv"
    (venv / "src/pkg/.git").mkdir(parents=True)
    found, _ = TreeScan().find(str(tmp_path))
    assert (str(wt), "bare") in found and (str(venv / "src/pkg/.git"), "dotgit") in found
    found, _ = TreeScan().find(str(tmp_path), frozenset({str(venv)}))
    assert (str(wt), "bare") in found and not any(str(venv) in p for p, _k in found)


def test_a_read_only_path_directory_is_looked_at_again_when_a_link_into_a_grant_appears(tmp_path):
    """``read_only_dirs`` keeps "no link leads into a grant" per directory only while nothing it
    read through changed: a link added later, or an alternative re-pointed into the project, is
    found at the next computation (the control: the first answer, before either, is empty)."""
    from run_bash.sandbox.pathguard import read_only_dirs
    from run_bash.sandbox.places import Places

    project, tools, alts = tmp_path / "proj", tmp_path / "bin", tmp_path / "alternatives"
    for d in (project, tools, alts):
        d.mkdir()
    (project / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "system-tool").write_text("#!/bin/sh\n")
    (alts / "alt").symlink_to(tmp_path / "system-tool")
    (tools / "alt").symlink_to(alts / "alt")
    grants = Places([str(project)])
    path = f"{tools}{os.pathsep}{tools}"
    assert read_only_dirs(path, grants) == []  # links lead out of the grant only
    assert read_only_dirs(path, grants) == []  # kept
    (alts / "alt").unlink()
    (alts / "alt").symlink_to(project / "tool")  # an alternative re-pointed into the project
    assert [pd.path for pd in read_only_dirs(path, grants)] == [str(tools)]
    (alts / "alt").unlink()
    (alts / "alt").symlink_to(tmp_path / "system-tool")
    assert read_only_dirs(path, grants) == []
    (tools / "new").symlink_to(project / "tool")  # a new link in the PATH directory itself
    assert [pd.path for pd in read_only_dirs(path, grants)] == [str(tools)]


def test_a_hooks_directory_that_cannot_be_listed_holds_hooks(tmp_path, monkeypatch):
    """git runs a hook with only the search bit on its directory: one the guard cannot list is
    not "no hooks" (fail closed); one that is not there holds none, one with samples only none
    (the controls)."""
    from run_bash.sandbox import hostread

    hooks = tmp_path / "hooks"
    assert hostread.active_hooks(str(hooks)) == []
    hooks.mkdir()
    (hooks / "pre-commit.sample").write_text("#!/bin/sh\n")
    assert hostread.active_hooks(str(hooks)) == []

    def refused(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(hostread.os, "scandir", refused)
    assert hostread.active_hooks(str(hooks)) != []
