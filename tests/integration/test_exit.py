"""Neovim's exit with a prepared sandbox in place: nothing starts a host while Neovim waits for its
jobs, so `:qa!` never waits for ever.

When Neovim exits it closes its channels, signals each job once (SIGTERM, SIGKILL 2 s later) and
then waits until every job it has exited; callbacks (a job's ``on_exit``, timers such as the
host's deferred list of undoable runs) still run while it waits. A job started from one of them is
never signalled and its channel is never closed: a host started there keeps Neovim (in its
``proc_teardown``), the keeper (in ``waitpid``) and itself (idle, with no EOF and no SIGTERM)
waiting for ever. A prepared sandbox makes the host's own exit longer, so the window in which such
a callback runs grows with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import NVIM, alive, run_nvim_script, wait_for
from tests.integration.test_host import backend_available

pytestmark = pytest.mark.nvim

# Writes what it saw to $RB_SAID: the keeper's pid once a prepared sandbox is ready, then the
# answer of a request made from a job's on_exit while Neovim waits for its jobs to exit.
SCRIPT = """
vim.opt.rtp:prepend(vim.env.RB_ROOT)
vim.cmd('runtime plugin/run_bash.lua')
local rb = require('run_bash')
rb.setup({ sandbox = { backend = vim.env.RB_BACKEND } }) -- sandbox.prepare: its default
local said = {}
local function note(line)
  table.insert(said, line)
  local f = assert(io.open(vim.env.RB_SAID, 'w'))
  f:write(table.concat(said, '\\n') .. '\\n')
  f:close()
end
local ready = vim.wait(30000, function()
  for _, item in ipairs(rb.request('health') or {}) do
    if item.msg:match('^prepared sandboxes: active') and not item.msg:match(': 0 ready') then
      return true
    end
  end
  return false
end, 50)
note('prepared ' .. tostring(ready))
note('keeper ' .. vim.fn.jobpid(rb._job()))
-- Stopped by Neovim's exit: its on_exit runs while Neovim waits for its jobs.
vim.fn.jobstart({ 'sleep', '1000' }, { on_exit = function()
  local _, err = rb.request('sessions')
  note('on_exit: ' .. tostring(err) .. ' | job ' .. tostring(rb._job()))
end })
vim.cmd('qa!')
"""


@pytest.mark.parametrize("backend", ["sandlock", "bubblewrap"])
def test_a_request_while_neovim_waits_for_its_jobs_starts_no_host(tmp_path: Path, backend: str):
    if NVIM is None:
        pytest.skip("no Neovim")
    if not backend_available(backend):
        pytest.skip(f"{backend} is not available here")
    said = tmp_path / "said"
    try:
        run_nvim_script(tmp_path, SCRIPT, 60, RB_SAID=str(said), RB_BACKEND=backend)
    except AssertionError as e:
        raise AssertionError(f"{e}: {said.read_text()}") from None
    lines = said.read_text().splitlines()
    assert "prepared true" in lines, lines  # the default prepared the next run's sandbox
    # The control: the request was made, from inside the exit, and was refused.
    on_exit = [line for line in lines if line.startswith("on_exit:")]
    assert on_exit and "Neovim is exiting" in on_exit[0] and on_exit[0].endswith("job nil"), lines
    keeper = int(next(line for line in lines if line.startswith("keeper "))[len("keeper ") :])
    wait_for(lambda: not alive([keeper]), timeout=8)
