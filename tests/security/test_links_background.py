"""A link (or a repository) a background run makes is judged as it appears, not only when the run
ends.

A background session (``bg_after``) gives its first result and goes on running while the chat
goes on. A link it makes then (``notes.md`` -> ``~/.ssh/id_rsa``) would be followed by
CodeCompanion's ``read_file`` or your editor long before the post-run check. From its first
result on, every change in the trees it can write wakes the guard: a link that leads out is moved
to the quarantine at once and the run is stopped; so is a new repository once it is not inert,
also when the run arms it later by writing its config. The controls: a link that stays inside the
project, made by the same run earlier, stays and does not stop it; the user's own link to the
key, read by the host, gives the key (so such a read would leak).
"""

from __future__ import annotations

import os
import subprocess
import time

from tests.security.conftest import SECRET, until


def test_a_link_out_made_in_the_background_is_judged_at_once(sbx, world):
    (world.project / "mine").symlink_to(world.home / ".ssh/id_rsa")  # the user's own
    r, out = sbx.in_background(
        "mkdir -p d/e && ln -s ../../README d/e/good",
        "good-made",
        "ln -s ~/.ssh/id_rsa d/e/notes.md && echo bad-made",
    )
    assert "good-made" in out and "survived" not in out, out  # stopped at once
    assert not os.path.lexists(world.project / "d/e/notes.md")
    assert any(
        "d/e/notes.md is a symbolic link the run left" in n and "in the background" in n
        for n in r.notices
    ), r.notices
    # Controls: the link inside the project stays; the user's link stays and leads to the key.
    assert (world.project / "d/e/good").read_text() == "hello\n"
    assert not any("good" in n or "mine" in n for n in r.notices), r.notices
    assert (world.project / "mine").read_text() == SECRET + "-ssh"


def test_a_repository_armed_in_the_background_is_judged_at_once(sbx, world):
    # The repository is inert when it appears; the session arms it later by appending to its
    # config (a write, no new name): git in `sub` on the host would then run the monitor.
    r, out = sbx.in_background(
        "git init -q sub",
        "inited",
        "printf '[core]\\n\\tfsmonitor = \"echo FSMONITOR-RAN >&2; false\"\\n' >> sub/.git/config"
        " && echo armed",
    )
    assert "inited" in out and "survived" not in out, out
    assert any(
        "new repository sub/.git is not inert" in n and "in the background" in n for n in r.notices
    ), r.notices
    assert not (world.project / "sub/.git").exists()
    env = {**world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    git = subprocess.run(["git", "status"], cwd=world.project / "sub", env=env, capture_output=True)
    assert b"FSMONITOR-RAN" not in git.stderr


def test_a_link_made_between_two_walks_of_one_look_is_judged(sbx, world, monkeypatch):
    # One look walks the trees more than once (the links, then the new repositories). A link
    # the run makes after the first walk is read, and its event drained, by the second: the
    # look must look again, not wait for an event that already came. The run makes it exactly
    # then: the second walk of the look after `good` appeared lets the run go on and waits.
    keeper = sbx.mgr.keeper
    original = keeper._check_new_repos
    fired = []

    def between(scope, stopped):
        if not fired and os.path.lexists(world.project / "d/e/good"):
            fired.append(True)
            (world.project / "go2").touch()
            deadline = time.monotonic() + 30
            while not os.path.lexists(world.project / "d/e/notes.md"):
                assert time.monotonic() < deadline, "the run did not make its link"
                time.sleep(0.01)
        return original(scope, stopped)

    monkeypatch.setattr(keeper, "_check_new_repos", between)
    s = sbx.start(
        f"echo up; {until('go')}; mkdir -p d/e && ln -s ../../README d/e/good && "
        f"echo good-made; {until('go2')}; ln -s ~/.ssh/id_rsa d/e/notes.md && echo bad-made; "
        "sleep 20; echo survived",
        bg_after=0.2,
        timeout=120,
    )
    assert not sbx.first_result(s).notices
    (world.project / "go").touch()
    r = sbx.wait(s, timeout=120)
    out = sbx.mgr.output(s.id, tail=50).output
    assert fired and "bad-made" in out and "survived" not in out, out
    assert not os.path.lexists(world.project / "d/e/notes.md")
    assert any("d/e/notes.md is a symbolic link the run left" in n for n in r.notices), r.notices
    # The control: the link inside the project, judged by the same looks, stays.
    assert (world.project / "d/e/good").read_text() == "hello\n"
