"""Start-up in a real headless Neovim: setup() starts the host in the background, a run asked for
meanwhile waits in a queue (never in the editor) and gets its result, nothing starts a host while
Neovim exits, and what no run needs is not imported."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.conftest import NVIM, ROOT, alive, run_nvim_script, wait_for

pytestmark = pytest.mark.nvim


def test_a_run_asked_for_while_the_host_starts_is_queued_and_gets_its_result(editor):
    got = editor.lua(
        """
        _G.__r, _G.__started = nil, nil
        local rb = require('run_bash')
        rb.setup({ sandbox = { backend = 'none' } })
        local info, err = rb.run({ cmd = 'echo queued-ok', unsandboxed_ok = true },
          function(r) _G.__r = r end)
        assert(info, err)
        rb.on_started(info.id, function(s) _G.__started = s.id end)
        return { info = info, up = require('run_bash.host').is_up() }
        """
    )
    # run() came back before the host was up: it never waited for it.
    assert got["up"] is False and got["info"]["status"] == "queued", got
    r = wait_for(lambda: editor.lua("return _G.__r"), timeout=30)
    assert r["id"] == got["info"]["id"] and r["exit_code"] == 0, r
    assert r["output"] == "queued-ok\n"
    assert editor.lua("return _G.__started") == r["id"]
    listed = editor.lua("return require('run_bash').request('sessions')")
    assert [s["id"] for s in listed] == [r["id"]]


def test_runs_queued_together_all_start_and_a_killed_one_never_runs(editor):
    work = Path(editor.work)
    got = editor.lua(
        """
        _G.__rs, _G.__kill = {}, nil
        local rb = require('run_bash')
        rb.setup({ sandbox = { backend = 'none' } })
        local ids = {}
        for _, name in ipairs({ 'first', 'killed', 'third' }) do
          local info = assert(rb.run({ cmd = 'touch ' .. name, unsandboxed_ok = true },
            function(r) _G.__rs[name] = r end))
          ids[name] = info.id
        end
        rb.kill(ids.killed, function(reply) _G.__kill = reply end)
        return ids
        """
    )
    rs = wait_for(lambda: (rs := editor.lua("return _G.__rs")) and len(rs) == 3 and rs)
    assert rs["killed"]["status"] == "cancelled" and "nothing ran" in rs["killed"]["error"]
    assert editor.lua("return _G.__kill")["result"]["id"] == got["killed"]
    for name in ("first", "third"):  # the queue did run the others (the control)
        assert rs[name]["exit_code"] == 0 and rs[name]["id"] == got[name], rs[name]
        assert (work / name).exists()
    assert not (work / "killed").exists()
    listed = {s["id"] for s in editor.lua("return require('run_bash').request('sessions')")}
    assert listed == {got["first"], got["third"]}


def test_a_host_that_cannot_start_fails_each_queued_run_once(editor, tmp_path):
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nexec /usr/bin/env -i PATH=/usr/bin:/bin python3 -I -S "$@"\n')
    fake.chmod(0o755)
    editor.nvim.vars["run_bash_python"] = str(fake)
    editor.lua(
        """
        _G.__rs = {}
        vim.notify = function() end
        local rb = require('run_bash')
        rb.setup({ sandbox = { backend = 'none' } })
        for i = 1, 2 do
          assert(rb.run({ cmd = 'true', unsandboxed_ok = true }, function(r)
            table.insert(_G.__rs, r)
          end))
        end
        """
    )
    rs = wait_for(lambda: (rs := editor.lua("return _G.__rs")) and len(rs) == 2 and rs, 30)
    for r in rs:
        assert "did not start" in r["error"] and "cannot load the host" in r["error"], r
    editor.lua("vim.wait(300)")  # nothing comes twice
    assert len(editor.lua("return _G.__rs")) == 2


def test_a_host_that_never_answers_fails_the_queued_runs(editor, tmp_path):
    """A host stuck before its `ready` (a hang in an import) must not hang the queue."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexec sleep 300\n")
    fake.chmod(0o755)
    editor.nvim.vars["run_bash_python"] = str(fake)
    editor.lua(
        """
        _G.__r = nil
        vim.notify = function() end
        require('run_bash.host')._H.START_TIMEOUT_MS = 500
        local rb = require('run_bash')
        rb.setup({ sandbox = { backend = 'none' } })
        assert(rb.run({ cmd = 'true', unsandboxed_ok = true }, function(r) _G.__r = r end))
        """
    )
    r = wait_for(lambda: editor.lua("return _G.__r"), 30)
    assert "did not answer within 0.5 s" in r["error"], r
    assert editor.lua("return require('run_bash')._job()") is None


EXIT_SCRIPT = """
vim.opt.rtp:prepend(vim.env.RB_ROOT)
vim.cmd('runtime plugin/run_bash.lua')
local rb = require('run_bash')
rb.setup({ sandbox = { backend = 'none' } })
assert(rb.request('sessions'))
local said = {}
local function note(what)
  table.insert(said, what)
  local f = assert(io.open(vim.env.RB_SAID, 'w'))
  f:write(table.concat(said, '\\n'))
  f:close()
end
-- Requests made while Neovim exits, after VimLeavePre stopped the host: a deferred one (as the
-- host's own list of undoable runs, asked 1 s after it is up) and a scheduled one. They run while
-- Neovim waits for its jobs to exit.
vim.api.nvim_create_autocmd('VimLeave', { callback = function()
  vim.schedule(function()
    vim.wait(5000, function() return rb._job() == nil end, 10)
    local v, err = rb.request('sessions')
    note('scheduled: ' .. tostring(err) .. ' job ' .. tostring(rb._job()))
  end)
  vim.defer_fn(function()
    local v, err = rb.request('sessions')
    note('deferred: ' .. tostring(err) .. ' job ' .. tostring(rb._job()))
  end, 0)
end })
vim.cmd('qa!')
"""


def test_nothing_starts_a_host_while_neovim_exits(tmp_path):
    """A request scheduled or deferred into Neovim's exit (after VimLeavePre stopped the host)
    starts no host (one started while Neovim waits for its jobs keeps it waiting for ever:
    ``test_exit.py``)."""
    if NVIM is None:
        pytest.skip("no Neovim")
    said = tmp_path / "said"
    try:
        pids = run_nvim_script(tmp_path, EXIT_SCRIPT, 30, RB_SAID=str(said))
    except AssertionError as e:
        raise AssertionError(f"{e}: something started a host") from None
    lines = said.read_text().splitlines()
    # Both requests ran (the control): one was refused, the other answered by the host that
    # was still exiting or refused too; neither left a new host behind.
    assert any(line.startswith("scheduled:") for line in lines), lines
    assert any(line.startswith("deferred:") for line in lines), lines
    scheduled = next(line for line in lines if line.startswith("scheduled:"))
    assert "Neovim is exiting" in scheduled and scheduled.endswith("job nil"), lines
    assert all(line.endswith("job nil") or "exiting" in line for line in lines), lines
    wait_for(lambda: not alive(pids), timeout=8)


# Modules no run needs: imported only when used (a diff, an undo, health, the command line).
NOT_FOR_A_RUN = (
    "run_bash.health",
    "run_bash.agent",
    "run_bash.checker_cli",
    "run_bash.sandbox.cli",
    "run_bash.__main__",
    "run_bash.changes.undoing",
    "run_bash.changes.restore",
    "difflib",
)


def imported(log: Path) -> set[str]:
    """Every module named in a ``-X importtime`` log."""
    names = set()
    for line in log.read_text().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.mark.parametrize("wanted", ["sandlock", "none"])
def test_the_host_loads_what_runs_need_before_the_first_one_and_nothing_else(
    editor, tmp_path, wanted
):
    """What runs need is loaded before the first one; what no run needs is not loaded; nor is
    the sandlock SDK, whatever the backend: the sandbox launcher loads it and says what the
    backend check needs (the sandlock case runs its command under sandlock where it works)."""
    from tests.integration.test_host import backend_available

    log = tmp_path / "imports.log"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{ROOT}/.venv/bin/python" -X importtime "$@" 2>>"{log}"\n')
    python.chmod(0o755)
    if not (ROOT / ".venv/bin/python").exists():
        pytest.skip("no .venv (run `make deps`)")
    backend = "sandlock" if wanted == "sandlock" and backend_available("sandlock") else "none"
    editor.nvim.vars["run_bash_python"] = str(python)
    editor.lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)
    assert editor.lua("return require('run_bash').request('sessions')") == []
    up = imported(log)
    # Loaded before the first command (while nobody waited): the pause list and the change store.
    assert {"run_bash.checker.analysis", "run_bash.checker.rules", "run_bash.changes.store"} <= up
    (Path(editor.work) / "pyproject.toml").write_text("")  # a project: its runs are recorded
    r = editor.run_sync({"cmd": "echo hi > made.txt", "unsandboxed_ok": backend == "none"}, 60)
    assert r["exit_code"] == 0 and r["backend"] == backend, r
    assert "made.txt" in r["changes"]["summary"], r  # the run was recorded
    after_run = imported(log)
    assert not set(NOT_FOR_A_RUN) & after_run, sorted(set(NOT_FOR_A_RUN) & after_run)
    assert "sandlock" not in after_run, backend
    # The control: the log does see modules loaded later, on use.
    assert editor.lua("return require('run_bash').request('health')")
    got = editor.lua("local d, e = require('run_bash').diff(...); return { d = d, e = e }", r["id"])
    assert got.get("e") is None and "+hi" in got["d"]["text"], got
    assert {"run_bash.health", "difflib"} <= imported(log)


@pytest.mark.parametrize("backend", ["none", "sandlock"])
def test_the_launcher_starts_with_the_host_only_when_the_options_may_sandbox(editor, backend):
    """The host starts the sandbox launcher with itself (it comes up while the host imports),
    except when the options name no sandbox: then it would be a second Python for nothing. The
    host's log says which; the sandlock case is the control."""
    from tests.integration.test_host import backend_available

    if backend != "none" and not backend_available(backend):
        pytest.skip(f"{backend} unavailable here")
    log = Path(editor.lua("return require('run_bash.host').log_path()"))
    before = log.stat().st_size if log.exists() else 0
    editor.lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)
    assert editor.lua("return require('run_bash').request('sessions')") == []  # the host is up
    with log.open("rb") as f:
        f.seek(before)
        said = f.read().decode()
    started = "sandbox launcher: started with the host" in said
    skipped = "sandbox launcher: not started with the host" in said
    assert (started, skipped) == ((False, True) if backend == "none" else (True, False)), said
    # Nor did anything else start it before the first run: the backend check before `ready` is
    # skipped too (it would ask a launcher, started for it and closed again at setup).
    r = editor.lua(
        "return require('run_bash').request('run', { cmd = 'echo ran', unsandboxed_ok = true })"
    )
    sessions = "return require('run_bash').request('sessions')"
    wait_for(lambda: editor.lua(sessions)[0]["status"] == "exited", timeout=30)
    with log.open("rb") as f:
        f.seek(before)
        said = f.read().decode()
    assert ("sandbox launcher: fork server" in said) == (backend != "none"), (r, said)


def test_the_fork_server_forked_from_the_host_holds_nothing_of_the_host(editor):
    """The host forks its sandbox launcher while it has one thread: the fork server must hold
    none of the host's descriptors (the RPC channel's and stderr's pipes to Neovim, the log
    file), only /dev/null on fds 0-2 and its own sockets and pipes, and have a session of its
    own. Control: the host itself holds those pipes and the log, so the check sees them."""
    import psutil

    from tests.integration.test_host import backend_available

    if not backend_available("sandlock"):
        pytest.skip("sandlock unavailable here")
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'sandlock' } })")
    r = editor.run_sync({"cmd": "echo ran"}, 60)
    assert r["exit_code"] == 0 and r["backend"] == "sandlock", r
    keeper = psutil.Process(
        editor.nvim.funcs.jobpid(editor.lua("return require('run_bash')._job()"))
    )
    host = keeper.children()[0]
    log = Path(editor.lua("return require('run_bash.host').log_path()"))
    assert "(forked)" in log.read_text()

    def fds(pid: int) -> dict[int, str]:
        out = {}
        for name in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                out[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        return out

    host_fds = fds(host.pid)
    # The control: the host's channels to Neovim (RPC out on fd 1, stderr on 2; libuv makes
    # them socket pairs) and its log are open files a careless fork would share.
    assert all(host_fds[fd].startswith(("pipe:", "socket:")) for fd in (1, 2)), host_fds
    assert str(log) in host_fds.values(), host_fds
    server = next(c for c in forked_servers(host) if os.getsid(c.pid) == c.pid)
    held = fds(server.pid)
    assert [held.get(fd) for fd in (0, 1, 2)] == ["/dev/null"] * 3, held
    # Nothing the host has open is open in the fork server (a file shared by both would be
    # the same inode here; each end of a socket pair has its own).
    assert set(held.values()) & set(host_fds.values()) <= {"/dev/null"}, (held, host_fds)
    others = [t for fd, t in held.items() if fd > 2]
    assert all(t.startswith(("socket:", "pipe:")) for t in others), held


def test_a_killed_forked_fork_server_is_replaced_and_runs_go_on(editor):
    """The fork server forked at start is SIGKILLed: the next sandboxed command starts a new
    one (a Python of its own now: the host has threads) and runs; the dead one is reaped by
    then, not left a zombie."""
    import psutil

    from tests.integration.test_host import backend_available

    if not backend_available("sandlock"):
        pytest.skip("sandlock unavailable here")
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'sandlock' } })")
    assert editor.run_sync({"cmd": "echo one"}, 60)["output"] == "one\n"
    keeper = psutil.Process(
        editor.nvim.funcs.jobpid(editor.lua("return require('run_bash')._job()"))
    )
    host = keeper.children()[0]
    first = next(iter(forked_servers(host)))
    first.kill()

    def dead() -> bool:  # a zombie, or reaped already (the host may reap it at once)
        try:
            return first.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_for(dead)
    r = editor.run_sync({"cmd": "echo two"}, 60)
    assert r["output"] == "two\n" and r["backend"] == "sandlock", r
    wait_for(lambda: not first.is_running())  # reaped: no zombie left
    servers = [c for c in children_named(host) if "forkserver" in " ".join(cmdline_of(c))]
    assert len(servers) == 1 and servers[0].pid != first.pid, servers

    def zombies() -> list[int]:  # the run's own are reaped once it is let go of
        found = []
        for c in host.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if c.status() == psutil.STATUS_ZOMBIE:
                    found.append(c.pid)
        return found

    wait_for(lambda: not zombies())


def children_named(host):
    """The host's children that are still there once asked for their command line (git, which
    a policy computation may be running, comes and goes)."""
    import psutil

    out = []
    for c in host.children():
        with contextlib.suppress(psutil.NoSuchProcess):
            c.cmdline()
            out.append(c)
    return out


def cmdline_of(c) -> list[str]:
    """``c``'s command line; empty once it is gone (a child that came and went meanwhile)."""
    import psutil

    try:
        return c.cmdline()
    except psutil.NoSuchProcess:
        return []


def forked_servers(host):
    """The host's children forked from it as its fork server: the host's own command line."""
    import psutil

    out = []
    for c in children_named(host):
        with contextlib.suppress(psutil.NoSuchProcess):
            if c.cmdline() == host.cmdline():
                out.append(c)
    return out


def test_the_hosts_environment_stays_out_of_reach_of_runs_of_the_forked_fork_server(editor):
    """The fork server and each run's supervisor are forks of the host: the environment the host
    started with (Neovim's, here with a secret in it) is their /proc/PID/environ too. A sandboxed
    command reads none of it, however it looks (its parent, every process it can see). Controls:
    the host's view of the fork server's environ holds the secret, and the command reads its own
    environ."""
    import psutil

    from tests.integration.test_host import backend_available

    if not backend_available("sandlock"):
        pytest.skip("sandlock unavailable here")
    secret = "rb-host-secret-5a0d7c"
    editor.lua("vim.env.RB_HOST_SECRET = ...", secret)  # before the host starts: its environment
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'sandlock' } })")
    r = editor.run_sync(
        {
            "cmd": "cat /proc/$PPID/environ; for d in /proc/[0-9]*; do cat $d/environ; done; "
            "cat /proc/self/environ | tr '\\0' '\\n' | grep -c '^RUN_BASH_SESSION='"
        },
        60,
    )
    assert r["backend"] == "sandlock", r
    assert secret not in r["output"], r["output"]
    assert r["output"].rstrip().endswith("1"), r["output"]  # its own environ: readable
    keeper = psutil.Process(
        editor.nvim.funcs.jobpid(editor.lua("return require('run_bash')._job()"))
    )
    server = next(iter(forked_servers(keeper.children()[0])))
    with open(f"/proc/{server.pid}/environ", "rb") as f:
        assert secret.encode() in f.read()  # the control: the secret is there to be read
