"""Other agents' project settings, which run commands as the user, are kept like `.envrc`.

Claude Code runs the hooks of ``.claude/settings.json`` (and the scripts they call beside it) and
starts the MCP servers of ``.mcp.json``; Gemini CLI those of ``.gemini/settings.json``; once the
user has trusted the project, neither asks again when the files change, and CodeCompanion starts
both as ACP agents in the project. An existing settings directory is read-only inside the run
(the scripts in it too, whatever its size), a new one, or a new ``.mcp.json``, stops the run and
is removed. The
agents are not installed here: the judge is the files' state after the run; the control is the
``none`` backend, where the same run changes them.
"""

from __future__ import annotations

import json

import pytest

from tests.security.conftest import CONTROL

HOOK = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch /tmp/x"}]}]}}
ARM = (
    f"echo '{json.dumps(HOOK)}' > .claude/settings.json; echo 'touch /tmp/x' >> .claude/fmt.sh; "
    f"mkdir .claude/commands; echo {CONTROL}"
)


def claude_dir(world) -> dict[str, str]:
    """A `.claude` with settings, a script its hook calls, and more than a member directory may
    hold (1,100 skills, a 17 MiB file): kept whole without a copy, it does not stop runs."""
    d = world.project / ".claude"
    (d / "skills").mkdir(parents=True)
    for i in range(1100):
        (d / "skills" / f"s{i}.md").write_text("skill\n")
    with open(d / "skills" / "big.bin", "wb") as f:
        f.truncate(17 << 20)
    (d / "settings.json").write_text("{}\n")
    (d / "fmt.sh").write_text("#!/bin/sh\nexec prettier -w .\n")
    return files(d)


def files(d) -> dict[str, str]:
    return {p.name: p.read_text() for p in d.iterdir() if p.is_file()}


def test_existing_settings_and_their_scripts_are_read_only(sbx, world):
    before = claude_dir(world)
    r = sbx.run(ARM)
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    d = world.project / ".claude"
    assert files(d) == before and not (d / "commands").exists()
    # Control: without the sandbox the same run arms them.
    sbx.unconfined().run(ARM)
    assert json.loads((d / "settings.json").read_text()) == HOOK
    assert "touch /tmp/x" in (d / "fmt.sh").read_text()


@pytest.mark.parametrize(
    "name, make",
    [
        (".mcp.json", "echo '{\"mcpServers\": {}}' > .mcp.json"),
        (".gemini", "mkdir .gemini && echo '{}' > .gemini/settings.json"),
    ],
    ids=[".mcp.json", ".gemini"],
)
def test_new_settings_are_removed(sbx, world, name, make):
    r = sbx.run(f"echo {CONTROL}; {make}; sleep 5; echo survived")
    assert CONTROL in r.output and "survived" not in r.output, r.output
    assert not (world.project / name).exists()
    assert any(f"protected file {name} was created" in n for n in r.notices), r.notices
    sbx.unconfined().run(make)
    assert (world.project / name).exists()
