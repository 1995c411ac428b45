"""A symbolic link a run leaves inside a git directory does not make the host's git write out.

Git writes some files of a git directory by opening them, following a link there: it appends a
reflog line to ``logs/HEAD`` at every commit or checkout (the line holds the branch name, which a
run chooses: ``x;cmd;`` is a valid one), and rewrites ``COMMIT_EDITMSG`` at every commit. So
``.git/logs/HEAD`` -> ``~/.bashrc`` would have the user's next ``git checkout`` of the run's branch
append a command to their shell's startup file. The tree walk that finds the links a run leaves
(``linkcheck``) walks each kept git directory too, and there a link that leads out of the writable
grants goes to the quarantine even when the run could read its end; a new repository holding
such a link is not inert. The judge of the harm is git on the host; the controls are the
``none`` backend (the same run makes the host's git write out) and links that stay inside the
project.
"""

from __future__ import annotations

import subprocess

from tests.security.conftest import CONTROL

FIRED = "FIRED-BY-A-REFLOG-LINE"
BRANCH = "x;echo${IFS}" + FIRED + ";"


def host_git(world, *args: str) -> None:
    """Git on the host, as the user runs it in the project."""
    env = {**world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=world.project, env=env, check=True, capture_output=True)


def checkout_branch(world) -> None:
    """The user checks out a branch the run made (its name carries a command)."""
    host_git(world, "checkout", "-q", "-b", BRANCH)


def test_a_reflog_link_out_of_the_project_is_quarantined(sbx, world):
    rc = world.home / ".bashrc"
    rc.write_text("# rc\n")
    cmd = f"rm -f .git/logs/HEAD && ln -s {rc} .git/logs/HEAD && echo {CONTROL}"
    r = sbx.run(cmd)
    assert CONTROL in r.output, r.output
    assert any(".git/logs/HEAD is a symbolic link the run left" in n for n in r.notices), r.notices
    assert not (world.project / ".git/logs/HEAD").is_symlink()
    checkout_branch(world)
    assert rc.read_text() == "# rc\n"
    # Control: without the sandbox the link stays, and the user's git writes the line there.
    host_git(world, "checkout", "-q", "main")
    sbx.unconfined().run(cmd)
    host_git(world, "branch", "-D", BRANCH)
    checkout_branch(world)
    assert FIRED in rc.read_text()
    assert FIRED in subprocess.run(["bash", str(rc)], capture_output=True, text=True).stdout


def test_a_link_to_a_file_the_run_could_only_read_is_quarantined_in_a_git_dir(sbx, world):
    # A shared cache is readable, not writable: a link to it stays in the work tree (the
    # documented limit of links out), but git would write through one in a git directory.
    end = world.home / ".npm/_cacache/keep"
    r = sbx.run(
        f"ln -s {end} work-link && ln -sf {end} .git/COMMIT_EDITMSG && "
        f"ln -s ../README .git/readme-link && echo {CONTROL}"
    )
    assert CONTROL in r.output, r.output
    assert any(".git/COMMIT_EDITMSG is a symbolic link" in n for n in r.notices), r.notices
    assert not (world.project / ".git/COMMIT_EDITMSG").is_symlink()
    host_git(
        world,
        "-c",
        "user.name=U",
        "-c",
        "user.email=u@x",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "mine",
    )
    assert end.read_text() == ""
    # Controls: the same link in the work tree, and a link inside the project, stay.
    assert (world.project / "work-link").is_symlink()
    assert (world.project / ".git/readme-link").is_symlink()


def test_a_new_repository_with_a_link_out_is_not_inert(sbx, world):
    end = world.home / ".npm/_cacache/keep"
    r = sbx.run(
        f"git init -q a && git init -q b && ln -s {end} b/.git/COMMIT_EDITMSG && echo {CONTROL}"
    )
    assert CONTROL in r.output, r.output
    assert any("new repository b/.git is not inert (its COMMIT_EDITMSG" in n for n in r.notices)
    assert not (world.project / "b/.git").exists()
    # Control: the same repository without the link is inert and stays.
    assert (world.project / "a/.git/HEAD").is_file()
