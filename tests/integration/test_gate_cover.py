"""What the approval gate lets run without asking because undo covers it, through the host in a
real headless Neovim under a confining backend: a ``..`` after a symlink, a line that can make
a name for existing data before a reason acts on it, a write in place of a file with another
name, and ``git clean -ffd`` over a nested repository all ask; with the user's word they run.
Each has its control: ``rm -rf build`` in the same project still runs without asking."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.integration.test_approval import floats
from tests.integration.test_undo import first_available

pytestmark = pytest.mark.nvim

GIT_ENV = {
    "GIT_AUTHOR_NAME": "a",
    "GIT_AUTHOR_EMAIL": "a@b",
    "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@b",
}


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def project(editor) -> Path:
    """A repository with a commit and a small ignored build/, its undo index built."""
    backend = first_available()
    if backend == "none":
        pytest.skip("no confining backend here")
    editor.lua("require('run_bash').setup(...)", {"sandbox": {"backend": backend}})
    p = editor.work / "proj"
    (p / "build").mkdir(parents=True)
    (p / "build" / "a.o").write_bytes(b"object\n")
    (p / ".gitignore").write_text("build/\n")
    (p / "src.txt").write_text("source\n")
    git("init", "-q", "-b", "main", ".", cwd=p)
    git("add", "-A", cwd=p)
    git("commit", "-qm", "init", cwd=p)
    return p


def index(editor, p: Path) -> None:
    editor.run_sync({"cmd": "true", "cwd": str(p)})


def check(editor, cmd: str, p: Path) -> dict:
    return editor.lua("return require('run_bash').check(...)", cmd, {"cwd": str(p)})


def runs_without_asking_and_undoes(editor, p: Path) -> None:
    """The control: ``rm -rf build`` goes without asking, and undo brings build/ back."""
    a = check(editor, "rm -rf build", p)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    r = editor.run_sync({"cmd": "rm -rf build", "cwd": str(p)})
    assert any("ran without asking" in n for n in r["notices"]) and not (p / "build").exists()
    done = editor.lua("local d, e = require('run_bash').undo(...); return d or e", r["id"])
    assert "build/a.o" in done["restored"], done
    assert (p / "build" / "a.o").read_bytes() == b"object\n"


def asks_then_runs_on_accept(
    editor, cmd: str, p: Path, expect: str = "undo cannot take it all back"
) -> dict:
    """Run ``cmd`` as the agent would: the approval window opens (saying ``expect``); accepted,
    it runs."""
    editor.lua(
        "_G.__res = nil; require('run_bash').run({ cmd = ..., cwd = select(2, ...) }, "
        "function(r) _G.__res = r end)",
        cmd,
        str(p),
    )
    text = wait_for(lambda: floats(editor))[0]
    assert expect in text, text
    editor.nvim.input("a")
    res = wait_for(lambda: editor.lua("return _G.__res"), timeout=60)
    assert not any("ran without asking" in n for n in res.get("notices") or []), res
    return res


def test_a_dotdot_after_a_symlink_asks_and_runs_when_accepted(editor):
    p = project(editor)
    os.symlink(".git/objects", p / "lnk")  # made by an earlier run: `ln -s` alone does not pause
    index(editor, p)
    a = check(editor, "rm -rf lnk/../refs", p)
    # The kernel climbs from where lnk leads: this deletes .git/refs, which undo never restores.
    assert a["needs_approval"] is True and a["effect"] == "irreversible", a
    assert any(
        "writes into git's own data" in h["reason"] and "through the symlink lnk" in h["reason"]
        for h in a["hits"]
    ), a
    res = asks_then_runs_on_accept(editor, "rm -rf lnk/../refs", p, "writes into git's own data")
    assert res["exit_code"] == 0 and not (p / ".git" / "refs").exists()
    (p / "lnk").unlink()
    git("init", "-q", cwd=p)  # the repository's refs back, for the control's `.git` reading
    runs_without_asking_and_undoes(editor, p)


@pytest.mark.parametrize(
    "line",
    [
        "cp -s .git/HEAD x; truncate -s0 x",
        "cp -l .git/HEAD x; truncate -s0 x",
        "cp -al .git x; truncate -s0 x/HEAD",
        'python3 -c \'import os; os.symlink(".git", "x")\'; rm -rf x/*',
        "install -d x && rm -rf x",
        "make -q; rm -rf build",
    ],
)
def test_a_line_that_may_make_a_name_for_existing_data_first_asks(editor, line):
    """Any command not known to make no such name (a symlink, a hard link, code of its own)
    counts as one: in a repository, whose ``.git`` undo never keeps, the line asks."""
    p = project(editor)
    index(editor, p)
    a = check(editor, line, p)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert ".git" in a["undo_why"], a
    for control in ("mkdir -p out && rm -rf build", "cd build && rm -rf ../build"):
        c = check(editor, control, p)
        assert c["needs_approval"] is False and c["undoable"] is True, (control, c)
    runs_without_asking_and_undoes(editor, p)


def test_a_write_in_place_of_a_file_hard_linked_outside_asks(editor):
    p = project(editor)
    outside = editor.work / "outside-notes.txt"
    outside.write_bytes(b"precious notes kept outside the project\n")
    os.link(outside, p / "notes.txt")
    (p / "alone.txt").write_text("one name\n")
    index(editor, p)
    a = check(editor, "truncate -s 0 notes.txt", p)
    assert a["needs_approval"] is True, a
    assert "notes.txt has more than one name" in a["undo_why"], a
    assert check(editor, "shred notes.txt", p)["needs_approval"] is True
    # Controls: a file with one name, and deleting the linked one (the other name keeps it).
    for control in ("truncate -s 0 alone.txt", "rm -rf notes.txt"):
        c = check(editor, control, p)
        assert c["needs_approval"] is False and c["undoable"] is True, (control, c)
    r = editor.run_sync({"cmd": "truncate -s 0 alone.txt", "cwd": str(p)})
    assert any("ran without asking" in n for n in r["notices"])
    editor.lua("local d, e = require('run_bash').undo(...); return d or e", r["id"])
    assert (p / "alone.txt").read_text() == "one name\n"
    assert outside.read_bytes() == b"precious notes kept outside the project\n"
    runs_without_asking_and_undoes(editor, p)


def test_git_clean_over_a_nested_repository_asks_and_runs_when_accepted(editor):
    p = project(editor)
    lib = p / "vendor" / "lib"
    lib.mkdir(parents=True)
    (lib / "lib.c").write_text("int x;\n")
    git("init", "-q", "-b", "main", ".", cwd=lib)
    git("add", "-A", cwd=lib)
    git("commit", "-qm", "local history", cwd=lib)
    index(editor, p)
    a = check(editor, "git clean -ffd", p)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert "vendor/lib/.git is repository data" in a["undo_why"], a
    res = asks_then_runs_on_accept(editor, "git clean -ffd", p)
    # It ran: the nested repository's work and history are gone (what the sandbox keeps
    # read-only in a repository, its config and hooks, stays).
    assert res["exit_code"] is not None and not (lib / "lib.c").exists(), res
    assert not (lib / ".git" / "HEAD").exists() and not (lib / ".git" / "objects").exists()
    # The control: with no nested repository left, git's own effect runs without asking.
    shutil.rmtree(p / "vendor")
    (p / "junk.txt").write_text("untracked\n")
    index(editor, p)
    c = check(editor, "git clean -ffd", p)
    assert c["needs_approval"] is False and c["undoable"] is True, c
    r = editor.run_sync({"cmd": "git clean -ffd", "cwd": str(p)})
    assert any("ran without asking" in n for n in r["notices"]) and not (p / "junk.txt").exists()
    editor.lua("local d, e = require('run_bash').undo(...); return d or e", r["id"])
    assert (p / "junk.txt").read_text() == "untracked\n"
    runs_without_asking_and_undoes(editor, p)


def test_git_reasons_run_beside_an_ignored_tree_git_does_not_track(editor):
    """git's own effects (reset, checkout, restore, clean without -x) never touch an ignored file
    git does not track: an ignored tree beyond undo's budget beside them is no reason to ask, as
    git itself says (`ls-files`). The controls: with `rm -rf node_modules` in the same line, and
    once git tracks a file in there, the same reason asks."""
    backend = first_available()
    if backend == "none":
        pytest.skip("no confining backend here")
    editor.lua(
        "require('run_bash').setup(...)",
        {"sandbox": {"backend": backend}, "undo": {"ignored_total": "8K"}},
    )
    p = editor.work / "nodeproj"
    (p / "node_modules" / "pkg").mkdir(parents=True)
    for i in range(4):
        (p / "node_modules" / "pkg" / f"f{i}.js").write_bytes(b"x" * 4096)
    (p / ".gitignore").write_text("node_modules/\n")
    (p / "src.txt").write_text("source\n")
    git("init", "-q", "-b", "main", ".", cwd=p)
    git("add", "-A", cwd=p)
    git("commit", "-qm", "init", cwd=p)
    index(editor, p)
    (p / "src.txt").write_text("changed\n")
    a = check(editor, "git checkout -- .", p)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    b = check(editor, "git checkout -- . && rm -rf node_modules", p)
    assert b["needs_approval"] is True and b["undo_why"], b
    r = editor.run_sync({"cmd": "git checkout -- .", "cwd": str(p)})
    assert any("ran without asking" in n for n in r["notices"]), r
    assert (p / "src.txt").read_text() == "source\n"
    done = editor.lua("local d, e = require('run_bash').undo(...); return d or e", r["id"])
    assert "src.txt" in done["restored"], done
    assert (p / "src.txt").read_text() == "changed\n"
    git("add", "-f", "node_modules/pkg/f0.js", cwd=p)
    git("commit", "-qm", "vendored", cwd=p)
    index(editor, p)
    c = check(editor, "git checkout -- .", p)
    assert c["needs_approval"] is True and "node_modules" in c["undo_why"], c
