"""An index a background run writes is judged as it is written, not only when the run ends.

A background session goes on while you work: your ``git restore`` or ``git checkout-index -a`` in
the meantime would write what an index it wrote names (``.git/hooks/post-commit``) long before
the post-run check (``test_git_index.py``). So an index a background run writes, in place or
renamed over, is judged by git as soon as it is written (``gitindex``): one git refuses goes to
the quarantine and the session is stopped. The controls: the session's own ``git add`` before
that stays and stops nothing; the same index without the sandbox plants the hook.
"""

from __future__ import annotations

import pytest

from tests.security.test_git_index import NOTE, hook_entry, write_index
from tests.security.test_hostread import git, pwned


def until(name: str) -> str:
    return f"while [ ! -e {name} ]; do sleep 0.05; done"


@pytest.mark.parametrize("how", ["in place", "renamed over", "in place, added before"])
def test_an_index_written_in_the_background_is_judged_at_once(sbx, world, how):
    attack = write_index(("README", "100644", "hello\n"), hook_entry(world, "bgidx"))
    if how == "renamed over":
        attack = (
            attack.replace("open(gd, 'wb')", "open('idx.tmp', 'wb')") + "mv idx.tmp .git/index\n"
        )
    (world.project / "new.txt").write_text("new\n")
    # "added before": the index is replaced (a new inode) before the first result, while the run
    # is in the foreground; the one written in place later is that one.
    first = "git add new.txt; " if how.endswith("added before") else ""
    s = sbx.start(
        f"{first}echo up; {until('go')}; git add new.txt && echo added; {until('go2')}\n"
        f"{attack}echo written; sleep 20; echo survived",
        bg_after=0.2,
        timeout=120,
    )
    assert not sbx.first_result(s).notices
    (world.project / "go").touch()
    sbx.wait_output(s, "added")
    (world.project / "go2").touch()
    r = sbx.wait(s, timeout=120)
    out = sbx.mgr.output(s.id, tail=50).output
    assert "added" in out and "survived" not in out, out  # stopped while it ran
    # Refused as git lists it, or as git cannot read it (judged while it was being written).
    refused = (NOTE, "git cannot read its index")
    assert [
        n
        for n in r.notices
        if ".git/index was written" in n and any(w in n for w in refused) and "background" in n
    ], r.notices
    git(world, "checkout-index", "-a", "-f")
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert not (world.project / ".git/hooks/post-commit").exists()
    assert pwned(world) == []
