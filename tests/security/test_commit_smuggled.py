"""A commit a run leaves on a ref can hold what no run may write in the work tree: a file the
sandbox keeps (``.envrc``) or a symbolic link out of it, staged through the index only and
committed (``git commit``, ``git commit-tree`` with ``git update-ref``) or stashed. The user's next
``git reset --hard``, ``git checkout feature`` or ``git stash pop`` would write it. After the run
every ref (or stash entry) that leads to such a commit is put back. Through ``SessionManager``
under every confining backend. Each case has its control: with the check off, the user's own git
writes the file; an ordinary commit of the run, the agent's ``git commit -am`` over the user's own
edited kept file, and a commit the user makes between two runs all stay."""

from __future__ import annotations

import os
import subprocess

import pytest

from run_bash.errors import SpawnError
from run_bash.sandbox import reftips
from run_bash.sandbox.gitask import HostReadError
from run_bash.sandbox.refsguard import RefsGuard
from tests.security.conftest import CONTROL, SECRET, on_host
from tests.security.test_index_smuggled import stage

GIT = "git -c user.name=a -c user.email=a@x"
ENVRC = "echo pwned > /tmp/pwned"


def tip(world, ref: str = "HEAD") -> str:
    return on_host(world, ["git", "rev-parse", "-q", "--verify", ref]).strip()


@pytest.fixture
def unchecked(monkeypatch):
    """The check off: what the user's git does with what the run left."""
    monkeypatch.setattr(RefsGuard, "_check_refs", lambda *a: None)


def commit_envrc() -> str:
    return f"{stage(ENVRC, '.envrc')} && {GIT} commit -qm tidy && echo {CONTROL}"


def test_a_committed_kept_file_is_taken_back(sbx, world):
    before = tip(world)
    r = sbx.run(commit_envrc())
    assert CONTROL in r.output, r.output
    assert tip(world) == before, r.notices
    assert any(".envrc" in n and "refs/heads/main was moved back" in n for n in r.notices), (
        r.notices
    )
    assert ".envrc" not in on_host(world, ["git", "ls-files"]).split()  # the index too
    on_host(world, ["git", "reset", "--hard"])
    on_host(world, ["git", "restore", "."])
    assert not (world.project / ".envrc").exists()


def test_a_committed_kept_file_is_written_without_the_check(sbx, world, unchecked):
    r = sbx.run(commit_envrc())
    assert CONTROL in r.output, r.output
    assert not (world.project / ".envrc").exists()
    on_host(world, ["git", "reset", "--hard"])
    assert (world.project / ".envrc").read_text() == ENVRC  # what direnv would run


def branch_of_link(key: str) -> str:
    """A branch made with commit-tree and update-ref, the index put back after."""
    return (
        f"{stage(key, 'CLAUDE.md', '120000')} && {stage(ENVRC, 'web/.envrc')} && "
        f"t=$(git write-tree) && c=$({GIT} commit-tree $t -p HEAD -m x) && "
        f"git update-ref refs/heads/feature $c && git reset -q && echo {CONTROL}"
    )


def test_a_branch_made_with_commit_tree_is_deleted(sbx, world):
    r = sbx.run(branch_of_link(str(world.path(".ssh/id_rsa"))))
    assert CONTROL in r.output, r.output
    assert tip(world, "refs/heads/feature") == "", r.notices
    assert any("refs/heads/feature, which the run made, was deleted" in n for n in r.notices), (
        r.notices
    )
    on_host(world, ["git", "checkout", "-q", "feature"])
    assert not os.path.lexists(world.project / "CLAUDE.md")
    assert not (world.project / "web/.envrc").exists()


def test_a_branch_made_with_commit_tree_is_checked_out_without_the_check(sbx, world, unchecked):
    r = sbx.run(branch_of_link(str(world.path(".ssh/id_rsa"))))
    assert CONTROL in r.output, r.output
    on_host(world, ["git", "checkout", "-q", "feature"])
    assert (world.project / "web/.envrc").read_text() == ENVRC
    assert SECRET in (world.project / "CLAUDE.md").read_text()


def stash_envrc() -> str:
    return f"{stage(ENVRC, '.envrc')} && {GIT} stash -q && echo {CONTROL}"


def test_a_stashed_kept_file_is_dropped(sbx, world):
    r = sbx.run(stash_envrc())
    assert CONTROL in r.output, r.output
    assert on_host(world, ["git", "stash", "list"]).strip() == "", r.notices
    assert any("stash@{0} was dropped" in n and ".envrc" in n for n in r.notices), r.notices
    on_host(world, ["git", "stash", "pop"])
    assert not (world.project / ".envrc").exists()


def test_a_stashed_kept_file_is_popped_without_the_check(sbx, world, unchecked):
    r = sbx.run(stash_envrc())
    assert CONTROL in r.output, r.output
    on_host(world, ["git", "stash", "pop"])
    assert (world.project / ".envrc").read_text() == ENVRC


def test_an_ordinary_commit_and_stash_stay(sbx, world):
    r = sbx.run(
        f"echo x > notes.txt && git add notes.txt && {GIT} commit -qm notes && "
        f"echo y > other.txt && git add other.txt && {GIT} stash -q && "
        f"git branch side && echo {CONTROL}"
    )
    assert CONTROL in r.output, r.output
    assert not r.notices, r.notices
    assert "notes" in on_host(world, ["git", "log", "-1", "--format=%s"])
    assert tip(world, "refs/heads/side") == tip(world)
    assert "stash@{0}" in on_host(world, ["git", "stash", "list"])


def test_the_users_own_kept_file_committed_by_the_run_stays(sbx, world):
    (world.project / ".envrc").write_text("export A=1\n")
    on_host(world, ["git", "add", ".envrc"])
    on_host(world, ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "env"])
    (world.project / ".envrc").write_text("export A=2\n")  # the user's edit, not committed
    r = sbx.run(f"echo more >> README && {GIT} commit -qam wip && echo {CONTROL}")
    assert CONTROL in r.output, r.output
    assert not r.notices, r.notices
    assert "wip" in on_host(world, ["git", "log", "-1", "--format=%s"])
    assert "export A=2" in on_host(world, ["git", "show", "HEAD:.envrc"])


def test_a_commit_the_user_makes_between_runs_stays(sbx, world):
    r = sbx.run("true")
    assert not r.notices, r.notices
    # The user commits a kept file outside any run, then edits it: the commit is theirs.
    (world.project / ".envrc").write_text("export A=1\n")
    on_host(world, ["git", "add", ".envrc"])
    on_host(world, ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "env"])
    (world.project / ".envrc").write_text("export A=2\n")
    mine = tip(world)
    r = sbx.run(f"git branch side && echo {CONTROL}")  # the run moves refs: they are judged
    assert CONTROL in r.output, r.output
    assert not r.notices, r.notices
    assert tip(world) == mine and tip(world, "refs/heads/side") == mine


def branch_without_index() -> str:
    """A branch of a tree made with mktree: neither the index nor the work tree is written."""
    return (
        f"b=$(printf %s '{ENVRC}' | git hash-object -w --stdin) && "
        "t=$(printf '100644 blob %s\\t.envrc\\n' $b | git mktree) && "
        f"c=$({GIT} commit-tree $t -p HEAD -m x) && git update-ref refs/heads/feature $c && "
        f"echo {CONTROL}"
    )


@pytest.mark.parametrize("how", ["commit", "branch"])
def test_a_commit_made_in_the_background_is_judged_while_it_runs(sbx, world, how):
    before = tip(world)
    attack = commit_envrc() if how == "commit" else branch_without_index()
    r, out = sbx.in_background("echo x > n.txt && git add n.txt", "added", attack)
    # Stopped while it ran: at the commit, or already at the staging before it (a look at the
    # index may come first; the commit then never runs).
    assert "survived" not in out, out
    # No ref leads to a commit that holds it. (When the look at the index took the staged
    # .envrc back before `git commit` ran, the commit holds n.txt alone, and stays.)
    refs = on_host(world, ["git", "for-each-ref", "--format=%(refname)"]).split()
    held = [ref for ref in refs if ".envrc" in on_host(world, ["git", "ls-tree", "-r", ref])]
    assert not held and tip(world, "refs/heads/feature") == "", (r.notices, held)
    assert tip(world) == before or ".envrc" not in on_host(world, ["git", "show", "--stat", "HEAD"])
    assert [n for n in r.notices if ".envrc" in n and "background" in n], r.notices
    assert "n.txt" in on_host(world, ["git", "ls-files"])  # the control: its own git add stays


def test_refs_git_cannot_list_are_never_taken_for_none(sbx, world, monkeypatch):
    """Refs that are there but that git cannot list before a run (a timeout, a lease, a broken
    configuration) are never taken for none: every one would then look made by the run and be
    put back, the user's branches deleted. The run does not start, and every branch stays."""
    on_host(world, ["git", "branch", "keep"])
    first = sbx.run(f"echo {CONTROL}")  # the control: it runs, and the refs are known
    assert CONTROL in first.output, (first.error, first.output)
    (world.project / "more.txt").write_text("more\n")
    on_host(world, ["git", "add", "more.txt"])
    on_host(world, [*GIT.split(), "commit", "-qm", "more"])  # the refs change
    main, keep = tip(world, "refs/heads/main"), tip(world, "refs/heads/keep")

    def cannot(*_a: object, **_k: object) -> None:
        raise HostReadError("git did not answer")

    monkeypatch.setattr(reftips, "ask", cannot)
    with pytest.raises(SpawnError, match=r"cannot list the refs of \.git now"):
        sbx.run(f"echo {CONTROL}")
    assert (tip(world, "refs/heads/main"), tip(world, "refs/heads/keep")) == (main, keep)


def test_a_new_repository_with_no_refs_yet_is_all_the_runs(tmp_path):
    """Where git lists nothing because there is nothing yet (``git init`` just made it), the
    signature agrees: no ref. After a commit, and after ``git pack-refs``, it sees them."""
    repo = tmp_path / "r"
    on_host_run = lambda *a: subprocess.run(  # noqa: E731
        ["git", *a], cwd=repo, check=True, capture_output=True
    )
    repo.mkdir()
    on_host_run("init", "-q")
    g = str(repo / ".git")
    assert not reftips.has_refs(reftips.signature(g, g))
    (repo / "f").write_text("x")
    on_host_run("add", "f")
    on_host_run(*GIT.split()[1:], "commit", "-qm", "x")
    assert reftips.has_refs(reftips.signature(g, g))
    on_host_run("pack-refs", "--all", "--prune")
    assert not any((repo / ".git/refs/heads").iterdir())
    assert reftips.has_refs(reftips.signature(g, g))
