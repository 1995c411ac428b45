"""The guard's path look-ups made once per watching (``guardscope.realpath_once``,
``guardscope.is_dir_once``) answer what ``os.path.realpath`` and ``os.path.isdir`` answer, on a tree with every kind of name on the
way: links to directories, to files, dangling and relative links, files used as directories, and
names that do not exist."""

from __future__ import annotations

import os

import pytest

from run_bash.sandbox.guardscope import is_dir_once as _is_dir
from run_bash.sandbox.guardscope import realpath_once as _realpath


@pytest.fixture
def tree(tmp_path):
    t = tmp_path
    (t / "a" / "b").mkdir(parents=True)
    (t / "a" / "f").write_text("x")
    os.symlink(t / "a", t / "L")
    os.symlink("/nonexistent-run-bash/x", t / "a" / "dangling")
    os.symlink("b/../../a", t / "a" / "rel")
    os.symlink("f", t / "a" / "to_file")
    os.symlink("loop2", t / "loop1")
    os.symlink("loop1", t / "loop2")
    return str(t)


PATHS = [
    "",
    "/L/b/x/y",
    "/L/b",
    "/L/f",
    "/L/f/q",
    "/a/dangling",
    "/a/dangling/q/r",
    "/a/rel/b/z",
    "/a/rel/zz/y",
    "/a/to_file/q",
    "/L/missing",
    "/missing/deeper/still",
    "/loop1/x",
    "/a/b/./c/../d",
    "/L/../x",
    "/a/rel/../b",
    "//L/b/",
]


def test_realpath_answers_as_os_path_realpath(tree):
    reals: dict[str, str | None] = {}
    for p in PATHS:
        path = tree + p
        assert _realpath(path, reals) == os.path.realpath(path), p
    # The same answers from the memo, asked again in another order.
    for p in reversed(PATHS):
        path = tree + p
        assert _realpath(path, reals) == os.path.realpath(path), p
    assert _realpath("/", {}) == "/"
    assert _realpath("relative/x", {}) == os.path.realpath("relative/x")


def test_is_dir_answers_as_os_path_isdir_once(tree):
    seen: dict[str, bool] = {}
    for p in PATHS:
        path = tree + p
        assert _is_dir(path, seen) == os.path.isdir(path), p
    # Asked once: a directory made afterwards is not seen by the same watching...
    made = os.path.join(tree, "later")
    assert _is_dir(made, seen) is False
    os.mkdir(made)
    assert _is_dir(made, seen) is False
    # ...and is by the next one (control).
    assert _is_dir(made, {}) is True
