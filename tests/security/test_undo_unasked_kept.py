"""A run the gate let through without asking, because undo covers it (``rm -rf src``), is
only as safe as its change set: pruned after ``undo.keep`` later runs with changes like any
other, the deletion could no longer be taken back, and nobody had been asked. Its change set is
now kept past ``undo.keep``. Through the host's service on each confining backend; control: a
run no question was about (``rm`` of one file), in the same store, is pruned as before."""

from __future__ import annotations

from tests.security.conftest import Host

HOST_CONFIG = {"undo": {"keep": 2}}


def _undo(h: Host, rid: str) -> dict:
    token = f"undo-{rid}"
    h.svc.undo(rid, {"cwd": str(h.p)}, token)
    h.drive(lambda: h.event("reply", "token", token) is not None)
    return h.event("reply", "token", token) or {}


def test_a_run_that_went_without_asking_stays_undoable_past_keep(host):
    (host.p / "src").mkdir()
    (host.p / "src" / "app.py").write_text("your work\n")
    (host.p / "notes.txt").write_text("notes\n")
    host.run("true")
    unasked = host.run("rm -rf src")
    assert any("ran without asking" in n for n in unasked["notices"]), unasked
    plain = host.run("rm notes.txt")  # no pause reason: nobody was asked, nothing promised
    assert plain["notices"] == [] and plain["changes"]["paths"] == ["D notes.txt"], plain
    for i in range(3):  # more runs with changes than undo.keep
        host.run(f"echo {i} > out{i}.txt")
    gone = _undo(host, plain["id"])
    assert "no change set is kept" in gone.get("error", ""), gone
    done = _undo(host, unasked["id"])["result"]
    assert done["restored"] == ["src", "src/app.py"] and not done["errors"], done
    assert (host.p / "src" / "app.py").read_text() == "your work\n"
