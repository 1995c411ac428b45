"""Lua-function pause rules are called on exactly the (rule, argv) pairs the checker matched: the
same name lookup as every other rule, so `gitk` never reaches a rule for `git`."""

from __future__ import annotations

import pytest

from run_bash.checker import LUA_FUNCTION, check
from run_bash.checker.rules import lookup_names

LUA = {"git": LUA_FUNCTION, "mkfs": LUA_FUNCTION, "npm": LUA_FUNCTION}


@pytest.mark.parametrize(
    ("cmd", "calls"),
    [
        ("gitk --all", []),
        ("git status; gitk --all", [("git", ["git", "status"])]),
        ("sudo npm publish", [("npm", ["npm", "publish"])]),
        ("mkfs.ext4 /dev/x", [("mkfs", ["mkfs.ext4", "/dev/x"])]),
        ("env FOO=1 git push && npm-check", [("git", ["git", "push"])]),
        ("echo git npm", []),
    ],
)
def test_lua_calls_are_the_matched_pairs(cmd, calls):
    assert check(cmd, LUA).lua_calls == calls


@pytest.mark.parametrize(
    "cmd",
    [
        "git log | gitk",
        "xargs git rm < f",
        "bash -c 'git commit -m x'",
        "gitx; git-lfs pull; git x",
    ],
)
def test_every_call_names_a_rule_its_command_looks_up(cmd):
    v = check(cmd, LUA)
    for name, argv in v.lua_calls:
        assert argv in v.commands
        assert name in lookup_names(argv[0]) and name in LUA
    for argv in v.commands:
        wanted = [n for n in lookup_names(argv[0]) if n in LUA]
        assert bool(wanted) == ([*wanted[:1], argv] in [[n, a] for n, a in v.lua_calls])
