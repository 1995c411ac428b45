"""A write into git's own data by a command other than git asks (undo never writes into
``.git``), also when the line names it through a symlink of the project that leads there
(``src/proj -> ../.git``, made by the user; one a run leaves is moved away after it): the pause list reads text, so the gate asks
the project's state which paths the line's writers change lead into a ``.git``. Through the
host's service on each confining backend; controls: the same writers through a symlink to a
directory of the project run without asking, and undo takes them back byte-exact."""

from __future__ import annotations

import pytest

from tests.security.conftest import Host, tree

THROUGH = [
    "rm src/proj/refs/heads/main",
    "rm -f src/proj/index",
    "echo x > src/proj/HEAD",
    "mv src/proj/refs/heads/main main.bak",
    "cp /dev/null src/proj/index",
    "sed -i s/main/x/ src/proj/HEAD",
    "cd src && rm proj/index",
    "cd src/proj && echo x > HEAD",
    "rm src/deeper/HEAD",
]


def _project(h: Host, settle: bool = True) -> None:
    (h.p / "docs").mkdir()
    (h.p / "docs" / "notes.txt").write_text("notes\n")
    (h.p / "src").mkdir()
    # The user's links: one a run leaves that leads into a .git is moved away after it.
    (h.p / "src" / "proj").symlink_to("../.git")
    (h.p / "src" / "deeper").symlink_to("proj")
    (h.p / "src" / "lnk").symlink_to("../docs")
    if settle:
        r = h.run("true")  # undo's index of the project now holds them
        assert r["exit_code"] == 0 and not r.get("notices"), r


@pytest.mark.parametrize("line", THROUGH)
def test_a_write_through_a_symlink_into_git_data_asks(host, line):
    _project(host)
    git_before = tree(host.p / ".git")
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "irreversible", a
    assert "writes into git's own data" in a["reason"] and "through the symlink" in a["reason"]
    r = host.run(line)
    assert r.get("status") == "awaiting_approval", r
    assert tree(host.p / ".git") == git_before


@pytest.mark.parametrize("line", ["rm src/lnk/notes.txt", "echo x > src/lnk/notes.txt"])
def test_the_same_writers_through_a_symlink_to_the_project_run_and_undo(host, line):
    _project(host)
    a = host.check(line)
    assert a["needs_approval"] is False, a
    before = tree(host.p)
    r = host.run(line)
    assert r["exit_code"] == 0 and r["changes"]["paths"], r
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before


@pytest.mark.parametrize("line", ["echo x > src/proj/HEAD", "cd src && rm proj/index"])
def test_a_link_made_since_the_last_run_is_seen(host, line):
    """The gate asks the file system, not undo's index of the last run: links the user made
    since then lead there too."""
    _project(host, settle=False)
    git_before = tree(host.p / ".git")
    a = host.check(line)
    assert a["needs_approval"] is True and "through the symlink src/proj" in a["reason"], a
    r = host.run(line)
    assert r.get("status") == "awaiting_approval", r
    assert tree(host.p / ".git") == git_before
    control = host.run("echo x > src/lnk/notes.txt")  # through a link to the project's own
    assert control["exit_code"] == 0, control
