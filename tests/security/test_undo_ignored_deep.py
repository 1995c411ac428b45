"""An ignored directory beyond the budget is not entered, and undo keeps nothing of it; a run
that changes it must still name it ("not tracked: nm/ (ignored, …)"), also when the change is
deep in it and the directory's own ``lstat`` stays the same (``rm nm/pkg/f``, a write to
``nm/pkg/f``, a file new in ``nm/pkg`` or in a directory made there after the index). Through
the host's service on each confining backend; controls: a run that changes nothing there, or
only covered files, does not name it, and undo of the covered part is byte-exact."""

from __future__ import annotations

import pytest

from tests.security.conftest import Host, tree

DEEP = [
    "rm nm/pkg/f",
    "echo x > nm/pkg/f",
    "echo new > nm/pkg/g",
    "mkdir nm/pkg/sub && echo x > nm/pkg/sub/y",
    "mv nm/pkg/f src/f",
]
CONFIG = {"undo": {"ignored_total": 1000}}


HOST_CONFIG = CONFIG


def _project(h: Host) -> None:
    (h.p / ".gitignore").write_text("nm/\n")
    (h.p / "nm" / "pkg" / "deeper").mkdir(parents=True)
    (h.p / "nm" / "pkg" / "f").write_bytes(b"N" * 1500)  # over the budget: not entered
    (h.p / "src").mkdir()
    (h.p / "src" / "a.txt").write_text("a\n")
    h.run("true")


@pytest.mark.parametrize("line", DEEP)
def test_a_change_deep_in_an_ignored_tree_not_entered_is_named(host, line):
    _project(host)
    r = host.run(line)
    assert "not tracked: nm/ (ignored" in r["changes"]["summary"], r["changes"]


def test_in_a_directory_made_in_the_tree_after_the_index(host):
    _project(host)
    (host.p / "nm" / "pkg" / "later").mkdir()  # by someone else, between runs
    host.run("true")
    r = host.run("echo x > nm/pkg/later/z")
    assert "not tracked: nm/ (ignored" in r["changes"]["summary"], r["changes"]


@pytest.mark.parametrize("line", ["true", "cat nm/pkg/f > /dev/null", "rm -rf src"])
def test_a_run_that_leaves_the_tree_alone_does_not_name_it(host, line):
    _project(host)
    before = tree(host.p)
    r = host.run(line)
    assert "nm/" not in (r.get("changes") or {}).get("summary", ""), r["changes"]
    if line == "rm -rf src":
        done = host.undo(r["id"])
        assert not done["errors"] and not done["not_recovered"], done
        assert tree(host.p) == before
