"""A run that deletes what undo covers (so it ran without asking) and then writes more than
``undo.max_store`` must still be undone: the store's collection drops older change sets for
size, never the newest of a project (the one whose end just offered its undo). Through the
host's service on each confining backend; control: an older change set of the same project is
dropped for size as before."""

from __future__ import annotations

import os

from tests.security.conftest import tree

LINE = "rm -rf src; mkdir gen; " + "; ".join(
    f"head -c 90000 /dev/urandom > gen/g{i}" for i in range(15)
)


HOST_CONFIG = {"undo": {"max_store": "1M"}}


def test_the_run_that_outgrew_the_store_is_still_undone(host):
    (host.p / "src").mkdir()
    for i in range(5):
        (host.p / "src" / f"f{i}").write_bytes(os.urandom(40_000))
    host.run("true")
    (host.p / "old.txt").write_text("first\n")
    first = host.run("echo changed > old.txt")  # an older change set of the project
    assert first["changes"]["paths"] == ["M old.txt"], first
    before = tree(host.p)
    a = host.check(LINE)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    r = host.run(LINE)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert not (host.p / "src").exists()
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before
    # The control: the older change set went for size.
    token = "undo-first"
    host.svc.undo(first["id"], {"cwd": str(host.p)}, token)
    host.drive(lambda: host.event("reply", "token", token) is not None)
    reply = host.event("reply", "token", token) or {}
    assert "no change set is kept" in str(reply.get("error")), reply
