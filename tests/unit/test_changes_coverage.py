"""What undo covers and never touches: ignored content within its budget, ignore rules from before
the run, mode-000 and unreadable paths, files made by the run, and the index the approval gate
reads. Real files, real git, real processes as the command; the store as the host uses it."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import time

import pytest

from run_bash.changes import ChangeStore, Limits, NotRecorded, Token
from run_bash.changes.coverage import covers
from run_bash.changes.snapshot import born_after
from run_bash.changes.store import file_clock

from .changes_util import CLOCK_REALTIME_COARSE, begin, git_repo, sh, tree_hash


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


def store_with(tmp_path, home, **limits) -> ChangeStore:
    return ChangeStore(str(tmp_path / "state" / "undo"), Limits(**limits), home=str(home))


@pytest.fixture
def repo(tmp_path):
    p = tmp_path / "proj"
    git_repo(p)
    return p


def test_a_file_born_in_the_tick_the_run_began_counts_as_older(tmp_path):
    """File times are coarse (a tick, or a floor shared by every file since), so a file made
    just before the run began can carry the run's start stamp: a birth time equal to it counts
    as older (undo keeps the file), and only a later one as born during the run (the control).
    The birth time is read with coreutils' ``stat``, not with the code under test."""
    f = tmp_path / "f"
    f.write_bytes(b"x")
    out = subprocess.run(["stat", "-c", "%.9W %i", str(f)], capture_output=True, text=True)
    secs, ino = out.stdout.split()
    if out.returncode != 0 or secs.startswith(("0.", "-")):
        pytest.skip("this file system gives no birth time")
    whole, frac = secs.split(".")
    born = int(whole) * 10**9 + int(frac)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert not born_after(fd, "f", int(ino), born)
        assert born_after(fd, "f", int(ino), born - 1)
    finally:
        os.close(fd)


def _fine_stamp(d) -> None:
    """Make the kernel hand out a fine-grained file time (Linux 6.13+ multigrain timestamps): a
    file whose times were just read is changed, which also raises the floor every later stamp
    starts from, so files made right after carry stamps ahead of the coarse clock."""
    a = d / "stamp-bump"
    a.write_bytes(b"")
    os.stat(a)
    with open(a, "ab") as fh:
        fh.write(b"x")


def test_the_run_start_stamp_is_after_every_file_made_before_it(tmp_path):
    """A file made just before a run began must never look born during it (undo would delete
    bytes from before). Its stamp can be ahead of the coarse clock; the run's start stamp
    (``file_clock``) is the kernel's own stamp, never behind it. Control: a file made after the
    start stamp is stamped at or after it."""
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    ahead_of_coarse = 0
    for i in range(200):
        _fine_stamp(tmp_path)
        before = tmp_path / f"before{i}"
        before.write_bytes(b"")
        coarse = time.clock_gettime_ns(CLOCK_REALTIME_COARSE)
        start = file_clock(str(store_dir))
        after = tmp_path / f"after{i}"
        after.write_bytes(b"")
        b, a = before.stat().st_mtime_ns, after.stat().st_mtime_ns
        ahead_of_coarse += b > coarse
        assert b <= start <= a, (b, start, a)
        before.unlink()
        after.unlink()
    print(f"stamps ahead of the coarse clock: {ahead_of_coarse}/200")


def test_a_file_the_run_moved_in_is_kept_though_made_just_before_it_began(tmp_path, home, repo):
    """The undo of a run that moved an unkept ignored file into the project keeps that file even
    when it was made with a fine-grained stamp just before the run began. Control: the file the
    run made (small enough to be kept) is removed."""
    sh("mkdir -p vendor && echo vendor/ >> .gitignore", repo)
    store = store_with(tmp_path, home, max_file_size=10_000, ignored_total=1000)
    for i in range(5):
        _fine_stamp(tmp_path)
        blob = os.urandom(30000)
        (repo / "vendor" / "blob").write_bytes(blob)
        tok = begin(store, f"r{i}", repo)
        sh("head -c 2000 /dev/urandom > made.bin && mv vendor/blob moved.bin", repo)
        store.finish(tok)
        store.undo(f"r{i}")
        assert not (repo / "made.bin").exists()
        assert (repo / "moved.bin").read_bytes() == blob
        (repo / "moved.bin").unlink()


# -- the .gitignore exposure: undo never deletes what it never stored ------------------------------


@pytest.mark.parametrize("budget", [0, 64 << 20], ids=["over the budget", "within the budget"])
def test_gitignore_exposure_never_deletes_secrets_env(tmp_path, home, repo, budget):
    """A run that removes the line ignoring ``secrets/`` must not make ``secrets/.env`` look added:
    undo would delete it, and its content was never stored (the budget 0 case)."""
    sh("mkdir secrets && echo TOKEN=s3cret > secrets/.env && echo secrets/ >> .gitignore", repo)
    sh("git add .gitignore && git commit -qm ignore-secrets", repo)
    store = store_with(tmp_path, home, ignored_total=budget)
    tok = begin(store, "r1", repo)
    assert tok.before.entry("secrets")[0] == ("i" if budget == 0 else "d")
    sh("sed -i '/secrets/d' .gitignore && echo also >> src/app.py", repo)
    cs = store.finish(tok)
    # The rules from before the run decide: secrets/ is what it was, nothing in it is "added".
    assert {c.path for c in cs.changes} == {".gitignore", "src/app.py"}
    store.undo("r1")
    assert (repo / "secrets" / ".env").read_text() == "TOKEN=s3cret\n"
    assert "secrets/" in (repo / ".gitignore").read_text()
    # Positive control: the next run classifies with the rules now on disk (secrets/ is
    # covered now that it is not ignored) and its deletion is undone byte-exact.
    sh("sed -i '/secrets/d' .gitignore", repo)
    tok = begin(store, "r2", repo)
    assert tok.before.entry("secrets")[0] == "d"
    sh("rm -rf secrets", repo)
    store.finish(tok)
    store.undo("r2")
    assert (repo / "secrets" / ".env").read_text() == "TOKEN=s3cret\n"


def test_an_ignored_tree_over_the_budget_is_named_with_its_size_and_left_alone(
    tmp_path, home, repo
):
    sh(
        "mkdir -p node_modules/a && for i in $(seq 1 30); do head -c 1000 /dev/zero > "
        "node_modules/a/f$i; done && echo node_modules/ >> .gitignore && echo tiny > .env && "
        "echo .env >> .gitignore",
        repo,
    )
    store = store_with(tmp_path, home, ignored_total=10_000)
    tok = begin(store, "r1", repo)
    # .env (tiny) is kept; node_modules/ (30 kB) does not fit and is not even entered.
    assert tok.before.entry(".env")[0] == "f"
    assert tok.before.entry("node_modules")[0] == "i" and "node_modules" not in tok.before.dirs
    sh("rm -rf node_modules .env", repo)
    cs = store.finish(tok)
    line = cs.summary()
    assert "D .env" in line
    assert "not recovered: node_modules/ (ignored, 29.3 KiB, over undo.ignored_total)" in line
    res = store.undo("r1")
    assert [x["path"] for x in res["not_recovered"]] == ["node_modules"]
    assert (repo / ".env").read_text() == "tiny\n"


def test_each_ignored_file_is_kept_up_to_its_own_limit(tmp_path, home, repo):
    sh("head -c 5000 /dev/urandom > big.log && echo small > small.log", repo)
    store = store_with(tmp_path, home, ignored_file_max=4096)
    tok = begin(store, "r1", repo)
    assert tok.before.entry("small.log")[0] == "f" and tok.before.entry("big.log")[0] == "i"
    sh("rm big.log small.log", repo)
    store.finish(tok)
    res = store.undo("r1")
    assert (repo / "small.log").read_text() == "small\n"
    assert res["not_recovered"] == [
        {"path": "big.log", "why": "not recovered: ignored, 4.9 KiB, over undo.ignored_file_max"}
    ]


def test_a_file_the_run_made_is_removed_only_when_the_undo_keeps_it(tmp_path, home, repo):
    """Files the run added: one it created small enough to be kept is removed by undo (undoing
    the undo brings it back); one over the limit, though born during the run, stays (nothing
    could bring it back, and it may hold older bytes); one it moved in from an ignored tree that
    was not kept (its bytes existed before) stays. Undo says so for both."""
    sh(
        "mkdir -p vendor && head -c 30000 /dev/urandom > vendor/blob && echo vendor/ >> .gitignore",
        repo,
    )
    blob = (repo / "vendor" / "blob").read_bytes()
    store = store_with(tmp_path, home, max_file_size=10_000, ignored_total=1000)
    tok = begin(store, "r1", repo)
    sh(
        "head -c 2000 /dev/urandom > made.bin && head -c 20000 /dev/urandom > big.bin && "
        "mv vendor/blob moved.bin",
        repo,
    )
    store.finish(tok)
    made, big = (repo / "made.bin").read_bytes(), (repo / "big.bin").read_bytes()
    res = store.undo("r1", new_run_id="u1")
    assert res["removed"] == ["made.bin"] and not (repo / "made.bin").exists()
    assert (repo / "big.bin").read_bytes() == big  # born during the run, not kept: stays
    assert (repo / "moved.bin").read_bytes() == blob  # existed before: never deleted
    why = {x["path"]: x["why"] for x in res["not_recovered"]}
    assert why["big.bin"] == "left in place: not kept by this undo (over 9.8 KiB)"
    assert set(why) == {"big.bin", "moved.bin", "vendor"}
    store.undo("u1")
    assert (repo / "made.bin").read_bytes() == made  # what the undo removed, it gives back


def test_a_mode_000_file_is_read_and_restored_not_a_conflict(tmp_path, home, repo):
    if os.geteuid() != 0:
        pytest.skip("root reads a mode-000 file; a normal user's store: the test after this")
    f = repo / "locked.txt"
    f.write_text("private\n")
    f.chmod(0)
    store = store_with(tmp_path, home)
    tok = begin(store, "r1", repo)
    assert tok.before.entry("locked.txt")[:2] == ("f", 0)
    sh("chmod 600 locked.txt && echo changed > locked.txt && chmod 000 locked.txt", repo)
    store.finish(tok)
    res = store.undo("r1")
    assert res["conflicts"] == [] and res["restored"] == ["locked.txt"]
    assert f.stat().st_mode & 0o777 == 0
    f.chmod(0o600)
    assert f.read_text() == "private\n"


NOBODY_SCRIPT = r"""
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from run_bash.changes import ChangeStore, Token
proj, root = sys.argv[2], sys.argv[3]
store = ChangeStore(root, home="/nonexistent-home")
out = {}
tok = store.begin("r1", proj)
assert isinstance(tok, Token), tok
out["kinds"] = {n: tok.before.entry(n)[0] for n in ("secret.txt", "closed", "open.txt")}
subprocess.run("chmod 600 secret.txt && echo run > secret.txt && echo more >> open.txt && "
               "chmod 700 closed && touch closed/new", shell=True, cwd=proj, check=True)
cs = store.finish(tok)
out["changes"] = [(c.path, c.kind) for c in cs.changes]
res = store.undo("r1")
out["undo"] = {k: res[k] for k in ("conflicts", "errors", "not_recovered", "restored")}
print(json.dumps(out))
"""


@pytest.fixture
def open_tmp():
    """A temp directory other users can reach (pytest's own are private to root)."""
    import tempfile
    from pathlib import Path

    d = tempfile.mkdtemp(prefix="run_bash-nobody-")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_unreadable_files_and_directories_of_a_user_are_left_in_place_not_conflicts(open_tmp):
    """As a user without root's override, a mode-000 file or directory cannot be read: it is
    listed, compared by its stat, never deleted or overwritten by undo, and not a conflict."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs setpriv and root, to run the store as another user")
    nobody = pwd.getpwnam("nobody")
    tmp_path = open_tmp
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "Makefile").write_text("all:\n")
    (proj / "open.txt").write_text("open\n")
    (proj / "secret.txt").write_text("before\n")
    (proj / "closed").mkdir()
    (proj / "closed" / "inside").write_text("inside\n")
    root = tmp_path / "store"
    root.mkdir()
    for p in (proj, proj / "open.txt", proj / "secret.txt", proj / "Makefile", root):
        os.chown(p, nobody.pw_uid, nobody.pw_gid)
    os.chown(proj / "closed", nobody.pw_uid, nobody.pw_gid)
    os.chown(proj / "closed" / "inside", nobody.pw_uid, nobody.pw_gid)
    (proj / "secret.txt").chmod(0)
    (proj / "closed").chmod(0)
    src = tmp_path / "python"  # a copy nobody can read (the worktree may not be)
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "..", "python"), src)
    run = subprocess.run(
        ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
         "--inh-caps=-all", "--bounding-set=-all",
         sys.executable, "-c", NOBODY_SCRIPT, os.path.abspath(src), str(proj), str(root)],
        capture_output=True, text=True, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["kinds"] == {"secret.txt": "u", "closed": "u", "open.txt": "f"}
    undo = out["undo"]
    assert undo["conflicts"] == [] and undo["errors"] == []
    assert undo["restored"] == ["open.txt"]
    left = {x["path"]: x["why"] for x in undo["not_recovered"]}
    assert set(left) == {"secret.txt", "closed"}, left
    assert all(w.startswith("left in place") for w in left.values())
    (proj / "secret.txt").chmod(0o600)
    assert (proj / "secret.txt").read_text() == "run\n"  # not overwritten: its old bytes unknown
    assert (proj / "closed" / "new").exists() and (proj / "closed" / "inside").exists()
    assert (proj / "open.txt").read_text() == "open\n"  # positive control: restored


# -- what the approval gate reads ------------------------------------------------------------------


def test_coverage_of_paths_follows_the_index(tmp_path, home, repo):
    sh(
        "mkdir -p node_modules && head -c 3000 /dev/zero > node_modules/x && "
        "echo node_modules/ >> .gitignore && head -c 20000 /dev/urandom > src/huge.bin && "
        "ln -s /etc link",
        repo,
    )
    store = store_with(tmp_path, home, ignored_total=1000, max_file_size=10_000)
    snap = begin(store, "r1", repo).before
    p = str(repo)
    assert covers(snap, p, [f"{p}/docs", f"{p}/build", f"{p}/notes.md", f"{p}/absent/x"]) is None
    assert "ignored" in covers(snap, p, [f"{p}/node_modules"])
    assert "node_modules" in covers(snap, p, [p], git=True)  # git may rewrite a tracked file
    assert "over undo.max_file_size" in covers(snap, p, [f"{p}/src"])
    assert "is a symlink" in covers(snap, p, [f"{p}/link/passwd"])
    assert "outside the project" in covers(snap, p, ["/tmp/x"])
    assert "repository data" in covers(snap, p, [f"{p}/.git"])
    sh("rm -rf node_modules src/huge.bin link", repo)
    snap = begin(store, "r2", repo).before
    assert covers(snap, p, [p], git=True) is None  # git's own .git does not count for git
    assert "repository data" in covers(snap, p, [p])


def test_a_project_without_a_project_file_records_nothing(tmp_path, home):
    d = tmp_path / "loose"
    d.mkdir()
    (d / "f").write_text("x")
    got = store_with(tmp_path, home).begin("r1", str(d))
    assert isinstance(got, NotRecorded) and "is in no project" in str(got)


def test_a_run_that_changes_nothing_walks_nothing(tmp_path, home, repo):
    store = store_with(tmp_path, home)
    store.finish(begin(store, "r0", repo))
    walks, quick = store.walks, store.quick_walks
    for i in range(5):
        store.finish(begin(store, f"r{i + 1}", repo))
    assert (store.walks, store.quick_walks) == (walks, quick)  # inotify saw nothing: no walk
    before = tree_hash(repo)
    assert before == tree_hash(repo)


def test_a_write_through_one_name_of_a_hard_link_is_seen_at_the_other(tmp_path, home, repo):
    """inotify reports the directory of the name written through; the other name's directory is
    listed again too, so the quick end sees both (without waiting for a full check)."""
    os.link(repo / "docs" / "index.md", repo / "src" / "linked.md")
    store = store_with(tmp_path, home)
    store.finish(begin(store, "r0", repo))
    store.settle()
    tok = begin(store, "r1", repo)
    walks = store.walks
    sh("echo through-docs >> docs/index.md", repo)
    cs = store.finish(tok)
    assert store.walks == walks  # no full walk: the quick end listed both directories
    assert {c.path for c in cs.changes} == {"docs/index.md", "src/linked.md"}
    store.undo("r1")
    assert (repo / "docs" / "index.md").read_text() == "# Title\n"
    assert (repo / "src" / "linked.md").read_text() == "# Title\n"


def test_a_run_whose_writable_part_is_ignored_records_nothing(tmp_path, home, repo):
    (repo / "build" / "deep").mkdir(parents=True)
    got = store_with(tmp_path, home).begin(
        "r1", str(repo / "build" / "deep"), writable=[str(repo / "build" / "deep")]
    )
    assert isinstance(got, NotRecorded) and "build is ignored" in got.reason
    # The control: a directory nothing ignores is recorded.
    tok = store_with(tmp_path, home).begin("r2", str(repo / "src"), writable=[str(repo / "src")])
    assert isinstance(tok, Token)


def test_a_dotdot_is_resolved_after_what_comes_before_it(tmp_path, home, repo):
    """The kernel resolves ``lnk/..`` at the symlink's target: ``lnk/../refs`` with ``lnk ->
    .git/objects`` is ``.git/refs``, never ``refs``. A ``..`` is followed only over a directory
    the index holds; the control: over a real directory it is the parent, as written."""
    os.symlink(".git/objects", repo / "lnk")
    store = store_with(tmp_path, home)
    snap = begin(store, "r1", repo).before
    p = str(repo)
    assert "`..` after lnk, a symlink" in covers(snap, p, [f"{p}/lnk/../refs"])
    assert "`..` after absent" in covers(snap, p, [f"{p}/absent/../src"])
    assert "`..` after notes.md" in covers(snap, p, [f"{p}/notes.md/../src"])
    assert "leads out of the project" in covers(snap, p, [f"{p}/../proj/build"])
    assert covers(snap, p, [f"{p}/docs/../build", f"{p}/src/pkg/../../build"]) is None
    assert "repository data" in covers(snap, p, [f"{p}/docs/../.git"])


def test_a_nested_repository_counts_for_git_effects(tmp_path, home, repo):
    """``git clean -ffd`` deletes an untracked nested repository, ``.git`` and all: only the
    project's own ``.git`` does not count for git's effects. The control: without the nested
    repository the same question is covered."""
    sh("mkdir -p vendor/lib && cd vendor/lib && git init -q && echo 'int x;' > lib.c", repo)
    store = store_with(tmp_path, home)
    snap = begin(store, "r1", repo).before
    p = str(repo)
    assert "vendor/lib/.git is repository data" in covers(snap, p, [p], git=True)
    sh("rm -rf vendor", repo)
    snap = begin(store, "r2", repo).before
    assert covers(snap, p, [p], git=True) is None


def test_a_write_in_place_is_not_covered_for_a_file_with_another_name(tmp_path, home, repo):
    """``truncate`` of a file hard-linked outside the project empties the outside name too,
    which undo never sees: a file with more than one name is not covered for a write in place,
    under a directory too. The controls: deleting it is (the other name keeps the data), and a
    write in place of a file with one name is."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\n")
    os.link(outside, repo / "docs" / "notes.txt")
    store = store_with(tmp_path, home)
    snap = begin(store, "r1", repo).before
    p = str(repo)
    for target in (f"{p}/docs/notes.txt", f"{p}/docs"):
        why = covers(snap, p, [target], inplace=True)
        assert why is not None and "docs/notes.txt has more than one name" in why
        assert covers(snap, p, [target]) is None
    assert covers(snap, p, [f"{p}/docs/index.md", f"{p}/src"], inplace=True) is None
