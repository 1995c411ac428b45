"""Pause-list user rules: true/false, Lua-function markers, declarative tables, validation."""

from __future__ import annotations

from typing import Any

import pytest

from run_bash.checker import LUA_FUNCTION, check
from run_bash.checker.rules import DEFAULT_RULES, validate_rules
from run_bash.config import parse_config
from run_bash.errors import ConfigError

P = pytest.param

NPM_PUBLISH = {"npm": {"subcommands": ["publish"]}}
DOCKER = {
    "docker": {
        "subcommands": {"rm": True, "system": {"subcommands": ["prune"]}, "push": False},
        "flags": ["--privileged"],
    }
}
TERRAFORM = {"terraform": {"subcommands": {"apply": {"flags": ["-auto-approve"]}}}}
RSYNC = {"rsync": {"flags": ["--delete", "-n"]}}
MV = {"mv": {"args": ["/", "/etc/*", "~/.ssh*"]}}

# (rules, command, paused, rule)
CASES = [
    P({"rm": False}, "rm -rf /", False, None, id="false-disables-default"),
    P({"kill": False}, "kill 1 && rm -rf x", True, "rm", id="false-keeps-other-defaults"),
    P({"make": True}, "make test", True, "make", id="true-always-pauses"),
    P({"make": True}, "sudo /usr/bin/make", True, "make", id="true-seen-through-wrappers"),
    P({"sudo": True}, "sudo ls", True, "sudo", id="true-on-a-wrapper"),
    P({"git": True}, "git status", True, "git", id="true-replaces-default-rule"),
    P({"mkfs.ext4": False}, "mkfs.ext4 /dev/x", False, None, id="specific-name-beats-family"),
    P({"mkfs": False}, "mkfs.xfs /dev/x", False, None, id="family-rule-disabled"),
    P(NPM_PUBLISH, "npm publish", True, "npm", id="decl-subcommand"),
    P(NPM_PUBLISH, "npm uninstall x", False, None, id="decl-replaces-default"),
    P(NPM_PUBLISH, "npm --prefix web publish", True, "npm", id="decl-subcommand-after-option"),
    P(NPM_PUBLISH, "npm $X", True, "npm", id="decl-unknown-subcommand-fails-closed"),
    P(DOCKER, "docker rm web", True, "docker", id="decl-subcommand-table-true"),
    P(DOCKER, "docker push img", False, None, id="decl-subcommand-table-false"),
    P(DOCKER, "docker system prune -af", True, "docker", id="decl-nested-subcommand"),
    P(DOCKER, "docker system df", False, None, id="decl-nested-subcommand-miss"),
    P(DOCKER, "docker -H tcp://h rm web", True, "docker", id="decl-known-value-option"),
    P(DOCKER, "docker run --privileged img", True, "docker", id="decl-flag"),
    P(DOCKER, "docker run --privileged=true img", True, "docker", id="decl-flag-with-value"),
    P(DOCKER, "docker run img --privileged", True, "docker", id="decl-flag-after-operand"),
    P(DOCKER, "docker run -- img --privileged", False, None, id="decl-flag-after-dashdash"),
    P(DOCKER, "docker ps", False, None, id="decl-miss"),
    P(TERRAFORM, "terraform apply -auto-approve", True, "terraform", id="decl-sub-and-flag"),
    P(TERRAFORM, "terraform apply", False, None, id="decl-sub-without-flag"),
    P(TERRAFORM, "terraform plan -auto-approve", False, None, id="decl-flag-other-sub"),
    P(RSYNC, "rsync -av --delete a/ b/", True, "rsync", id="decl-long-flag"),
    P(RSYNC, "rsync -av --del a/ b/", True, "rsync", id="decl-long-flag-prefix"),
    P(RSYNC, "rsync -avn a/ b/", True, "rsync", id="decl-short-flag-in-cluster"),
    P(RSYNC, "rsync -av a/ b/", False, None, id="decl-flags-miss"),
    P(RSYNC, "rsync $OPTS a/ b/", True, "rsync", id="decl-unknown-flag-fails-closed"),
    P(RSYNC, 'rsync -a "$SRC" b/', False, None, id="decl-quoted-variable-is-operand"),
    P(MV, "mv x /", True, "mv", id="decl-arg"),
    P(MV, "mv x /etc/hosts", True, "mv", id="decl-arg-glob"),
    P(MV, "mv x //etc/./hosts", True, "mv", id="decl-arg-normalized"),
    P(MV, "mv x ./etc/hosts", False, None, id="decl-arg-miss"),
    P(
        {"npm": {"subcommands": ["publish"], "reason": "publishes to npm"}},
        "npm publish",
        True,
        "npm",
        id="decl-custom-reason",
    ),
]


@pytest.mark.parametrize("rules, cmd, paused, rule", CASES)
def test_user_rule(rules: dict[str, Any], cmd: str, paused: bool, rule: str | None) -> None:
    verdict = check(cmd, rules)
    assert verdict.pause is paused, verdict
    assert verdict.rule == rule, verdict


def test_custom_reason_is_used() -> None:
    rules = {"npm": {"subcommands": ["publish"], "reason": "publishes to npm"}}
    assert check("npm publish", rules).reason == "`npm publish` publishes to npm"


def test_none_rules_means_defaults() -> None:
    assert check("rm -rf x", None).rule == "rm"
    assert check("rm -rf x", {}).rule == "rm"


def test_lua_function_rule_defers_to_lua() -> None:
    verdict = check("npm publish && make", {"npm": LUA_FUNCTION, "make": LUA_FUNCTION})
    assert not verdict.pause
    assert verdict.lua_rules == ["npm", "make"]
    assert ["npm", "publish"] in verdict.commands
    assert "Lua" in verdict.reason


def test_lua_function_rule_replaces_the_default() -> None:
    verdict = check("rm -rf x", {"rm": LUA_FUNCTION})
    assert not verdict.pause and verdict.lua_rules == ["rm"]


def test_lua_function_rule_sees_commands_through_wrappers() -> None:
    verdict = check("sudo -u x /usr/bin/npm publish", {"npm": LUA_FUNCTION})
    assert verdict.lua_rules == ["npm"]
    assert ["npm", "publish"] in verdict.commands


def test_lua_function_rule_only_listed_when_its_command_appears() -> None:
    assert check("ls", {"npm": LUA_FUNCTION}).lua_rules == []


def test_python_pause_still_wins_over_lua_rules() -> None:
    verdict = check("npm publish; rm -rf x", {"npm": LUA_FUNCTION})
    assert verdict.pause and verdict.rule == "rm"


@pytest.mark.parametrize(
    "rules, problem",
    [
        P({"rm": 1}, "`pauselist.rm` should be boolean, function or table", id="number"),
        P({"rm": "yes"}, "`pauselist.rm` should be boolean, function or table", id="string"),
        P({"rm": ["-r"]}, "`pauselist.rm` should be boolean, function or table", id="list"),
        P({"npm": {}}, "`pauselist.npm` should list subcommands, flags or args", id="empty"),
        P(
            {"npm": {"subcomands": ["x"]}},
            "unknown option `pauselist.npm.subcomands`",
            id="unknown-key",
        ),
        P({"npm": {"flags": "-f"}}, "`pauselist.npm.flags` should be list of strings", id="flags"),
        P({"npm": {"args": [1]}}, "`pauselist.npm.args` should be list of strings", id="args"),
        P(
            {"npm": {"subcommands": "publish"}},
            "`pauselist.npm.subcommands` should be list of strings or table",
            id="subcommands-string",
        ),
        P(
            {"npm": {"subcommands": {"publish": 1}}},
            "`pauselist.npm.subcommands.publish` should be boolean or table",
            id="subcommand-value",
        ),
        P(
            {"npm": {"subcommands": {"x": {"flag": ["-f"]}}}},
            "unknown option `pauselist.npm.subcommands.x.flag`",
            id="nested-unknown-key",
        ),
        P(
            {"npm": {"flags": ["-f"], "reason": 3}},
            "`pauselist.npm.reason` should be string",
            id="reason",
        ),
        P({"/bin/rm": True}, "`pauselist./bin/rm` should be a command name", id="path-name"),
    ],
)
def test_invalid_rule_is_reported_by_key(rules: dict[str, Any], problem: str) -> None:
    problems = validate_rules(rules)
    assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize(
    "rules",
    [
        P({"rm": True, "kill": False, "npm": LUA_FUNCTION}, id="scalars"),
        P(NPM_PUBLISH, id="subcommand-list"),
        P(DOCKER, id="subcommand-table"),
        P(TERRAFORM, id="nested"),
        P(RSYNC, id="flags"),
        P(MV, id="args"),
        P({"npm": {"subcommands": {"1": "publish", "push": {"flags": ["-f"]}}}}, id="mixed-table"),
    ],
)
def test_valid_rules_have_no_problems(rules: dict[str, Any]) -> None:
    assert validate_rules(rules) == []


def test_mixed_lua_table_subcommands_match() -> None:
    rules = {"npm": {"subcommands": {"1": "publish", "dist-tag": {"subcommands": ["rm"]}}}}
    assert check("npm publish", rules).pause
    assert check("npm dist-tag rm pkg beta", rules).pause
    assert not check("npm dist-tag ls pkg", rules).pause


def test_config_reports_one_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"pauselist": {"rm": 42, "git": True}})
    text = str(err.value)
    assert "`pauselist.rm` should be boolean, function or table" in text
    assert "pauselist.git" not in text


def test_every_default_rule_is_named_after_a_command() -> None:
    assert set(DEFAULT_RULES) >= {
        "rm", "git", "dd", "mkfs", "shutdown", "reboot", "poweroff", "halt", "mount", "umount",
        "fdisk", "parted", "iptables", "ip6tables", "kill", "killall", "pkill", "chmod", "chown",
        "systemctl", "npm", "pip", "pip3", "cargo", "find",
    }  # fmt: skip
