"""Git's reasons that also write the index (``git reset --hard``, ``git checkout REV -- .``,
``git restore --staged --worktree``) throw away what is staged, and undo gives back only the
working tree: a version staged with ``git add`` and edited again after (``git add -p``), or
staged and then deleted from the file, was in no file, no commit, nowhere undo reads. These lines
ran without asking and that version was gone. They ask now while the index holds content neither
``HEAD`` nor the files have, as git itself says. Through the host's service on each confining
backend; controls: the same lines when what is staged is also in the file run without asking
and undo takes the files back byte-exact, and lines that read the index without writing it
(``git checkout -- .``, ``git restore .``) run without asking over the same staged version,
which stays in the index."""

from __future__ import annotations

import subprocess

import pytest

from tests.security.conftest import Host, tree

WRITE_INDEX = ["git reset --hard", "git checkout HEAD -- .", "git restore -SW ."]
READ_INDEX = ["git checkout -- .", "git restore ."]


def _git(h: Host, *args: str) -> str:
    env = {**h.world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    got = subprocess.run(["git", *args], cwd=h.p, env=env, check=True, capture_output=True)
    return got.stdout.decode()


def _files(h: Host) -> dict[str, tuple[str, ...]]:
    """The working tree as ``tree`` gives it, without the repository's data."""
    return {k: v for k, v in tree(h.p).items() if not k.startswith(".git/")}


def _project(h: Host, edited_after: bool) -> None:
    """``app.py`` committed as ``v1``, ``staged`` added to the index; then, when
    ``edited_after``, the file edited again (the staged version is then only in the index)."""
    (h.p / "app.py").write_text("v1\n")
    _git(h, "add", "app.py")
    _git(h, "commit", "-qm", "one")
    (h.p / "app.py").write_text("staged\n")
    _git(h, "add", "app.py")
    if edited_after:
        (h.p / "app.py").write_text("edited after\n")
    h.run("true")


@pytest.mark.parametrize("line", WRITE_INDEX)
def test_a_staged_version_only_the_index_has_asks(host, line):
    _project(host, edited_after=True)
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert "the index holds staged content the files no longer have (app.py)" in a["undo_why"]
    r = host.run(line)  # checked again on the run's own snapshot: held for the user
    assert r.get("status") == "awaiting_approval", r
    assert _git(host, "show", ":app.py") == "staged\n"


@pytest.mark.parametrize("line", WRITE_INDEX)
def test_what_is_staged_is_also_in_the_file_runs_and_undo_gives_it_back(host, line):
    _project(host, edited_after=False)
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = _files(host)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert (host.p / "app.py").read_text() == "v1\n"
    done = host.undo(r["id"])
    assert not done["errors"], done
    assert _files(host) == before


@pytest.mark.parametrize("line", READ_INDEX)
def test_lines_that_only_read_the_index_run_and_keep_it(host, line):
    _project(host, edited_after=True)
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = _files(host)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert (host.p / "app.py").read_text() == "staged\n"
    assert _git(host, "show", ":app.py") == "staged\n"
    done = host.undo(r["id"])
    assert not done["errors"], done
    assert _files(host) == before
