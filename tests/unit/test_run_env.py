"""A run's environment: what the options and the host's environment give every run is kept
(``RunEnv``, shared with the prepared sandboxes) and made again when either changes; each run
still gets its own temp dir and session tag."""

from __future__ import annotations

import asyncio
import os

import pytest

from run_bash.config import parse_config
from run_bash.sessions import SessionManager

PRINT = 'printf "%s|%s|%s" "${RB_PASS_A-unset}" "${RB_SET-unset}" "${RB_PASS_TOKEN-unset}"'


@pytest.fixture
async def mgr(tmp_path):
    m = SessionManager(
        parse_config({"sandbox": {"backend": "none", "env": {"pass": ["RB_PASS_*"]}}}),
        loop=asyncio.get_running_loop(),
        state_dir=str(tmp_path / "state"),
        environ={**os.environ, "RB_PASS_A": "1", "RB_PASS_TOKEN": "secret"},
    )
    os.makedirs(m.state_dir, mode=0o700)
    yield m
    await m.shutdown()


async def run(m: SessionManager, cmd: str):
    s = m.start(cmd, cwd=m.state_dir, unsandboxed_ok=True)
    return await asyncio.wait_for(m.wait_result(s.id), 60)


async def test_the_kept_environment_follows_the_options_and_the_host(mgr):
    first = await run(mgr, PRINT)
    assert first.output == "1|unset|unset", first.output  # a name that looks secret is not passed
    assert any("RB_PASS_TOKEN looks secret" in n for n in first.notices), first.notices
    kept = mgr.launching.env.kept
    assert kept is not None
    # The control: nothing changed, the same answer serves the next run.
    again = await run(mgr, 'printf "%s %s" "$TMPDIR" "$RUN_BASH_SESSION"; echo; ' + PRINT)
    assert mgr.launching.env.kept is kept
    tmp, tag = again.output.splitlines()[0].split()
    assert tag == again.id and tmp != "" and again.output.endswith("1|unset|unset")
    # The host's environment changed: the next run sees it.
    mgr.environ["RB_PASS_A"] = "2"
    assert (await run(mgr, PRINT)).output == "2|unset|unset"
    # New options: made again from them.
    mgr.config = parse_config(
        {"sandbox": {"backend": "none", "env": {"pass": ["RB_PASS_*"], "set": {"RB_SET": "x"}}}}
    )
    assert (await run(mgr, PRINT)).output == "2|x|unset"
    assert mgr.launching.env.kept is not kept
    assert mgr.spares.env is mgr.launching.env  # the prepared sandboxes are made with the same
