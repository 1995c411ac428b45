"""The approval gate: one answer ``{needs_approval, reason, rule, decision_id}`` per command."""

from __future__ import annotations

import pytest

from run_bash.checker import LUA_FUNCTION, check
from run_bash.gate import Gate, LuaResult, Undo, Where, decide, lua_results

BOXED = Where("sandlock", True)
NONE = Where("none", False)


def answer(cmd, where=BOXED, rules=None, **kw):
    v = check(cmd, rules)
    return decide("id1", cmd, {**v.to_dict(), "lua_calls": v.lua_calls}, where, **kw)


def test_a_safe_sandboxed_command_needs_nobody():
    a = answer("ls -la")
    assert (a.needs_approval, a.pause, a.rule) == (False, False, None)
    assert a.decision_id == "id1" and a.reason == "no pause-list rule matched"


def test_a_pause_list_hit_asks_with_its_reason_and_rule():
    a = answer("rm -rf build")
    assert a.needs_approval and a.pause and a.rule == "rm"
    assert a.reason.startswith("`rm -rf build`") and a.command == "rm -rf build"


@pytest.mark.parametrize(
    ("where", "skip", "reason"),
    [
        (NONE, False, '`sandbox.backend` is "none"'),
        (Where("none", False, "sandlock unavailable: x"), False, "sandlock unavailable: x"),
        (NONE, True, "skip_sandbox"),
    ],
)
def test_without_a_sandbox_every_command_asks_and_says_why(where, skip, reason):
    a = answer("ls", where, skip_sandbox=skip)
    assert a.needs_approval and not a.pause and reason in a.reason


def test_ask_always_asks():
    a = answer("ls", ask=True)
    assert a.needs_approval and a.reason == "the caller asks to confirm it"


def test_an_always_acceptance_answers_without_asking_but_says_so():
    a = answer("rm -rf build", always=True)
    assert not a.needs_approval and a.always and a.pause


RULES = {"git": LUA_FUNCTION}


def test_lua_rules_pending_ask_until_evaluated():
    a = answer("git status; gitk --all", rules=RULES)
    assert a.lua_pending and a.needs_approval
    assert a.lua_calls == [["git", ["git", "status"]]]
    assert "were not evaluated" in a.reason


@pytest.mark.parametrize(
    ("result", "needs", "reason"),
    [
        (LuaResult(False), False, "no pause-list rule matched"),
        (LuaResult(True), True, "`git status` matches your pause-list rule for git"),
        (LuaResult(True, "boom"), True, "your pause-list rule for git failed (boom)"),
    ],
)
def test_lua_results_decide(result, needs, reason):
    a = answer("git status; gitk --all", rules=RULES, results=[result])
    assert a.needs_approval is needs and not a.lua_pending
    assert reason in a.reason
    assert (a.rule == "git") is needs


def test_gate_folds_results_into_a_kept_answer():
    g = Gate()
    first = g.keep(answer("git status", rules=RULES))
    updated = g.with_results(first, [LuaResult(True, "kaput")])
    assert updated.decision_id == first.decision_id and updated.needs_approval
    assert "failed (kaput): pausing to be safe" in updated.reason


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x", "should be a list"),
        ([], "has 0 entries for 1"),
        ([5], "should be a table"),
        ([{"pause": "yes"}], "should be true or false"),
        ([{"error": 5}], "should be a string"),
    ],
)
def test_malformed_lua_results_are_refused(value, message):
    with pytest.raises(Exception, match=message):
        lua_results(value, [["git", ["git"]]])


# -- effects, not text: the pause list's classes (``Verdict.to_dict()``'s "effect" and "hits") ----


def verdict(*hits):
    """A pausing verdict with these (effect, rule, targets) reasons, as the pause list gives it."""
    listed = [
        {
            "reason": f"`{rule} …` reason {i}",
            "rule": rule,
            "command": f"{rule} …",
            "effect": effect,
            "targets": targets,
        }
        for i, (effect, rule, targets) in enumerate(hits)
    ]
    rev = all(h["effect"] == "reversible" for h in listed)
    return {
        "pause": True,
        "reason": listed[0]["reason"],
        "rule": listed[0]["rule"],
        "command": listed[0]["command"],
        "effect": "reversible" if rev else "irreversible",
        "hits": listed,
        "lua_calls": [],
    }


COVERED = Undo(True, spec={"cwd": "/p", "paths": ["/p/build"], "git": False})


def test_every_reason_reversible_and_covered_runs_without_asking():
    a = decide("d", "rm -rf build", verdict(("reversible", "rm", ["build"])), BOXED, undo=COVERED)
    assert not a.needs_approval and a.undoable and a.pause
    assert a.effect == "reversible" and a.hits[0]["effect"] == "reversible"
    assert a.cover == COVERED.spec  # what the snapshot before the run checks again


@pytest.mark.parametrize(
    ("v", "where", "undo", "kw", "why"),
    [
        # An irreversible reason among reversible ones: it asks.
        (verdict(("reversible", "rm", ["b"]), ("irreversible", "git", None)), BOXED, COVERED,
         {}, ""),
        # Undo does not cover what it names.
        (verdict(("reversible", "rm", ["node_modules"])), BOXED,
         Undo(False, "node_modules/ is ignored, 312 MB"), {}, "node_modules/ is ignored, 312 MB"),
        # No sandbox: undo is no reason not to ask.
        (verdict(("reversible", "rm", ["b"])), NONE, COVERED, {}, "no sandbox"),
        # The opt-out.
        (verdict(("reversible", "rm", ["b"])), BOXED, COVERED, {"ask_reversible": True},
         "ask_reversible"),
        # The store was not asked (undo off, no project).
        (verdict(("reversible", "rm", ["b"])), BOXED, None, {}, "not asked"),
        # The caller asks.
        (verdict(("reversible", "rm", ["b"])), BOXED, COVERED, {"ask": True}, ""),
    ],
    ids=["irreversible among them", "not covered", "no sandbox", "ask_reversible", "no store",
         "caller asks"],
)  # fmt: skip
def test_it_asks_whenever_undo_cannot_stand_for_the_user(v, where, undo, kw, why):
    a = decide("d", "cmd", v, where, undo=undo, **kw)
    assert a.needs_approval and not a.undoable and a.cover is None
    assert why in a.undo_why


def test_each_reason_keeps_its_class_for_the_prompts():
    v = verdict(("irreversible", "git", None), ("reversible", "rm", ["build"]))
    a = decide("d", "git push -f; rm -rf build", v, BOXED, undo=COVERED)
    assert [h["effect"] for h in a.to_wire()["hits"]] == ["irreversible", "reversible"]
    assert a.to_wire()["effect"] == "irreversible"


def test_a_lua_rule_that_pauses_is_irreversible():
    v = {**verdict(("reversible", "rm", ["b"])), "pause": False, "effect": None, "hits": [],
         "lua_calls": [["mytool", ["mytool", "x"]]]}  # fmt: skip
    a = decide("d", "mytool x", v, BOXED, undo=COVERED, results=[LuaResult(True)])
    assert a.needs_approval and a.effect == "irreversible"
    assert a.hits[-1]["rule"] == "mytool" and a.hits[-1]["effect"] == "irreversible"


def test_without_classes_from_the_pause_list_every_pause_asks():
    # A verdict with no "hits" (a pause list that gives none) is never taken for reversible.
    v = {"pause": True, "reason": "`rm -rf b` deletes", "rule": "rm", "command": "rm -rf b"}
    a = decide("d", "rm -rf b", v, BOXED, undo=COVERED)
    assert a.needs_approval and a.effect == "irreversible"
