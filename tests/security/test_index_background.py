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
    before = "git add new.txt; " if how.endswith("added before") else ""
    r, out = sbx.in_background("git add new.txt", "added", f"{attack}echo written", before)
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
