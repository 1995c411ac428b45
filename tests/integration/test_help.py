"""The help file: tags are valid, and every command and config key has one."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from run_bash.agent import ACTIONS
from run_bash.config import option_keys
from tests.conftest import NVIM, ROOT, wait_for

HELP = (ROOT / "doc" / "run_bash.txt").read_text()
TAGS = set(re.findall(r"\*([^*\s]+)\*", HELP))


@pytest.mark.parametrize("key", sorted(option_keys()))
def test_every_config_key_has_a_tag(key):
    assert f"run_bash-config-{key}" in TAGS


@pytest.mark.parametrize(
    "command",
    [
        "RunBash",
        "RunBashSessions",
        "RunBashKill",
        "RunBashOutput",
        "RunBashLog",
        "RunBashChanges",
        "RunBashUndo",
    ],
)
def test_every_command_has_a_tag(command):
    assert f":{command}" in TAGS
    assert f'new("{command}"' in (ROOT / "lua" / "run_bash" / "commands.lua").read_text()


@pytest.mark.parametrize("action", ACTIONS)
def test_every_tool_action_has_a_tag(action):
    assert f"run_bash-action-{action}" in TAGS


def test_the_tool_schema_offers_exactly_the_actions_the_host_accepts():
    lua = (ROOT / "lua" / "run_bash" / "tool_schema.lua").read_text()
    listed = re.search(r"M\.ACTIONS = \{([^}]*)\}", lua)
    assert listed is not None
    assert tuple(re.findall(r'"(\w+)"', listed[1])) == ACTIONS


def test_helptags_builds_without_errors(tmp_path):
    if NVIM is None:
        pytest.skip("no Neovim")
    doc = tmp_path / "doc"
    shutil.copytree(ROOT / "doc", doc, ignore=shutil.ignore_patterns("tags", "parts"))
    out = subprocess.run(
        [NVIM, "--clean", "--headless", "-c", f"helptags {doc}", "-c", "qa!"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0
    assert "E154" not in out.stderr and "Error" not in out.stderr, out.stderr
    assert (doc / "tags").exists()


def test_help_links_point_to_existing_tags():
    prose = re.sub(r"`[^`\n]*`", "", HELP)  # |a|b| inside `code` is not a link
    links = set(re.findall(r"\|([^|\s]+)\|", prose))
    builtin = {
        "vim.ui.input()",
        ":UpdateRemotePlugins",
        "confirm()",
        ":qa",
        ":checkhealth",
        "vim.wait()",
        ":checktime",
        "luv",
    }
    missing = sorted(link for link in links - TAGS - builtin if not link.startswith("g:"))
    assert missing == []


def test_first_and_last_lines():
    lines = HELP.splitlines()
    assert lines[0].startswith("*run_bash.txt*")
    assert lines[-1].strip() == "vim:tw=78:ts=8:noet:ft=help:norl:"


def help_defaults_block() -> str:
    """The Lua table after "Defaults: >lua" in the configuration section, verbatim."""
    start = HELP.index("Defaults: >lua\n") + len("Defaults: >lua\n")
    end = HELP.index("\n<\n", start)
    return HELP[start:end]


@pytest.mark.nvim
def test_the_help_defaults_block_is_a_valid_setup(editor):
    """Pasting the defaults from `:help run_bash-config` into setup() works (its empty tables
    reach Python as lists), and a bad key in the same block is named (the control)."""
    block = help_defaults_block()
    assert block.lstrip().startswith("{") and "pauselist = {}" in block
    editor.lua("_G.__msgs = {}; vim.notify = function(m, l) table.insert(_G.__msgs, {m, l}) end")
    editor.lua(f"require('run_bash').setup({block})")
    assert editor.lua("return require('run_bash').request('sessions')") == []
    bad = block.replace("pauselist = {},", "pauselist = {}, bogus = 1,")
    editor.lua(f"require('run_bash').setup({bad})")
    assert editor.lua("return require('run_bash').request('sessions')") == []
    # Notifications arrive in order: when the control's arrives, one for the defaults would have.
    msgs = wait_for(lambda: editor.lua("return _G.__msgs"))
    assert len(msgs) == 1 and "unknown option `bogus`" in msgs[0][0], msgs
