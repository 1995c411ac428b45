"""The guard watches a run's protected files again when the places it watches change (a directory
made on the way to a kept name, a repair): no change made while it does so goes unseen. Before,
the old watches went before the new ones came, and a rules file a background run rewrote in
between (``@~/.ssh/id_rsa``) waited for the run's end to be judged."""

from __future__ import annotations

import os
import time


def test_a_change_made_while_the_guard_watches_again_stops_the_run(sbx, world, monkeypatch):
    rules = world.project / "CLAUDE.md"
    rules.write_text("# notes\n")  # the user's own
    keeper = sbx.mgr.keeper
    watch = keeper._watch
    fired: list[bool] = []

    def again(scope, fresh=None):
        # Watching again (no fresh states: not the run's first watch) after the run made
        # `.cargo`, on the way to `.cargo/config.toml`: the rules file changes right then.
        if fresh is None and not fired and (world.project / ".cargo").is_dir():
            fired.append(True)
            with open(rules, "a") as f:
                f.write(f"@{world.home}/.ssh/id_rsa\n")
        return watch(scope, fresh)

    monkeypatch.setattr(keeper, "_watch", again)
    s = sbx.start("echo up; sleep 0.5; mkdir .cargo; sleep 20; echo survived", bg_after=0.2)
    assert not sbx.first_result(s).notices
    r = sbx.wait(s, timeout=120)
    out = sbx.mgr.output(s.id, tail=50).output
    assert fired and "survived" not in out, out  # stopped while it ran
    assert any("CLAUDE.md" in n for n in r.notices), r.notices
    assert rules.read_text() == "# notes\n"  # given back what it had


def test_watching_again_alone_stops_nothing(sbx, world, monkeypatch):
    # The control: the same run, the same watching again, no change meanwhile.
    (world.project / "CLAUDE.md").write_text("# notes\n")
    keeper = sbx.mgr.keeper
    watch = keeper._watch
    fired: list[bool] = []

    def again(scope, fresh=None):
        if fresh is None and (world.project / ".cargo").is_dir():
            fired.append(True)
        return watch(scope, fresh)

    monkeypatch.setattr(keeper, "_watch", again)
    began = time.monotonic()
    r = sbx.run("sleep 0.5; mkdir .cargo; sleep 1; echo survived")
    assert fired and "survived" in r.output and r.exit_code == 0, r
    assert time.monotonic() - began >= 1.5
    assert os.path.isdir(world.project / ".cargo")
