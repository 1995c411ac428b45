"""#23: what the policy memo and the tree scan rely on to skip work, and when they must not."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from run_bash import fsdeps
from run_bash.paths import Tops, is_under
from run_bash.sandbox.treescan import TreeScan
from tests.conftest import wait_for


def settle(rec: fsdeps.Reads) -> None:
    """Make a recording old enough to trust (as if it were taken ``SETTLED_NS`` later)."""
    rec.started_ns += fsdeps.SETTLED_NS + 1_000_000_000


def age(*paths: os.PathLike[str] | str) -> None:
    """Give files change times in the past: a recording may then be reused."""
    for p in paths:
        os.utime(p, (time.time() - 10, time.time() - 10))


def test_a_recording_holds_until_something_it_read_changes(tmp_path):
    f = tmp_path / "f"
    f.write_text("a")
    with fsdeps.recording() as rec:
        assert os.path.exists(f)
        assert not os.path.exists(tmp_path / "absent")
    settle(rec)
    assert rec.usable and rec.still()
    f.write_text("b")  # the same size: the change and modification times tell
    assert not rec.still()


def test_a_file_that_appears_where_none_was_is_seen(tmp_path):
    with fsdeps.recording() as rec:
        assert not os.path.exists(tmp_path / ".envrc")
    settle(rec)
    assert rec.still()
    (tmp_path / ".envrc").write_text("x")
    assert not rec.still()


def test_an_entry_of_a_listing_that_changes_mode_is_seen(tmp_path):
    """A chmod changes no directory listing; the entries a scandir yielded are noted."""
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    with fsdeps.recording() as rec, os.scandir(tmp_path) as it:
        names = [e.name for e in it if e.is_file()]
    assert names == ["tool"]
    settle(rec)
    assert rec.still()
    os.chmod(tmp_path / "tool", 0o755)
    assert not rec.still()


def test_a_young_change_time_is_never_trusted(tmp_path):
    (tmp_path / "f").write_text("a")
    with fsdeps.recording() as rec:
        os.stat(tmp_path / "f")
    assert not rec.settled and not rec.still()  # written just now: within one tick of a change
    age(tmp_path / "f")
    with fsdeps.recording() as rec2:
        os.stat(tmp_path / "f")
    # The file's change time is still now (utime moves it); the control: aged recording holds.
    settle(rec2)
    assert rec2.still()


def test_a_read_it_cannot_name_makes_it_unusable(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        with fsdeps.recording() as rec, pytest.raises(FileNotFoundError):
            os.stat("x", dir_fd=fd)
        settle(rec)
        assert not rec.usable and not rec.still()
        with fsdeps.recording() as control:
            assert not os.path.exists(tmp_path / "x")
        settle(control)
        assert control.usable and control.still()
    finally:
        os.close(fd)


def test_recording_puts_os_back_and_sees_only_its_thread(tmp_path):
    # Work an earlier test left on a worker thread (a manager's next sandbox being prepared)
    # may still be recording: its end puts ``os`` back.
    wait_for(lambda: fsdeps._active == 0, timeout=30)
    before = os.stat
    with fsdeps.recording():
        assert os.stat is not before
    assert os.stat is before


def test_a_check_added_by_a_part_must_hold_too(tmp_path):
    state = {"ok": True}
    with fsdeps.recording() as rec:
        fsdeps.add_check(lambda: state["ok"])
    settle(rec)
    assert rec.still()
    state["ok"] = False
    assert not rec.still()


def test_tops_is_is_under_any(tmp_path):
    tops = Tops(["/a/b", "/c/", "/x/y/z"])
    for path in ("/a/b", "/a/b/c", "/a/bc", "/a", "/c", "/c/d/e", "/x/y", "/x/y/z/w", "rel", "/"):
        assert (path in tops) == any(is_under(path, t) for t in ("/a/b", "/c", "/x/y/z"))
    assert "/anything" in Tops(["/"])
    assert not Tops([])


def git_init(path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True)


def test_the_tree_scan_sees_a_repository_made_after_its_last_walk(tmp_path):
    (tmp_path / "a/b").mkdir(parents=True)
    scan = TreeScan()
    try:
        assert scan.find(str(tmp_path)) == ([], False)
        assert scan.find(str(tmp_path)) == ([], False)  # unchanged: not walked again
        git_init(tmp_path / "a/b/new")
        found, _ = scan.find(str(tmp_path))
        assert any(p == str(tmp_path / "a/b/new/.git") for p, _k in found), found
        # A repository moved in from elsewhere (a rename, not a create) is seen too.
        other = tmp_path.parent / f"{tmp_path.name}-elsewhere"
        git_init(other)
        os.rename(other, tmp_path / "a/moved")
        assert any(p == str(tmp_path / "a/moved/.git") for p, _k in scan.find(str(tmp_path))[0])
    finally:
        scan.close()


def test_the_tree_scan_walks_again_after_lost_events(tmp_path):
    (tmp_path / "d").mkdir()
    scan = TreeScan()
    try:
        scan.find(str(tmp_path))
        scan._forget_all()  # what a queue overflow does
        git_init(tmp_path / "d/r")
        assert any(p == str(tmp_path / "d/r/.git") for p, _k in scan.find(str(tmp_path))[0])
    finally:
        scan.close()


def test_a_parent_looked_at_is_its_identity_a_listed_one_its_entries(tmp_path):
    """realpath lstat's every parent: a file added to a parent does not change what it found,
    but a directory that was listed changed."""
    (tmp_path / "proj").mkdir()
    with fsdeps.recording() as looked:
        os.path.realpath(tmp_path / "proj")
    with fsdeps.recording() as listed:
        os.listdir(tmp_path)
    settle(looked)
    settle(listed)
    (tmp_path / "unrelated").write_text("x")
    assert looked.still()
    assert not listed.still()
    os.rename(tmp_path / "proj", tmp_path / "proj2")  # the control: the path leads elsewhere
    assert not looked.still()


@pytest.mark.parametrize("settled", [True, False])
async def test_a_policy_asked_for_while_it_is_computed_waits_for_that_answer(
    tmp_path, monkeypatch, settled
):
    """A run arriving while its spare's preparation computes the same policy takes that answer
    as it is (one computation, and no second look at what it read: it is as recent as one of
    its own); a policy of another directory is computed beside it (the control: the count sees
    a second computation when there is one). An answer that could not be kept (what it read was
    still changing) is not handed on: the one who waited computes its own."""
    import asyncio
    import threading

    from run_bash.sessions import launching

    monkeypatch.setattr(fsdeps, "SETTLED_NS", 0)  # fresh test files count as settled
    if not settled:  # what each computation read was still changing: its answer is not kept
        monkeypatch.setattr(fsdeps.Reads, "settled", property(lambda self: False))
    real = launching.build_policy
    calls: list[str] = []
    first_in, go = threading.Event(), threading.Event()

    def counted(config, cwd, **kw):
        calls.append(cwd)
        first_in.set()
        assert go.wait(30)
        return real(config, cwd, **kw)

    monkeypatch.setattr(launching, "build_policy", counted)
    projects = [tmp_path / "a", tmp_path / "b"]
    for p in projects:
        (p / ".git").mkdir(parents=True)
    m = sandlock_manager(tmp_path)
    try:
        got: dict[str, list[object]] = {"a": [], "b": []}
        looks: dict[str, int] = {}  # the memo's checks, by asking thread
        kept = m.launching._kept

        def counted_kept(key, config, look=True):
            name = threading.current_thread().name
            looks[name] = looks.get(name, 0) + 1
            return kept(key, config, look)

        m.launching._kept = counted_kept  # type: ignore[method-assign]

        def ask(project):
            got[project.name].append(m.launching.policy(str(project)))

        same = [threading.Thread(target=ask, args=(projects[0],)) for _ in range(2)]
        same[0].start()
        assert first_in.wait(30)
        same[1].start()
        other = threading.Thread(target=ask, args=(projects[1],))
        other.start()

        def waiting_on_a() -> bool:  # the second "a" is at the gate, or computing itself
            gates = list(m.launching._computing.values())
            return len(calls) >= 3 or any(gate[1] >= 2 for gate in gates)

        deadline = time.monotonic() + 30
        while not (len(calls) >= 2 and waiting_on_a()) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        go.set()
        for t in [*same, other]:
            t.join(30)
        if settled:
            # a: one computation; the one who waited looked at the memo once, before the gate
            assert sorted(calls) == [str(projects[0]), str(projects[1])], calls
            assert got["a"][0] is got["a"][1] and len(got["b"]) == 1
            assert looks[same[0].name] == 2 and looks[same[1].name] == 1, looks
        else:
            assert sorted(calls) == [str(projects[0])] * 2 + [str(projects[1])], calls
            assert got["a"][0] is not got["a"][1] and len(got["b"]) == 1
    finally:
        go.set()
        await m.shutdown()


async def test_an_answer_handed_on_before_a_caller_came_is_not_taken_unchecked(
    tmp_path, monkeypatch
):
    """A caller that comes to a policy's gate after its answer was handed on (other callers
    still hold the gate) found the kept policy stale: it computes its own, and does not take
    the older one. The control: a caller at an empty gate computes too, and a caller arriving
    while the memo holds a fresh policy takes that one."""
    import threading

    from run_bash.sessions import launching

    monkeypatch.setattr(fsdeps, "SETTLED_NS", 0)  # fresh test files count as settled
    real = launching.build_policy
    calls: list[str] = []

    def counted(config, cwd, **kw):
        calls.append(cwd)
        return real(config, cwd, **kw)

    monkeypatch.setattr(launching, "build_policy", counted)
    project = tmp_path / "a"
    (project / ".git").mkdir(parents=True)
    m = sandlock_manager(tmp_path)
    try:
        keys: list[tuple[object, ...]] = []
        kept = m.launching._kept

        def noting_kept(key, config, look=True):
            keys.append(key)
            return kept(key, config, look)

        m.launching._kept = noting_kept  # type: ignore[method-assign]
        first = m.launching.policy(str(project))
        assert len(calls) == 1
        assert m.launching.policy(str(project)) is first and len(calls) == 1  # kept: taken
        # The kept policy went stale, and an older answer is still at the gate, handed on
        # before this caller came (another caller holds the gate).
        older = object()
        m.launching._memo.clear()
        m.launching._computing[keys[0]] = [threading.Lock(), 1, older]
        got = m.launching.policy(str(project))
        assert got is not older and len(calls) == 2, (got, calls)
        assert m.launching._computing[keys[0]][2] is got  # handed on to those waiting now
    finally:
        await m.shutdown()


# -- armed recordings: inotify instead of a stat of every path ----------------------------------


def armed_recording(tmp_path, reads) -> fsdeps.Reads:
    """A settled recording of ``reads()``, looked at once (which arms its watches)."""
    from run_bash import inotify

    if not inotify.sees_every_change(str(tmp_path)):
        pytest.skip("the test directory is on a filesystem inotify cannot vouch for")
    with fsdeps.recording() as rec:
        reads()
    settle(rec)
    assert rec.still() and rec.looks == 1
    assert rec.armed
    assert rec.still() and rec.looks == 1, "armed: the second look reads events, not stats"
    return rec


def tree(tmp_path):
    """tmp/a/b/f (a file), tmp/a/listed/ (a listed directory), tmp/a/other (a sibling), a
    hard link to f elsewhere, tmp/s/link (a symlink to tmp/s/target); all with old times."""
    b = tmp_path / "a" / "b"
    b.mkdir(parents=True)
    f = b / "f"
    f.write_text("one")
    listed = tmp_path / "a" / "listed"
    listed.mkdir()
    (listed / "x").write_text("x")
    (tmp_path / "a" / "other").write_text("o")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.link(f, elsewhere / "hard")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "target").write_text("t")
    (tmp_path / "s" / "other").write_text("o")
    os.symlink(tmp_path / "s" / "target", tmp_path / "s" / "link")
    age(f, b, listed, listed / "x", tmp_path / "a", tmp_path / "s" / "target", elsewhere)
    return f


def reads_of(tmp_path, f):
    def reads():
        os.stat(f)
        os.listdir(tmp_path / "a" / "listed")
        os.stat(tmp_path / "s" / "link")  # through a symlink: looked at by stat every time
        assert not os.path.exists(tmp_path / "absent" / "x")

    return reads


def write_keeping_times(path, text):
    st = os.stat(path)
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda t, f: write_keeping_times(f, "two"), id="same-size-write-times-kept"),
        pytest.param(lambda t, f: (t / "elsewhere" / "hard").write_text("TWO"), id="via-hardlink"),
        pytest.param(lambda t, f: os.chmod(f, 0o600), id="chmod"),
        pytest.param(lambda t, f: f.unlink(), id="removed"),
        pytest.param(
            lambda t, f: (os.rename(t / "a", t / "a2"), f.parent.mkdir(parents=True), f.touch()),
            id="a-directory-above-replaced",
        ),
        pytest.param(lambda t, f: (t / "a" / "listed" / "new").touch(), id="listed-entry-added"),
        pytest.param(
            lambda t, f: ((t / "absent").mkdir(), (t / "absent" / "x").touch()), id="absent-made"
        ),
        pytest.param(
            lambda t, f: (
                os.unlink(t / "s" / "link"),
                os.symlink(t / "s" / "other", t / "s" / "link"),
            ),
            id="symlink-retargeted",
        ),
    ],
)
def test_an_armed_recording_sees_every_change_to_what_it_read(tmp_path, change):
    f = tree(tmp_path)
    rec = armed_recording(tmp_path, reads_of(tmp_path, f))
    change(tmp_path, f)
    assert not rec.still()


def test_an_armed_recording_ignores_what_it_did_not_read(tmp_path):
    """Writes to a sibling, to a file in a directory above and to /dev/null, and a directory made
    where an absent path's parent would be but not the path: nothing it read changed. The first
    three are not even a look; the last is a look (a name on its way) that still holds."""
    f = tree(tmp_path)
    rec = armed_recording(tmp_path, lambda: (reads_of(tmp_path, f)(), os.stat("/dev/null")))
    (tmp_path / "a" / "other").write_text("changed")
    (tmp_path / "a" / "b" / "sibling").write_text("new")
    with open("/dev/null", "w") as null:
        null.write("x")
    assert rec.still() and rec.looks == 1
    (tmp_path / "absent").mkdir()
    assert rec.still() and rec.looks == 2
    assert rec.armed
    assert rec.still() and rec.looks == 2  # armed again
    (tmp_path / "absent" / "x").touch()  # the control: the path itself now exists
    assert not rec.still()


def test_events_it_could_not_keep_mean_a_look(tmp_path):
    """More events than the log keeps (here: unrelated ones) and it looks again, by stat."""
    f = tree(tmp_path)
    rec = armed_recording(tmp_path, reads_of(tmp_path, f))
    noise = tmp_path / "a" / "b" / "noise"
    for _ in range(fsdeps.EVENT_LOG // 2 + 10):  # two events each: made, removed
        noise.touch()
        noise.unlink()
    assert rec.still() and rec.looks == 2
    f.write_text("changed")  # the control
    assert not rec.still()


def test_a_look_gets_exactly_the_events_since_its_own_oldest_first(tmp_path):
    """``since`` hands a look the events numbered after its last one, in order, whatever else
    the log holds (it reads the newest few, not the whole log); none when none came."""
    w = fsdeps._watches()
    assert w is not None
    wd = w.add(str(tmp_path), fsdeps.DIR_MASK)
    start = w.pump()
    for i in range(5):
        (tmp_path / f"n{i}").touch()
    last = w.pump()
    got = w.since(start)
    assert got is not None
    assert [e[0] for e in got] == list(range(start + 1, last + 1))
    assert [e[3] for e in got if e[1] == wd] == [f"n{i}" for i in range(5)]
    middle = start + 2
    assert [e[0] for e in w.since(middle) or []] == list(range(middle + 1, last + 1))
    assert w.since(last) == []


def test_a_file_where_runs_may_write_is_stat_ed_every_time(tmp_path):
    """A file under a writable directory can change through a shared writable mapping made
    before the watch, without an event: it is looked at by stat on every check."""
    import mmap

    f = tmp_path / "w" / "conf"
    f.parent.mkdir()
    f.write_bytes(b"a" * 4096)
    age(f)
    with open(f, "r+b") as fh:
        mapped = mmap.mmap(fh.fileno(), 4096)
    try:
        with fsdeps.recording() as rec:
            os.stat(f)
        settle(rec)
        assert rec.still([str(tmp_path / "w")]) and rec.looks == 1
        assert rec.armed
        assert rec.still([str(tmp_path / "w")]) and rec.looks == 1
        before = fsdeps.sig_of(str(f), True)
        mapped[:1] = b"b"
        mapped.flush()
        if fsdeps.sig_of(str(f), True) == before:
            pytest.skip("this filesystem does not move a file's times on a mapped write")
        assert not rec.still([str(tmp_path / "w")])
    finally:
        mapped.close()


def sandlock_manager(tmp_path, **environ: str):
    """A manager of the running loop configured for sandlock, its state under ``tmp_path``,
    with ``environ`` over this process's environment."""
    import asyncio

    from run_bash.config import parse_config
    from run_bash.sessions import SessionManager

    return SessionManager(
        parse_config({"sandbox": {"backend": "sandlock"}}),
        loop=asyncio.get_running_loop(),
        state_dir=str(tmp_path / "state"),
        environ={**os.environ, **environ},
    )


def policy_world(tmp_path):
    """A home with a git config, a project in it with its own, both settled, and a manager of
    the running loop whose policies read them: (home, project, manager)."""

    home = tmp_path / "home"
    project = home / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (home / ".gitconfig").write_text("[user]\n\tname = x\n")
    for p in (project / ".git" / "config", home / ".gitconfig"):
        age(p)
    m = sandlock_manager(tmp_path, HOME=str(home))
    return home, project, m


async def test_files_a_policy_lets_runs_write_are_stat_ed_at_every_check(tmp_path):
    """The policy memo passes the directories its policies let runs write to: a file the
    policy read there (the project's git config) is never left to inotify alone; a file it
    read elsewhere (the user's git config) is (the control)."""
    home, project, m = policy_world(tmp_path)
    try:
        old = fsdeps.SETTLED_NS
        fsdeps.SETTLED_NS = 0  # fresh test files count as settled
        try:
            first = m.launching.policy(str(project))
            assert m.launching.policy(str(project)) is first  # kept, and armed by that look
        finally:
            fsdeps.SETTLED_NS = old
        (reads,) = [hit[2] for hit in m.launching._memo.values()]
        assert reads.armed
        armed = reads._armed
        assert armed is not None
        slow = {k[0] for k in armed.slow}
        recorded = {k[0] for k in reads.sigs}
        assert str(project / ".git" / "config") in recorded & slow
        assert str(home / ".gitconfig") in recorded - slow
    finally:
        await m.shutdown()


async def test_a_policy_is_armed_by_whoever_computed_it(tmp_path):
    """The watches that vouch for a kept policy are set by whoever computed it (a spare's
    preparation, beside no run), once it has asked for its sandbox (``arm_kept``: a run may be
    waiting for that sandbox), so the next run's check reads events instead of looking at
    every file again; a change made after the computation is still seen (the control)."""
    home, project, m = policy_world(tmp_path)
    old = fsdeps.SETTLED_NS
    fsdeps.SETTLED_NS = 0  # fresh test files count as settled
    try:
        first = m.launching.policy(str(project))
        (reads,) = [hit[2] for hit in m.launching._memo.values()]
        if fsdeps._watches() is None:
            pytest.skip("no inotify here")
        assert not reads.armed, "not before the preparation's sandbox is asked for"
        m.launching.arm_kept()
        assert reads.armed and reads.looks == 1, "armed by the preparation that computed it"
        assert m.launching.policy(str(project)) is first
        assert reads.looks == 1, "the kept policy's check read events, not every file"
        (home / ".gitconfig").write_text("[user]\n\tname = someone else\n")
        assert m.launching.policy(str(project)) is not first  # the control: the change is seen
    finally:
        fsdeps.SETTLED_NS = old
        await m.shutdown()


def test_a_file_whose_directory_above_is_replaced_is_seen(tmp_path):
    """Only the file is recorded (no directory on its way is a key): a directory above it moved
    away and made again, with a file of the same name, is an event on that directory."""
    f = tree(tmp_path)
    rec = armed_recording(tmp_path, lambda: os.stat(f))
    assert len(rec.sigs) == 1
    os.rename(tmp_path / "a", tmp_path / "a2")
    f.parent.mkdir(parents=True)
    f.write_text("one")
    assert not rec.still()


def test_watches_take_at_most_an_eighth_of_the_users_limit(tmp_path, monkeypatch):
    """The guard's watches keep runs safe and must not find the limit used up by these, which
    only save time: at most an eighth of the user's limit (4096 at most); with none left, every
    path is stat'ed and changes are still seen."""
    limit = tmp_path / "max_user_watches"
    for value, share in (("8192\n", 1024), ("1000000\n", 4096), ("80\n", 10), ("junk", 1024)):
        limit.write_text(value)
        assert fsdeps._max_watches(str(limit)) == share
    w = fsdeps._watches()
    if w is None:
        pytest.skip("no inotify here")
    monkeypatch.setattr(w, "max", 0)
    f = tree(tmp_path)
    with fsdeps.recording() as rec:
        os.stat(f)
    settle(rec)
    assert rec.still() and rec.still() and rec.looks == 1
    assert len(rec._armed.slow) == len(rec.sigs)  # nothing watched: every path by stat
    f.write_text("two")
    assert not rec.still()


async def test_a_kept_policy_is_computed_again_when_a_path_link_into_the_project_appears(
    tmp_path,
):
    """The read-only PATH directories' links are read unnoted (hundreds of them) and checked by
    asking again: a kept policy holds while nothing changed (the control), and a link into the
    project that appears in a PATH directory makes the next run's policy new, with it kept."""
    _home, project, m = policy_world(tmp_path)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "sys").symlink_to("/usr/bin/true")
    m.environ["PATH"] = f"{tools}:{m.environ['PATH']}"
    old = fsdeps.SETTLED_NS
    fsdeps.SETTLED_NS = 0  # fresh test files count as settled
    try:
        first = m.launching.policy(str(project))
        assert m.launching.policy(str(project)) is first
        # In a directory of its own: one at the top of the project (or in its `bin`) would make
        # the project its code unit, which cannot be kept read-only (the run is refused).
        (project / "scripts").mkdir()
        (project / "scripts/tool").write_text("#!/bin/sh\n")
        (tools / "tool").symlink_to(project / "scripts/tool")
        again = m.launching.policy(str(project))
        assert again is not first
        assert str(tools) in [pd.path for pd in again.host_read.path_dirs]
        assert str(project / "scripts") in again.sealed
        # Kept in turn while nothing changes (the units and the hard-link check hold).
        assert m.launching.policy(str(project)) is again
    finally:
        fsdeps.SETTLED_NS = old
        await m.shutdown()


async def test_a_kept_policy_is_computed_again_when_a_path_program_gets_a_name_in_the_project(
    tmp_path,
):
    """A hard link made from the project's side to a program on PATH changes neither PATH
    directory: the check of a kept policy reads the programs' link counts, so the next run's
    policy keeps the new name read-only (the control: kept while nothing changes)."""
    _home, project, m = policy_world(tmp_path)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "tool").write_text("#!/bin/sh\n")
    m.environ["PATH"] = f"{tools}:{m.environ['PATH']}"
    old = fsdeps.SETTLED_NS
    fsdeps.SETTLED_NS = 0
    try:
        first = m.launching.policy(str(project))
        assert m.launching.policy(str(project)) is first
        os.link(tools / "tool", project / "tool")
        again = m.launching.policy(str(project))
        assert again is not first
        assert str(project / "tool") in again.sealed
        assert m.launching.policy(str(project)) is again
    finally:
        fsdeps.SETTLED_NS = old
        await m.shutdown()
