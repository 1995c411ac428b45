"""The help file: tags are valid, and every command and config key has one."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from run_bash.config import DEFAULTS, FREE_TABLES
from tests.conftest import NVIM, ROOT


def dotted_keys(table, prefix=""):
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value and dotted not in FREE_TABLES:
            yield from dotted_keys(value, dotted + ".")
        else:
            yield dotted


HELP = (ROOT / "doc" / "run_bash.txt").read_text()
TAGS = set(re.findall(r"\*([^*\s]+)\*", HELP))


@pytest.mark.parametrize("key", sorted(dotted_keys(DEFAULTS)))
def test_every_config_key_has_a_tag(key):
    assert f"run_bash-config-{key}" in TAGS


@pytest.mark.parametrize(
    "command", ["RunBash", "RunBashSessions", "RunBashKill", "RunBashOutput", "RunBashLog"]
)
def test_every_command_has_a_tag(command):
    assert f":{command}" in TAGS
    assert f'new("{command}"' in (ROOT / "lua" / "run_bash" / "commands.lua").read_text()


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
    builtin = {"vim.ui.input()", ":UpdateRemotePlugins", "confirm()", ":qa", ":checkhealth"}
    missing = sorted(link for link in links - TAGS - builtin if not link.startswith("g:"))
    assert missing == []


def test_first_and_last_lines():
    lines = HELP.splitlines()
    assert lines[0].startswith("*run_bash.txt*")
    assert lines[-1].strip() == "vim:tw=78:ts=8:noet:ft=help:norl:"
