"""A repository a background run makes, taken up by another run's host-read set, then armed.

A background run makes an inert repository ``X`` in the project; while it still runs, another run
of the project starts, and its host-read set takes ``X`` up as one of the project's repositories
(its config and hooks kept read-only for that run). The background run, which could write ``X``
all along, then arms it (``core.fsmonitor`` in its config, an index naming a hook). When it ends,
``X`` must be judged as the new repository it is for that run: trusted is only what was trusted
when the run started. Through ``SessionManager`` on every confining backend; controls: the armed
repository makes the outside git run the payload without a sandbox, and the same runs without the
arming leave ``X`` alone and say nothing.
"""

from __future__ import annotations

from tests.security.conftest import CONTROL, Runner, World
from tests.security.test_git_index import hook_entry, write_index
from tests.security.test_hostread import fsmonitor_cfg, git, pwned, unconfined_fires


def made_then_armed(sbx: Runner, world: World, arm: str):
    """The background run makes ``X``, waits until another run has started (it touches ``go``),
    says ``CONTROL``, then runs ``arm`` in the project; the other run's result and the background
    run's. (Said before the arming: a write to a file another run's guard holds kills every run
    that could write it at once, the writer too, which may be before it says anything more.)"""
    bg = sbx.start(
        f"git init -q X && echo made; while [ ! -e go ]; do sleep 0.05; done; echo {CONTROL}; "
        f"{arm} true",
        bg_after=1,
    )
    sbx.wait_output(bg, "made")
    other = sbx.run("git -C X status --short >/dev/null; touch go")
    return other, sbx.wait(bg)


# What stops the armed repository: the background run's end judges it as the new repository it
# is for that run; or the check of a run that took X up (the other run's end, when the arming
# came before it, or the background run's) finds its config changed from the state that run
# trusted, and moves it to the quarantine. Either way the config does not stay.
STOPPED = ("new repository X/.git is not inert", "X/.git/config was changed inside the sandbox")


def test_a_repository_armed_after_another_run_took_it_up_is_judged(sbx, world):
    arm = f"{fsmonitor_cfg(world, 'atonce')} >> X/.git/config;"
    other, bg = made_then_armed(sbx, world, arm)
    assert CONTROL in bg.output, bg.output
    said = [*other.notices, *bg.notices]
    assert [n for n in said if any(s in n for s in STOPPED)], (other.notices, bg.notices)
    sbx.run("true")  # a later run takes the project's state as it is now
    git(world, "status", cwd=world.project / "X")
    assert pwned(world) == []
    unconfined_fires(
        sbx,
        world,
        f"git init -q Y && {arm.replace('X/', 'Y/')}",
        ["status"],
        git_cwd=world.project / "Y",
    )


def test_an_index_armed_after_another_run_took_the_repository_up_is_judged(sbx, world):
    index = write_index(
        ("a", "100644", "a\n"),
        ("../" + hook_entry(world, "atonce2")[0], *hook_entry(world, "atonce2")[1:]),
    )
    other, bg = made_then_armed(sbx, world, f"(cd X && {index});")
    assert CONTROL in bg.output, bg.output
    stopped = ("new repository X/.git is not inert", "X/.git/index was written inside the sandbox")
    said = [*other.notices, *bg.notices]
    assert [n for n in said if any(s in n for s in stopped)], (other.notices, bg.notices)
    assert not (world.project / "X/.git/index").exists()


def test_a_repository_made_beside_another_run_and_left_inert_stays(sbx, world):
    other, bg = made_then_armed(sbx, world, "echo s > X/s && git -C X add s;")
    assert CONTROL in bg.output, bg.output
    assert not [n for n in (*other.notices, *bg.notices) if "X" in n], (other.notices, bg.notices)
    later = sbx.run("true")  # both runs' checks are done before a later run starts
    assert not [n for n in later.notices if "X" in n], later.notices
    assert "s" in git(world, "ls-files", cwd=world.project / "X").split()
