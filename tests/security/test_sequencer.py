"""A git operation a run leaves in progress, whose list of next steps git runs when it is continued.

The git directory stays writable inside the sandbox (a rebase that stops on a conflict is ordinary
agent work), so a run can leave a rebase whose to-do list it wrote, with an ``exec`` line that
``git rebase --continue`` outside would run as the user. The guard compares the state directories'
files before and after each run (``sandbox/sequencer.py``) and the run's notice says so. Through
``SessionManager`` on every confining backend; controls: the same run without touching the state
says nothing, a user's own rebase the run leaves alone says nothing, and the state the run wrote is
what git outside would act on (it lists the run's ``exec`` line as the next step).
"""

from __future__ import annotations

from pathlib import Path

from tests.security.conftest import CONTROL, World
from tests.security.test_hostread import git, payload

LEFT = "the run left a rebase in progress"


def planted_rebase(world: World, tag: str) -> str:
    """Shell that leaves an interactive rebase whose next step is ``exec <payload>``."""
    return (
        "g=$(git rev-parse --git-path rebase-merge) && mkdir -p $g && git symbolic-ref HEAD > $g/head-name && "
        "git rev-parse HEAD > $g/onto && git rev-parse HEAD > $g/orig-head && "
        ": > $g/interactive && : > $g/done && echo 0 > $g/msgnum && echo 1 > $g/end && "
        f"printf 'exec {payload(world, tag)}\\n' > $g/git-rebase-todo"
    )


def conflicting_branch(world: World) -> None:
    """A branch whose rebase onto main stops on a conflict in README."""
    git(world, "checkout", "-q", "-b", "topic", check=True)
    (world.project / "README").write_text("topic\n")
    git(world, "commit", "-qam", "topic", check=True)
    git(world, "checkout", "-q", "main", check=True)
    (world.project / "README").write_text("main\n")
    git(world, "commit", "-qam", "main", check=True)
    git(world, "checkout", "-q", "topic", check=True)


def test_a_rebase_the_run_left_with_its_own_list_is_reported(sbx, world):
    r = sbx.run(f"echo {CONTROL}; {planted_rebase(world, 'seq')}")
    assert CONTROL in r.output
    todo = ".git/rebase-merge/git-rebase-todo"
    said = [n for n in r.notices if LEFT in n]
    assert said and todo in said[0], r.notices
    # What the notice is about is real: git outside reads the run's list as the next step.
    assert "exec" in git(world, "status") and (world.project / todo).exists()


def test_a_run_that_leaves_no_operation_in_progress_says_nothing(sbx, world):
    r = sbx.run(f"echo {CONTROL}; echo x > notes.txt")
    assert CONTROL in r.output
    assert not [n for n in r.notices if "in progress" in n], r.notices


def test_a_users_rebase_the_run_leaves_alone_says_nothing(sbx, world):
    conflicting_branch(world)
    git(world, "rebase", "main")  # stops on the conflict: the user's own rebase
    assert (world.project / ".git/rebase-merge").is_dir()
    r = sbx.run(f"echo {CONTROL}; git status --short >/dev/null; cat README >/dev/null")
    assert CONTROL in r.output
    assert not [n for n in r.notices if "in progress" in n], r.notices


def test_a_rebase_stopped_inside_the_sandbox_stays_and_is_reported(sbx, world):
    conflicting_branch(world)
    r = sbx.run(f"echo {CONTROL}; git -c user.name=a -c user.email=a@b rebase main; echo rc=$?")
    assert CONTROL in r.output and "rc=0" not in r.output, r.output
    # Nothing is taken away: the agent (or the user) can resolve and continue.
    assert Path(world.project / ".git/rebase-merge/git-rebase-todo").exists()
    assert [n for n in r.notices if LEFT in n], r.notices


def test_a_new_repository_left_mid_rebase_is_reported(sbx, world):
    attack = (
        "git init -q -b main sub && cd sub && git -c user.name=a -c user.email=a@b commit -q "
        f"--allow-empty -m s && {planted_rebase(world, 'seqnew')}"
    )
    r = sbx.run(f"echo {CONTROL}; {attack}")
    assert CONTROL in r.output
    said = [n for n in r.notices if LEFT in n]
    assert said and "sub/.git/rebase-merge/git-rebase-todo" in said[0], r.notices
    # The control: the same repository without the rebase is inert and says nothing.
    r = sbx.run(f"echo {CONTROL}; rm -rf sub/.git/rebase-merge")
    assert CONTROL in r.output and not [n for n in r.notices if LEFT in n], r.notices


def test_a_rebase_left_in_a_linked_worktree_is_reported_once(sbx, world):
    git(world, "worktree", "add", "-q", "wt", check=True)
    r = sbx.run(f"echo {CONTROL}; cd wt && {planted_rebase(world, 'seqwt')}")
    assert CONTROL in r.output
    said = [n for n in r.notices if LEFT in n]
    assert len(said) == 1, r.notices


def test_a_rebase_left_in_a_repository_the_run_moved_is_reported(sbx, world):
    """An embedded repository the run moves away keeps its git directory where it went: a rebase
    the run left there is reported there."""
    for name in ("emb", "emc"):
        (world.project / name).mkdir()
        git(world, "init", "-q", "-b", "main", cwd=world.project / name, check=True)
    emb = world.project / "emb"
    git(
        world,
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "e",
        cwd=emb,
        check=True,
    )
    r = sbx.run(f"echo {CONTROL}; mv emb emb2 && cd emb2 && {planted_rebase(world, 'seqmv')}")
    assert CONTROL in r.output, r.output
    said = [n for n in r.notices if LEFT in n]
    assert said and "emb2/.git/rebase-merge/git-rebase-todo" in said[0], r.notices
    # The control: the same move of a repository without a rebase says nothing of one.
    r = sbx.run(f"echo {CONTROL}; mv emc emc2")
    assert CONTROL in r.output and not [n for n in r.notices if LEFT in n], r.notices
