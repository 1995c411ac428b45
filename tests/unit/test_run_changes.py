"""Runs and their change sets through the host's service (real processes, the "none" backend, a
real store): begin before the spawn, finish at every end before the result, the change-set RPCs
with their argument checks, undo as a run of its own, and the audit lines."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.errors import UsageError
from run_bash.sandbox.policy import build_policy
from run_bash.service import Service
from tests.conftest import until
from tests.unit.changes_util import tree_hash


@pytest.fixture
async def svc(tmp_path, monkeypatch):
    events: list[tuple[str, dict]] = []
    audit = tmp_path / "audit.jsonl"
    home = tmp_path / "home"
    home.mkdir()
    # Neovim's directory (setup prepares its project): none here, not the test runner's.
    monkeypatch.chdir(home)
    service = Service(
        asyncio.get_running_loop(),
        lambda name, payload: events.append((name, payload)),
        environ={
            **os.environ,
            "HOME": str(home),
            "RUN_BASH_AUDIT": str(audit),
            "RUN_BASH_UNDO": str(tmp_path / "undo"),
        },
        state_dir=str(tmp_path / "state"),
    )
    os.makedirs(service.mgr.state_dir, mode=0o700, exist_ok=True)
    service.setup({"sandbox": {"backend": "none"}})
    service.events = events  # type: ignore[attr-defined]
    service.audit_path = audit  # type: ignore[attr-defined]
    service.home = home  # type: ignore[attr-defined]
    yield service
    await service.mgr.shutdown()
    service.recorder.close()


@pytest.fixture
def proj(tmp_path) -> Path:
    p = tmp_path / "proj"
    (p / "src").mkdir(parents=True)
    (p / "src" / "app.py").write_text("print('hi')\n")
    (p / "notes.md").write_text("notes\n")
    (p / "Makefile").write_text("all:\n")
    return p


async def run(svc, cmd, cwd, **spec):
    info = svc.run({"cmd": cmd, "cwd": str(cwd), "unsandboxed_ok": True, **spec})
    return (await asyncio.wait_for(svc.mgr.wait_result(info["id"]), 30)).to_wire()


_tokens = iter(range(1, 1_000_000))


async def ask(svc, method, *args):
    """Call a reply-event RPC; return (result, error)."""
    token = next(_tokens)
    assert svc.rpc(method, (*args, token)) is True

    def got():
        for name, p in svc.events:
            if name == "reply" and p["token"] == token:
                return p
        return None

    reply = await until(got, timeout=30)
    return reply.get("result"), reply.get("error")


def audit_lines(svc, event):
    text = svc.audit_path.read_text() if svc.audit_path.exists() else ""
    return [r for r in map(json.loads, text.splitlines()) if r["event"] == event]


async def test_the_result_carries_the_change_set_and_the_audit_line_its_counts(svc, proj):
    r = await run(svc, "echo x >> src/app.py; echo new > added.txt; rm notes.md", proj)
    ch = r["changes"]
    assert ch["summary"] == "Changed files: A added.txt, D notes.md, M src/app.py"
    assert ch["counts"] == {"added": 1, "modified": 1, "deleted": 1, "skipped": 0}
    [line] = audit_lines(svc, "run")
    assert line["id"] == r["id"]
    assert line["changes"] == {"counts": ch["counts"], "paths": ch["paths"]}
    assert svc.mgr.change_set_kept(r["id"]) is True


async def test_the_snapshot_is_taken_before_the_command_starts(svc, proj):
    """A file the command creates at its very first instruction is in its change set as added:
    the command cannot have started before the snapshot."""
    r = await run(svc, "echo early > first.txt", proj)
    assert r["changes"]["paths"] == ["A first.txt"]


async def test_a_run_that_changes_nothing_has_an_empty_summary_and_no_kept_set(svc, proj):
    r = await run(svc, "cat notes.md", proj)
    assert r["changes"]["summary"] == "" and r["changes"]["paths"] == []
    assert svc.mgr.change_set_kept(r["id"]) is False
    _res, err = await ask(svc, "changes", r["id"], None)
    assert "no change set is kept for run" in err


async def test_a_run_in_home_is_not_recorded_and_says_so(svc):
    r = await run(svc, "echo hi > f.txt", svc.home)
    assert r["exit_code"] == 0
    assert r["changes"] == {
        "not_recorded": "the project would be your home directory (run in a project directory)"
    }
    # No news for the agent (there is nothing to protect there): no note in its result.
    assert not any("changes not recorded" in n for n in r["notices"])
    [line] = audit_lines(svc, "run")
    assert line["changes"]["not_recorded"].startswith("the project would be your home")


async def test_a_project_over_the_file_cap_is_not_walked_again_at_every_run(svc, proj):
    svc.setup({"sandbox": {"backend": "none"}, "undo": {"max_files": 1}})
    r = await run(svc, "echo x > a.txt", proj)
    why = "the project has more than 1 files (undo.max_files = 1)"
    assert r["changes"] == {"not_recorded": why}
    walks = svc.recorder.store.walks
    r = await run(svc, "echo y > b.txt", proj)
    assert r["changes"] == {"not_recorded": why}
    assert svc.recorder.store.walks == walks  # the answer was remembered, not walked again
    svc.setup({"sandbox": {"backend": "none"}})  # new limits: looked at again, and recorded
    r = await run(svc, "echo z > c.txt", proj)
    assert r["changes"]["paths"] == ["A c.txt"]


async def test_the_kept_predicate_follows_retention(svc, proj):
    """Pruning of session history asks ``change_set_kept``: it turns false once retention drops
    the run's change set."""
    svc.setup({"sandbox": {"backend": "none"}, "undo": {"keep": 1}})
    first = await run(svc, "echo 1 > one.txt", proj)
    assert svc.mgr.change_set_kept(first["id"]) is True
    second = await run(svc, "echo 2 > two.txt", proj)
    assert svc.mgr.change_set_kept(second["id"]) is True
    # What retention dropped is learnt once the run is done (after its result).
    await asyncio.wait_for(svc.mgr.sessions[second["id"]].done.wait(), 30)
    assert svc.mgr.change_set_kept(first["id"]) is False


async def test_a_listing_of_kept_sets_after_the_host_closed_its_workers_logs_no_error(
    svc, proj, caplog
):
    """A recorded run that ends while the host exits lists the kept change sets after the
    recorder closed its workers: nothing is listed then, and that is no error to log."""
    first = await run(svc, "echo 1 > one.txt", proj)
    await asyncio.wait_for(svc.mgr.sessions[first["id"]].done.wait(), 30)
    with caplog.at_level(logging.DEBUG, logger="run_bash"):
        await svc.recorder.refresh_kept()  # control: open, it lists and logs nothing
        assert svc.mgr.change_set_kept(first["id"]) is True
        svc.recorder.close()
        await svc.recorder.refresh_kept()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert svc.mgr.change_set_kept(first["id"]) is True  # what it knew stays


async def test_with_undo_disabled_nothing_is_recorded(svc, proj, tmp_path):
    svc.setup({"sandbox": {"backend": "none"}, "undo": {"enabled": False}})
    r = await run(svc, "echo x > off.txt", proj)
    assert r["exit_code"] == 0 and "changes" not in r
    assert not any("changes" in n for n in r["notices"])
    assert not (tmp_path / "undo").exists()  # no snapshot was ever taken
    svc.setup({"sandbox": {"backend": "none"}})  # the control: on again, recorded
    r = await run(svc, "echo y > on.txt", proj)
    assert r["changes"]["paths"] == ["A on.txt"]


async def test_a_timeout_and_a_kill_get_their_change_sets(svc, proj):
    r = await run(svc, "echo t > timed.txt; sleep 30", proj, timeout=1)
    assert r["timed_out"] and r["changes"]["paths"] == ["A timed.txt"]
    bg = {"cmd": "echo b > bg.txt; sleep 300", "bg_after": 0.5, "unsandboxed_ok": True}
    info = svc.run({**bg, "cwd": str(proj)})
    first = (await asyncio.wait_for(svc.mgr.wait_result(info["id"]), 30)).to_wire()
    assert first["status"] == "running" and "changes" not in first  # not over yet
    killed = (await asyncio.wait_for(svc.mgr.kill(info["id"]), 30)).to_wire()
    assert killed["killed"] and killed["changes"]["paths"] == ["A bg.txt"]
    [exited] = [p for n, p in svc.events if n == "exited" and p["id"] == info["id"]]
    assert exited["changes"]["paths"] == ["A bg.txt"]


async def test_host_shutdown_records_the_runs_it_kills(svc, proj):
    bg = {"cmd": "echo s > shut.txt; sleep 300", "bg_after": 0.3, "unsandboxed_ok": True}
    info = svc.run({**bg, "cwd": str(proj)})
    await asyncio.wait_for(svc.mgr.wait_result(info["id"]), 30)
    assert svc.shutdown() is True
    [line] = [x for x in audit_lines(svc, "run") if x["id"] == info["id"]]
    assert line["status"] == "killed" and line["changes"]["paths"] == ["A shut.txt"]


@dataclasses.dataclass
class _Run:
    """A run as the change hook sees it (``run_changes.Run``)."""

    id: str
    cmd: str
    cwd: str
    notices: list = dataclasses.field(default_factory=list)
    changes: dict | None = None
    change_token: object = None
    cover: object = None
    hold: str | None = None
    backend: object = dataclasses.field(default_factory=lambda: _NoSandbox())


class _NoSandbox:
    isolates = False


async def test_host_shutdown_forgets_a_run_snapshotted_but_never_started(svc, proj):
    """A run caught between its snapshot and its spawn when the host stops ran nothing: it gets no
    change set, although the project changed meanwhile; a started run beside it does."""
    started, never = _Run("startd", "echo", str(proj)), _Run("nevers", "echo", str(proj))
    for r in (started, never):
        await svc.recorder.begin(r)
        assert r.change_token is not None
    (proj / "meanwhile.txt").write_text("x\n")
    svc.recorder.finish_now([started], never_started=[never])
    assert started.changes["paths"] == ["A meanwhile.txt"]  # positive control
    assert never.changes is None and never.change_token is None
    kept = [r["run"] for r in await svc.recorder.runs()]
    assert "startd" in kept and "nevers" not in kept


async def test_changes_diff_plan_and_undo_through_the_service(svc, proj):
    before = tree_hash(proj)
    r = await run(svc, "echo more >> src/app.py; rm -r src; echo n > n.txt", proj)
    rid = r["id"]
    got, err = await ask(svc, "changes", rid, None)
    assert err is None and got["run"] == rid and got["label"].startswith("echo more")
    assert {c["path"]: c["kind"] for c in got["changes"]} == {
        "n.txt": "added",
        "src/": "deleted",
        "src/app.py": "deleted",
    }
    diff, _ = await ask(svc, "diff", None, {"cwd": str(proj)})  # the latest run with changes
    assert diff["run"] == rid and "-print('hi')" in diff["text"]
    plan, _ = await ask(svc, "plan", rid, {"force": False})
    assert plan["restore"] == ["src", "src/app.py"] and plan["remove"] == ["n.txt"]
    done, err = await ask(svc, "undo", rid, {"cwd": str(proj)})
    assert err is None and tree_hash(proj) == before
    assert done["undo_of"] == rid and done["removed"] == ["n.txt"]
    assert sorted(done["restored"]) == ["src", "src/app.py"]
    # The undo is a run of its own: it can be undone, and the audit log says what it did.
    [line] = audit_lines(svc, "undo")
    assert line["id"] == done["run"] and line["undo_of"] == rid
    assert line["counts"]["restored"] == 2 and line["removed"] == ["n.txt"]
    runs, _ = await ask(svc, "undo_runs")
    assert [x["run"] for x in runs][:2] == [done["run"], rid]
    _again, err = await ask(svc, "undo", done["run"], None)
    assert err is None and not (proj / "src").exists() and (proj / "n.txt").exists()
    usage, _ = await ask(svc, "undo_usage")
    assert usage["path"] == svc.recorder.root and usage["bytes"] > 0 and usage["enabled"] is True
    assert (usage["keep"], usage["idle_days"]) == (50, 30)


async def test_a_long_diff_is_cut_with_a_note(svc, proj):
    r = await run(svc, "for i in $(seq 1 50); do echo line $i > f$i.txt; done", proj)
    full, _ = await ask(svc, "diff", r["id"], None)
    svc.recorder.diff_max = 400
    cut, _ = await ask(svc, "diff", r["id"], None)
    assert len(cut["text"]) < 500 < len(full["text"])
    assert full["text"].startswith(cut["text"].rsplit("\n", 2)[0])
    assert cut["text"].endswith("more lines not shown: the diff is too long\n")


async def test_conflicts_are_left_alone_unless_forced(svc, proj):
    r = await run(svc, "echo run > notes.md", proj)
    (proj / "notes.md").write_text("edited by the user\n")
    plan, _ = await ask(svc, "plan", r["id"], None)
    assert plan["conflicts"] == [{"path": "notes.md", "why": "changed since the run"}]
    done, _ = await ask(svc, "undo", r["id"], None)
    assert done["restored"] == [] and (proj / "notes.md").read_text() == "edited by the user\n"
    done, _ = await ask(svc, "undo", r["id"], {"force": True})
    assert done["restored"] == ["notes.md"] and (proj / "notes.md").read_text() == "notes\n"


@pytest.mark.parametrize(
    ("method", "args", "message"),
    [
        ("changes", (5, None), "`id` should be a string, not number 5"),
        ("changes", ("  ", None), "`id` is empty"),
        ("diff", ("abc", {"cwdd": "/"}), "unknown diff option(s): cwdd"),
        ("plan", ("abc", {"force": "yes"}), "`force` should be true or false, not string 'yes'"),
        ("undo", ("abc", {"force": 1}), "`force` should be true or false, not number 1"),
        ("undo", ("abc", "force"), "`undo` should be a table, not string 'force'"),
        ("changes", ("abc", {"cwd": 3}), "`cwd` should be a string, not number 3"),
        ("undo_runs", (1, 2), "undo_runs takes (token), not 2 argument(s)"),
    ],
)
async def test_bad_arguments_are_one_clear_error(svc, method, args, message):
    with pytest.raises(UsageError) as err:
        svc.rpc(method, args)
    assert str(err.value).startswith(message)


async def test_a_run_still_going_has_no_change_set_yet(svc, proj):
    bg = {"cmd": "echo b > bg.txt; sleep 300", "bg_after": 0.3, "unsandboxed_ok": True}
    info = svc.run({**bg, "cwd": str(proj)})
    await asyncio.wait_for(svc.mgr.wait_result(info["id"]), 30)
    with pytest.raises(UsageError, match="has not ended yet"):
        svc.rpc("undo", (info["id"], None, 1))
    await asyncio.wait_for(svc.mgr.kill(info["id"]), 30)
    got, err = await ask(svc, "changes", info["id"], None)  # the control: once it has ended
    assert err is None and got["changes"] == [{"path": "bg.txt", "kind": "added"}]


async def test_an_unknown_run_is_a_clear_reply_error(svc, proj):
    _res, err = await ask(svc, "undo", "nosuch", None)
    assert err.startswith("no change set is kept for run 'nosuch'")
    _res, err = await ask(svc, "plan", None, {"cwd": str(proj)})
    assert err == "no run with changes is kept"


async def test_without_a_store_runs_are_not_recorded_and_queries_say_why(tmp_path, proj):
    events: list[tuple[str, dict]] = []
    env = {k: v for k, v in os.environ.items() if k != "RUN_BASH_UNDO"}
    svc = Service(
        asyncio.get_running_loop(),
        lambda n, p: events.append((n, p)),
        environ=env,
        state_dir=str(tmp_path / "state2"),
    )
    os.makedirs(svc.mgr.state_dir, mode=0o700, exist_ok=True)
    svc.setup({"sandbox": {"backend": "none"}})
    svc.events = events  # type: ignore[attr-defined]
    try:
        r = await run(svc, "echo x > y", proj)
        assert r["exit_code"] == 0 and "changes" not in r
        _res, err = await ask(svc, "undo_runs")
        assert "no undo store" in err
    finally:
        await svc.mgr.shutdown()


def test_the_store_is_denied_whatever_the_rules_grant(tmp_path):
    store = tmp_path / "state" / "run_bash" / "undo"
    cfg = parse_config({"sandbox": {"rules": {"fs_readable": [str(tmp_path)]}}})
    plain = build_policy(cfg, str(tmp_path), scan_ports=False)
    assert str(store) not in plain.denied  # the control: without it, the grant would cover it
    policy = build_policy(cfg, str(tmp_path), scan_ports=False, hidden=[str(store)])
    assert str(store) in policy.denied


async def test_a_run_recorded_while_the_kept_sets_are_listed_stays_counted(svc, proj):
    """``refresh_kept`` lists the kept change sets on a worker while another run may finish: a
    run recorded during the listing (so missing from it) stays counted as kept. Control: a run
    whose change set retention dropped is not counted once a later listing says so."""
    svc.setup({"sandbox": {"backend": "none"}, "undo": {"keep": 1}})
    first = await run(svc, "echo 1 > one.txt", proj)
    rc = svc.recorder
    real = rc.store.kept_ids
    during: list[str] = []

    def listing() -> set[str]:
        got = real()  # the listing is made, then a run's change set is recorded
        tok = rc.store.begin("meanwhile", str(proj))
        (proj / "three.txt").write_text("3\n")
        rc._finish(tok)
        during.append("meanwhile")
        return got

    rc.store.kept_ids = listing  # type: ignore[method-assign]
    try:
        await rc.refresh_kept()
    finally:
        rc.store.kept_ids = real  # type: ignore[method-assign]
    assert during and rc.is_kept("meanwhile")
    await rc.refresh_kept()  # a listing made after it: retention (keep = 1) dropped the first
    assert rc.is_kept("meanwhile") and not rc.is_kept(first["id"])


def test_a_reversible_reason_that_names_no_path_stands_for_every_writable_place(tmp_path):
    """A reversible reason with targets names the paths undo must cover; one with none named
    (an empty list, as for targets only known at run time) must not be covered by nothing."""
    from run_bash.run_changes import cover_spec

    named = cover_spec(str(tmp_path), [{"rule": "rm", "targets": ["build"]}], None)
    assert (named.paths, named.everything) == ((str(tmp_path / "build"),), False)
    for targets in ([], None):
        spec = cover_spec(str(tmp_path), [{"rule": "rm", "targets": targets}], None)
        assert spec.everything and spec.paths == (), targets


@pytest.mark.parametrize(
    ("cmd", "asks"),
    [
        ("fd . /etc -x rm -rf", True),
        ("fd . ~/.cache -X rm -rf", True),
        ("fd . /tmp -x shred -u", True),
        ("rm -rf src", False),  # the control: undo covers the path it names
    ],
)
async def test_the_gate_asks_for_what_fd_finds(svc, proj, tmp_path, cmd, asks):
    """fd gives the command it runs the paths it finds: not knowing them, undo stands for the
    user only when it covers every place the sandbox lets the run write (here also a directory
    outside the project), never when the reason names no path at all."""
    from run_bash.checker import check
    from run_bash.gate import Undo, Where, decide
    from run_bash.run_changes import cover_spec

    svc.recorder.grants = lambda _cwd: ([str(proj), str(tmp_path / "out")], [])

    verdict = check(cmd)
    wire = {**verdict.to_dict(), "lua_calls": verdict.lua_calls}
    assert verdict.pause and verdict.effect == "reversible", verdict
    spec = cover_spec(
        str(proj),
        wire["hits"],
        str(svc.home),
        verdict.commands,
        verdict.programs,
        verdict.path_changed,
    )

    def cover():
        got = svc.recorder.coverage(spec)
        return None if "not built yet" in got.why else got

    got = await until(cover, timeout=30)
    undo = Undo(got.ok, got.why, {"cwd": spec.cwd, "paths": list(spec.paths)})
    answer = decide("d", cmd, wire, Where("sandlock", True), undo=undo)
    assert answer.needs_approval is asks, (answer, got)


@pytest.mark.parametrize(
    ("line", "known"),
    [
        ("rm -rf build", True),
        ("/usr/bin/rm -rf build", True),
        ("./rm -rf build", False),
        ("bin/rm -rf build", False),
        ("/usr/bin/../../tmp/rm -rf build", False),
        ("PATH=.:$PATH rm -rf build", False),
        ("export PATH=bin:$PATH; rm -rf build", False),
        ("R=./rm; $R -rf build", False),
        ('R=./rm; "$R" -rf build', False),
        ("LD_PRELOAD=./evil.so rm -rf build", False),
        ("env LD_PRELOAD=./evil.so rm -rf build", False),
        ("LD_LIBRARY_PATH=. rm -rf build", False),
    ],
)
def test_a_command_named_by_its_path_or_after_path_changes_may_be_any_file(tmp_path, line, known):
    """The table judges ``rm`` by its name; undo covers it only when ``rm`` is the system's: a
    path into the project, or a name found after the line set ``PATH``, may be a script that
    makes a link into ``.git`` first (the control: ``rm`` and ``/usr/bin/rm`` are known)."""
    from run_bash.checker import check
    from run_bash.run_changes import cover_spec

    verdict = check(line)
    assert verdict.pause and verdict.effect == "reversible", verdict
    spec = cover_spec(
        str(tmp_path),
        [h.to_dict() for h in verdict.hits],
        None,
        verdict.commands,
        verdict.programs,
        verdict.path_changed,
    )
    assert spec.everything is (not known), (verdict.programs, verdict.path_changed)


def test_a_cover_spec_comes_back_from_its_plain_data_and_missing_keys_are_strict():
    from run_bash.run_changes import CoverSpec

    spec = CoverSpec("/p", ("/p/a", "/p/b"), git=True, inplace=False, follow=("/p/b",))
    assert CoverSpec.from_plain(spec.plain(), "/elsewhere") == spec
    strict = CoverSpec.from_plain({"paths": ["/p/a"]}, "/p")
    assert strict == CoverSpec("/p", ("/p/a",), False, True, True, ("/p/a",))


def test_a_cover_spec_index_of_another_type_is_the_strict_answer():
    """Data that did not come from ``plain`` (a string, numbers) checks the working
    directory's index rather than iterating it; a list of paths is taken as it is."""
    from run_bash.run_changes import CoverSpec

    for bad in ("/p/sub", 7, ["/p/a", 3], {"x": 1}, None):
        got = CoverSpec.from_plain({"cwd": "/p", "git": True, "index": bad}, "/p")
        assert got.index == ("/p",), bad
    good = CoverSpec.from_plain({"cwd": "/p", "git": True, "index": ["/p/sub"]}, "/p")
    assert good.index == ("/p/sub",)
