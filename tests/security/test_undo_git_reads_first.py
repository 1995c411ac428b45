"""git's own effects (``clean`` without ``-x``, ``reset --hard``) never touch an ignored file git
does not track, and the gate asks git which those are before the line runs: an ignored tree
beyond undo's budget is then no reason to ask. That answer holds only for a git that reads what
the gate asked about. A line that first changes it (writes ``.gitignore`` through a redirection,
runs another git command, sets a variable git reads, gives git an option before its subcommand,
or clears its environment with ``env``) makes git delete ignored content undo never kept: such a
line asks. Through the host's service on each confining backend.

Each case has its control: the same line, accepted, does delete the ignored content (the loss the
question is about is real), and the plain ``git clean -fd`` in the same project still runs
without asking, leaves the ignored content alone, and is taken back byte-exact by undo."""

from __future__ import annotations

import subprocess

import pytest

from tests.security.conftest import Host, tree

HOST_CONFIG = {"undo": {"ignored_total": 1000}}
DATA = b"kept nowhere else\n" * 300  # over undo.ignored_total: not kept
# Each line deletes big/data (ignored by .gitignore, over undo's budget).
CHANGE_WHAT_GIT_READS = [
    "echo '!big/' >> .gitignore; git clean -fd",
    ": > .gitignore; git clean -fdq",
    "exec 3>>.gitignore; echo '!big/' >&3; git clean -fd",
    "echo > .gitignore; cd . && git clean -fd",
    "git rm -q .gitignore && git clean -fd",
    "git mv .gitignore gi && git clean -fd",
    "git checkout -q HEAD~1 && git clean -fd",
    "git add -f big && git reset -q --hard",
    "GIT_INDEX_FILE=.idx git reset -q --hard",
    "export GIT_INDEX_FILE=.idx; git reset -q --hard",
    "env GIT_INDEX_FILE=.idx git reset -q --hard",
    "for GIT_INDEX_FILE in .idx; do export GIT_INDEX_FILE; git reset -q --hard; done",
]
# Each line deletes cache/data, ignored by the user's own ignore file ($XDG_CONFIG_HOME/git/ignore).
CHANGE_WHICH_FILES_GIT_READS = [
    "git -c core.excludesFile=/dev/null clean -fd",
    "git --no-pager -c core.excludesFile=/dev/null clean -fd",
    "XDG_CONFIG_HOME=/nonexistent git clean -fd",
    "HOME=/nonexistent XDG_CONFIG_HOME=/nonexistent git clean -fd",
    "env -u XDG_CONFIG_HOME -u HOME git clean -fd",
    'env -i PATH="$PATH" git clean -fd',
]


def _git(h: Host, *args: str, **env: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=h.p,
        env={**h.world.env, "GIT_CONFIG_NOSYSTEM": "1", **env},
        check=True,
        capture_output=True,
    )


def _project(h: Host) -> None:
    """A commit without .gitignore, then one with ``big/`` in it; big/data ignored and beyond
    undo's budget; ``.idx`` an index (as an earlier run could make) in which git tracks it."""
    (h.p / "src.txt").write_text("source\n")
    _git(h, "add", "src.txt")
    _git(h, "commit", "-qm", "src")
    (h.p / ".gitignore").write_text("big/\n")
    _git(h, "add", ".gitignore")
    _git(h, "commit", "-qm", "ignore")
    (h.p / "big").mkdir()
    (h.p / "big" / "data").write_bytes(DATA)
    _git(h, "read-tree", "HEAD", GIT_INDEX_FILE=str(h.p / ".git" / "alt"))
    _git(h, "add", "-f", "big/data", GIT_INDEX_FILE=str(h.p / ".git" / "alt"))
    (h.p / ".idx").write_bytes((h.p / ".git" / "alt").read_bytes())
    (h.p / "scratch.txt").write_text("untracked\n")
    h.run("true")


def _accepted(h: Host, cmd: str) -> dict:
    started = h.svc.run({"cmd": cmd, "cwd": str(h.p)})
    assert started.get("status") == "awaiting_approval", started
    h.svc.decide(started["id"], "accept", None)
    h.drive(lambda: h.event("result", "id", started["id"]) is not None)
    return h.event("result", "id", started["id"]) or {}


@pytest.mark.parametrize("line", CHANGE_WHAT_GIT_READS)
def test_a_line_that_changes_what_git_reads_before_git_acts_asks(host, line):
    _project(host)
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert a["undoable"] is False and a["undo_why"], a
    # The control: accepted, the line deletes what undo does not keep.
    done = _accepted(host, line)
    assert done.get("exit_code") == 0, done
    assert not (host.p / "big" / "data").exists(), line


@pytest.mark.parametrize("line", CHANGE_WHICH_FILES_GIT_READS)
def test_a_line_that_changes_which_ignore_files_git_reads_asks(host, line):
    _project(host)
    user_ignore = host.world.home / ".config" / "git" / "ignore"
    user_ignore.parent.mkdir(parents=True, exist_ok=True)
    user_ignore.write_text("cache/\n")
    (host.p / "cache").mkdir()
    (host.p / "cache" / "data").write_bytes(DATA)
    host.run("true")
    plain = host.check("git clean -fd")
    assert plain["needs_approval"] is False and plain["undoable"] is True, plain
    a = host.check(line)
    assert a["needs_approval"] is True and a["undoable"] is False and a["undo_why"], a
    done = _accepted(host, line)  # the control: accepted, it deletes what undo does not keep
    assert done.get("exit_code") == 0, done
    assert not (host.p / "cache" / "data").exists(), line


def test_the_plain_reason_still_runs_without_asking_and_is_undone(host):
    _project(host)
    for line in ("git clean -fd", "cd . && git -C . clean -fd", "git reset -q --hard"):
        a = host.check(line)
        assert a["needs_approval"] is False and a["undoable"] is True, (line, a)
    before = tree(host.p)
    r = host.run("git clean -fd")
    assert any("ran without asking" in n for n in r["notices"]), r
    assert not (host.p / "scratch.txt").exists()
    assert (host.p / "big" / "data").read_bytes() == DATA
    done = host.undo(r["id"])
    assert not done["errors"], done
    after = tree(host.p)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert {k for k in changed if not k.startswith(".git/")} == set(), changed
